"""Draft page parts: each page of a PDF the parse child reads, handed to the worker as it is
added to the package (page 1 at once, later pages gathered for a few ms: _Announcer), so a
client may read it before the job ends.

A page part is a ReadingPackage holding one page and the records of the assets that page
shows (their bytes are the job's assets), serialized deterministically: the same page gives the
same bytes, and so the same sha256, in any attempt. A draft is the page as read, before the
passes that need every page (headings, title, furniture, tables continued on the next page:
parsers/pdf.py); the package the job ends with holds the final pages.

The child sends drafts on stdout, base64 in event lines of one or more (_Announcer); one
larger than INLINE_MAX_BYTES is written to `<scratch>/pages/<number>.pb` first and announced
without its bytes. A file per page would cost each page ~0.2 ms of file system calls (more
than reading a text page).
The worker publishes them (parser_svc/work/page_parts.py). A document of one page has no
drafts: its final comes as soon.

Drafts are written only once someone reads the job's pages while it runs: they cost
the stack a fifth of its throughput on a long PDF (bench/README.md, "Drafts on demand"). The
worker says so by creating `<scratch>/drafts-wanted` (parser_svc/work/draft_switch.py); each
process looks for it as it adds a page (a stat, until it is there) and then drafts the pages it
added before, and from then on each page.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from docparse.proto_wire import length_delimited
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.confinement import start_small_thread


def page_part(package: rp.ReadingPackage, page: rp.Page) -> bytes:
    """The part of `package` that is `page`: the page and its assets' records. The bytes of
    `ReadingPackage(content_type=..., pages=[page], assets=[...])` serialized deterministically
    (its fields in number order), put together from the page's and the assets' own encodings:
    appending the page to a new package copied it (tests/parser_svc/child/test_page_part.py
    holds the two equal)."""
    shown = {image.asset_id for image in page.images}
    out = [_content_type(package.content_type), _encoded(_PAGES, page)]
    if shown:
        out += [_encoded(_ASSETS, a) for a in package.assets if a.asset_id in shown]
    return b"".join(out)


# In this order (2, 4, 8) a deterministic encoding writes them.
_FIELDS = rp.ReadingPackage.DESCRIPTOR.fields_by_name
_CONTENT_TYPE, _PAGES, _ASSETS = (_FIELDS[n].number for n in ("content_type", "pages", "assets"))


def _content_type(value: str) -> bytes:
    return length_delimited(_CONTENT_TYPE, value.encode()) if value else b""


def _encoded(field: int, message: rp.Page | rp.Asset) -> bytes:
    return length_delimited(field, message.SerializeToString(deterministic=True))


INLINE_MAX_BYTES = 32 * 1024
# After the first draft (page 1 goes at once), drafts gather in the child and go out together
# in one event line: each line costs the worker a wake of its event loop (~80 us, more than
# the JSON and base64 of a page), and each batch a thread trip and a script call
# (bench/README.md, "Drafts gathered in the child"). A draft waits at most GATHER_S, or
# GATHER_SHARE of the time since the first draft went out when that is longer: what it adds
# to a page's wait is about 5% of the time the page took to come. A line holds at most
# GATHER_PAGES drafts and LINE_BUDGET bytes of base64 (the worker reads lines of up to
# fork_server.EVENT_LINE_LIMIT).
GATHER_S = 0.004
GATHER_SHARE = 0.05
GATHER_PAGES = 32
LINE_BUDGET = 512 * 1024


def draft_path(scratch: Path, number: int) -> Path:
    return scratch / "pages" / f"{number}.pb"


def wanted_path(scratch: Path) -> Path:
    """The file whose presence tells the parse that someone reads its pages."""
    return scratch / "drafts-wanted"


class _Drafter:
    """A process's page hook: nothing while nobody reads the job's pages, then a draft of each
    page it added so far and of each page it adds after (`send`)."""

    def __init__(self, wanted: str, send: Callable[[int, bytes], None]) -> None:
        self.wanted, self.send = wanted, send
        self.on = False

    def __call__(self, package: rp.ReadingPackage, page: rp.Page, total: int) -> None:
        if total <= 1:  # a document of one page: its final comes as soon
            return
        if self.on:
            self.send(page.number, page_part(package, page))
        elif os.path.exists(self.wanted):
            self.on = True
            for earlier in package.pages:  # this page is the last of them
                self.send(earlier.number, page_part(package, earlier))


# While a PDF's drafts may be written: the file that says they are wanted.
wanted: str | None = None


# While a PDF's drafts are written: how a draft read by a sibling process (its page number and
# part, which page_siblings.Sibling receives on its pipe) reaches the worker.
relay: Callable[[int, bytes], None] | None = None


class _Announcer:
    """Announces drafts in event lines of one or more: {"event": "pages", "parts": [[3,
    "<base64>"], [4, null]]} (null: in the file draft_path names). A thread of its own sends
    what has waited its window while the parse is busy elsewhere (a slow page after fast
    ones); it runs only between the parse's Python steps, as any thread does while mupdf
    holds the interpreter."""

    def __init__(self, scratch: Path, emit: Callable[..., None]) -> None:
        self.scratch, self.emit = scratch, emit
        self.sent: dict[int, bytes] = {}  # page number -> digest of the part announced
        self.pending: list[tuple[int, str | None]] = []
        self.size, self.since = 0, 0.0
        self.first = 0.0  # when the first line went out (0: none yet)
        self.closed = False
        self.changed = threading.Condition()
        self.late: threading.Thread | None = None

    def send(self, number: int, data: bytes) -> None:
        digest = hashlib.blake2b(data, digest_size=16).digest()
        with self.changed:
            if self.sent.get(number) == digest:
                return
            self.sent[number] = digest
            inline: str | None = None
            if len(data) <= INLINE_MAX_BYTES:
                inline = base64.b64encode(data).decode()
            else:
                target = draft_path(self.scratch, number)
                target.parent.mkdir(exist_ok=True)
                target.write_bytes(data)  # whole before the event that names it
            size = len(inline or "")
            if self.size + size > LINE_BUDGET:
                self._announce()
            now, starting = time.monotonic(), not self.pending
            if starting:
                self.since = now
            self.pending.append((number, inline))
            self.size += size
            if (
                not self.first
                or len(self.pending) >= GATHER_PAGES
                or now - self.since >= self._window(now)
            ):
                self._announce()
            elif self.late is None:
                self.late = start_small_thread(self._announce_late, "drafts")
            elif starting:  # the thread waits for a first page to time
                self.changed.notify()

    def _window(self, now: float) -> float:
        """How long the oldest gathered draft may wait."""
        return max(GATHER_S, GATHER_SHARE * (now - self.first))

    def _announce(self) -> None:
        if self.pending:
            self.emit(event="pages", parts=self.pending)
            self.first = self.first or time.monotonic()
            self.pending, self.size = [], 0

    def _announce_late(self) -> None:
        with self.changed:
            while not self.closed:
                now = time.monotonic()
                left = self.since + self._window(now) - now
                if not self.pending:
                    self.changed.wait()
                elif left > 0:
                    self.changed.wait(left)
                else:
                    self._announce()

    def close(self) -> None:
        with self.changed:
            self._announce()
            self.closed = True
            self.changed.notify()
        if self.late is not None:
            self.late.join()


@contextlib.contextmanager
def writing_drafts(scratch: Path, emit: Callable[..., None]) -> Iterator[None]:
    """Meanwhile, once drafts are wanted (`wanted_path`), each page this process adds to a
    PDF's package of more than one page is written as a draft under `scratch` and announced
    with `emit` (the child's event line), and so is each page a sibling process
    (page_siblings.py) reads, as it reads it (`relay`): a sibling's range is readable while the
    child still reads its own, not only once the child adds it. A page is announced again only
    if its part differs from the one already sent (the child adds a sibling's pages as they
    were read; it reads a range again itself only when the sibling's cannot be added, which may
    read a page otherwise). Whatever is gathered is announced when the block ends. The PDF
    parser is imported here, not with this module: the parse child's imports are what a child's
    memory limit is counted from (zygote.py), and only a PDF's parse needs it."""
    from parser_svc.parsers import pdf_pages

    global relay, wanted
    announcer = _Announcer(scratch, emit)
    wanted = str(wanted_path(scratch))
    # A sibling replaces this hook with its own (sibling_drafts).
    pdf_pages.page_added, relay = _Drafter(wanted, announcer.send), announcer.send
    try:
        yield
    finally:
        pdf_pages.page_added, relay, wanted = None, None, None
        announcer.close()


def sibling_drafts(send: Callable[[int, bytes], None]) -> None:
    """In a sibling process: once drafts are wanted, each page it added to the range it reads
    and each page it adds after is sent as a draft part with `send` (to the child, which
    relays it), when the child writes drafts (its hook is set). The earlier ranges it read
    are the child's to draft, as it adds them."""
    from parser_svc.parsers import pdf_pages

    if pdf_pages.page_added is None or wanted is None:
        return
    pdf_pages.page_added = _Drafter(wanted, send)
