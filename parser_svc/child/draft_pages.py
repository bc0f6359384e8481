"""Draft page parts: each page of a PDF the parse child reads, handed to the worker the moment
it is added to the package, so a client may read it before the job ends.

A page part is a ReadingPackage holding one page and the records of the assets that page
shows (their bytes are the job's assets), serialized deterministically: the same page gives the
same bytes, and so the same sha256, in any attempt. A draft is the page as read, before the
passes that need every page (headings, title, furniture, tables continued on the next page:
parsers/pdf.py); the package the job ends with holds the final pages.

The child sends each draft on stdout, base64 in its event line: {"event": "page", "number":
3, "part": "..."}; one larger than INLINE_MAX_BYTES (the worker reads lines of at most 64 KiB)
is written to `<scratch>/pages/<number>.pb` first and announced without "part". A file per
page would cost each page ~0.2 ms of file system calls (more than reading a text page).
The worker publishes them (parser_svc/work/page_parts.py). A document of one page has no
drafts: its final comes as soon.
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from docparse.v1 import reading_package_pb2 as rp


def page_part(package: rp.ReadingPackage, page: rp.Page) -> bytes:
    """The part of `package` that is `page`: the page and its assets' records."""
    shown = {image.asset_id for image in page.images}
    part = rp.ReadingPackage(content_type=package.content_type)
    part.pages.append(page)
    part.assets.extend(asset for asset in package.assets if asset.asset_id in shown)
    return part.SerializeToString(deterministic=True)


INLINE_MAX_BYTES = 32 * 1024


def draft_path(scratch: Path, number: int) -> Path:
    return scratch / "pages" / f"{number}.pb"


@contextlib.contextmanager
def writing_drafts(scratch: Path, emit: Callable[..., None]) -> Iterator[None]:
    """Meanwhile, each page this process adds to a PDF's package of more than one page is
    written as a draft under `scratch` and announced with `emit` (the child's event line).
    Sibling processes (page_siblings.py) inherit the hook but write nothing: their pages are
    told when the child adds their range. The PDF parser is imported here, not with this
    module: the parse child's imports are what a child's memory limit is counted from
    (zygote.py), and only a PDF's parse needs it."""
    from parser_svc.parsers import pdf_pages

    owner = os.getpid()

    def added(package: rp.ReadingPackage, page: rp.Page, total: int) -> None:
        if total <= 1 or os.getpid() != owner:
            return
        data = page_part(package, page)
        if len(data) <= INLINE_MAX_BYTES:
            emit(event="page", number=page.number, part=base64.b64encode(data).decode())
            return
        target = draft_path(scratch, page.number)
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(data)  # whole before the event that names it
        emit(event="page", number=page.number)

    pdf_pages.page_added = added
    try:
        yield
    finally:
        pdf_pages.page_added = None
