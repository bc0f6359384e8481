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
import hashlib
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


# While a PDF's drafts are written: how a draft read by a sibling process (its page number and
# part, which page_siblings.Sibling receives on its pipe) reaches the worker.
relay: Callable[[int, bytes], None] | None = None


@contextlib.contextmanager
def writing_drafts(scratch: Path, emit: Callable[..., None]) -> Iterator[None]:
    """Meanwhile, each page this process adds to a PDF's package of more than one page is
    written as a draft under `scratch` and announced with `emit` (the child's event line), and
    so is each page a sibling process (page_siblings.py) reads, as it reads it (`relay`): a
    sibling's range is readable while the child still reads its own, not only once the child
    adds it. A page is announced again only if its part differs from the one already sent (the
    child adds a sibling's pages as they were read; it reads a range again itself only when
    the sibling's cannot be added, which may read a page otherwise). The PDF parser is
    imported here, not with this module: the parse child's imports are what a child's memory
    limit is counted from (zygote.py), and only a PDF's parse needs it."""
    from parser_svc.parsers import pdf_pages

    global relay
    sent: dict[int, bytes] = {}  # page number -> digest of the part announced

    def send(number: int, data: bytes) -> None:
        digest = hashlib.blake2b(data, digest_size=16).digest()
        if sent.get(number) == digest:
            return
        sent[number] = digest
        if len(data) <= INLINE_MAX_BYTES:
            emit(event="page", number=number, part=base64.b64encode(data).decode())
            return
        target = draft_path(scratch, number)
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(data)  # whole before the event that names it
        emit(event="page", number=number)

    def added(package: rp.ReadingPackage, page: rp.Page, total: int) -> None:
        if total > 1:  # a sibling replaces this hook with its own (sibling_drafts)
            send(page.number, page_part(package, page))

    pdf_pages.page_added, relay = added, send
    try:
        yield
    finally:
        pdf_pages.page_added, relay = None, None


def sibling_drafts(send: Callable[[int, bytes], None]) -> None:
    """In a sibling process: each page it adds is sent as a draft part with `send` (to the
    child, which relays it), when the child writes drafts (its hook is set)."""
    from parser_svc.parsers import pdf_pages

    if pdf_pages.page_added is None:
        return

    def added(package: rp.ReadingPackage, page: rp.Page, total: int) -> None:
        if total > 1:
            send(page.number, page_part(package, page))

    pdf_pages.page_added = added
