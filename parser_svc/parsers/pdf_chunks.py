"""The parse child's side of a long PDF read by more than one process (pdf_split.py says what
a chunk, a claim, a part and a re-read are): the chunks' numbers in a pipe every process
claims from, the child's way through the chunks in page order, and how a part is read and
added as if read here."""

from __future__ import annotations

import os
import select
import struct
from collections.abc import Callable
from dataclasses import dataclass

import pymupdf

from parser_svc.parsers import ProgressFn, pdf_pages, pdf_split
from parser_svc.parsers.pdf_pages import Reading, read_pages
from parser_svc.parsers.pdf_split import MAX_CHUNKS, ForkRange, Part, RangeReader, ReadRange

_NUMBER = struct.Struct("!I")


class ChunkClaims:
    """Chunk numbers 0..count-1, each handed to the first process that asks: a pipe filled
    before any sibling is forked (each inherits it), its write end closed, read 4 bytes at a
    time. A pipe serves one read at a time and every number in it is whole, so no two
    processes get the same one; a read past the last finds the end."""

    def __init__(self, count: int) -> None:
        if not 0 < count <= MAX_CHUNKS:
            raise ValueError(f"{count} chunks: 1 to {MAX_CHUNKS}")
        self.fd, write_fd = os.pipe()
        try:
            data = memoryview(b"".join(_NUMBER.pack(number) for number in range(count)))
            while data:  # at most 64 KB: the pipe holds it all, nothing waits
                data = data[os.write(write_fd, data) :]
        finally:
            os.close(write_fd)

    def next(self) -> int | None:
        data = os.read(self.fd, _NUMBER.size)
        return _NUMBER.unpack(data)[0] if len(data) == _NUMBER.size else None

    def close(self) -> None:
        os.close(self.fd)


@dataclass(frozen=True)
class ChildReading:
    """How the child reads a chunk: `here` into the package (every chunk before it is in);
    `ahead` into a Part while a sibling's earlier chunk is awaited, unless `may_read_ahead`
    says not now; `add` a part when its turn comes (its process: 0 the child, s sibling s),
    False when it cannot be added as read; `again` a chunk whose part was not added."""

    here: Callable[[range], None]
    ahead: Callable[[range], Part]
    may_read_ahead: Callable[[], bool]
    add: Callable[[Part, int], bool]
    again: Callable[[range], None]


def read_chunks(
    chunks: list[range],
    claims: ChunkClaims,
    siblings: list[RangeReader],
    reading: ChildReading,
    on_progress: Callable[[], None],
) -> None:
    """Every chunk into the package, in order: the child claimed chunk 0; the siblings claim
    theirs from `claims` as they go, and so does the child whenever it has nothing of its own
    to read in order."""
    mine, ahead = {0}, dict[int, Part]()  # mine: claimed here, not read yet
    claiming = True
    for number, pages in enumerate(chunks):
        while True:
            if number in mine:
                mine.discard(number)
                reading.here(pages)
                break
            if number in ahead:
                if not reading.add(ahead.pop(number), 0):
                    reading.again(pages)
                break
            answer = _answer(siblings, number)
            if answer is not None:
                owner, part = answer
                if part is None or not reading.add(part, owner):
                    reading.again(pages)
                break
            # A chunk of its own still to read (after this one) says a sibling has this one:
            # claim another only to read it ahead.
            ahead_ok = reading.may_read_ahead()
            if claiming and (ahead_ok or not mine):
                claimed = claims.next()
                if claimed is None:
                    claiming = False
                elif claimed == number or not ahead_ok:
                    mine.add(claimed)
                else:
                    ahead[claimed] = reading.ahead(chunks[claimed])
            elif not _wait(siblings, on_progress):  # claimed by a sibling that ended silent
                reading.again(pages)
                break


def _answer(siblings: list[RangeReader], number: int) -> tuple[int, Part | None] | None:
    """A sibling's answer for chunk `number`, if one came; raises a sibling's crash as soon as
    it is seen (not after the child read the rest of the document ahead)."""
    for owner, sibling in enumerate(siblings, 1):
        sibling.poll()
        if sibling.answered(number):
            return owner, sibling.take(number)
        if sibling.ended:
            sibling.finish()
    return None


def _wait(siblings: list[RangeReader], on_progress: Callable[[], None]) -> bool:
    """Waits for a message from any sibling still running; False when none is (their
    crashes raised)."""
    for sibling in siblings:
        if sibling.ended:
            sibling.finish()  # a crash is the parse's, whatever it had answered
    running = [sibling for sibling in siblings if not sibling.ended]
    if not running:
        return False
    ready, _, _ = select.select(running, [], [])
    for sibling in ready:
        sibling.read_some()
    on_progress()
    return True


def read_split(
    reading: Reading, chunks: list[range], processes: int, progress: ProgressFn, fork: ForkRange
) -> None:
    """`chunks` read by this process and `processes` - 1 siblings, each claiming the next
    chunk left when it is free (`read_chunks`)."""
    package, total = reading.package, sum(len(pages) for pages in chunks)
    read_range = _range_reader(reading)
    claims = ChunkClaims(len(chunks))
    claims.next()  # chunk 0, read here: page 1 before any sibling has started
    siblings: list[RangeReader] = []
    merged, ahead, shown = 0, [0, 0], 0  # ahead: pages read into parts here (done, this one)
    accepted: set[int] = set()

    def report(_done: int, _total: int, stage: str) -> None:
        nonlocal shown
        for sibling in siblings:
            sibling.poll()
        done = len(package.pages) - merged + sum(ahead) + sum(s.done for s in siblings)
        shown = max(shown, min(total, done))
        progress(shown, total, stage)

    def read_ahead(pages: range) -> pdf_split.Part:
        part = read_range(pages, lambda done, _t, stage: _counted(ahead, done, report, stage))
        ahead[:] = [ahead[0] + len(pages), 0]
        return part

    def add(part: pdf_split.Part, owner: int) -> bool:
        nonlocal merged
        if not _add_part(part, reading):
            return False
        accepted.add(owner)
        merged += len(part.package.pages)
        return True

    def again(pages: range) -> None:
        read_pages(reading, pages, report)
        _drop_unlisted_assets(reading)  # what the part's reader stored and this did not

    here = ChildReading(
        lambda pages: read_pages(reading, pages, report), read_ahead, _unwarned, add, again
    )
    try:
        siblings.extend(fork(claims, chunks, read_range) for _ in range(1, processes))
        read_chunks(chunks, claims, siblings, here, lambda: report(0, 0, "text"))
        # Every page is in: said once more, since the last part (and its pages' progress) may
        # have come in after the last report, taken by the poll that found it.
        report(0, 0, "text")
        for sibling in siblings:
            sibling.finish()  # its end: a crash after its last part is still its crash
    finally:
        for sibling in siblings:
            sibling.kill()
        claims.close()
    pdf_split.last_processes = len(accepted - {0}) + 1


def _counted(ahead: list[int], done: int, report: ProgressFn, stage: str) -> None:
    ahead[1] = done
    report(0, 0, stage)


def _unwarned() -> bool:
    """Whether mupdf has not warned so far: only then may a chunk be read ahead here (its
    warnings would come before an earlier chunk's)."""
    return not pymupdf.TOOLS.mupdf_warnings(reset=False)


def _range_reader(reading: Reading) -> ReadRange:
    """How a range of the document `reading` has open is read into a Part: by a sibling
    process, or by the child ahead of its turn."""

    def read_range(pages: range, report: ProgressFn) -> pdf_split.Part:
        pymupdf.TOOLS.mupdf_warnings(reset=True)  # the open's warnings are the child's
        part = pdf_split.Part()
        part.package.content_type = reading.package.content_type  # its pages' draft parts say it
        mine = Reading.of(reading.doc, part.package, reading.options)
        read_pages(mine, pages, report)
        state = mine.state
        part.failed_pages, part.image_pages = state.failed_pages, state.image_pages
        part.ocr_pages, part.garbage_pages = state.ocr_pages, state.garbage_pages
        part.warnings, part.warned_xrefs = state.warnings, state.warned_xrefs
        part.extracted, part.dropped_assets = state.extracted, mine.assets.dropped
        part.mupdf_warnings = pymupdf.TOOLS.mupdf_warnings().strip()
        part.looks = state.looks
        return part

    return read_range


def _drop_unlisted_assets(reading: Reading) -> None:
    """Removes the files of the (per-parse) assets directory that the package does not list."""
    directory = reading.options.assets_dir
    if directory is None or not directory.is_dir():
        return
    listed = {asset.asset_id for asset in reading.package.assets}
    for path in directory.iterdir():
        if path.name not in listed:
            path.unlink(missing_ok=True)


def _add_part(part: pdf_split.Part, reading: Reading) -> bool:
    """Adds a sibling's range as if read here; False (nothing added) when that cannot be
    told apart from reading it here: an asset limit in play, mupdf warnings (a repair), or a
    warning about an image this process also tried."""
    assets, state, options = reading.assets, reading.state, reading.options
    new = [a for a in part.package.assets if a.sha256 not in assets.ids]
    if (
        part.dropped_assets
        or assets.dropped
        or part.mupdf_warnings
        or any(xref in state.extracted for xref in part.warned_xrefs)
        or len(assets.ids) + len(new) > options.max_assets
        or assets.total_bytes + sum(a.size_bytes for a in new) > options.max_asset_bytes
    ):
        return False
    for asset in new:
        assets.ids[asset.sha256] = asset.asset_id
        assets.total_bytes += asset.size_bytes
    reading.package.assets.extend(new)
    reading.package.pages.extend(part.package.pages)
    if pdf_pages.page_added is not None:  # a sibling's pages, told once they are added here
        for page in reading.package.pages[-len(part.package.pages) :]:
            pdf_pages.page_added(reading.package, page, reading.doc.page_count)
    state.failed_pages += part.failed_pages
    state.image_pages += part.image_pages
    state.ocr_pages += part.ocr_pages
    state.garbage_pages.extend(part.garbage_pages)
    state.warnings.extend(part.warnings)
    state.warned_xrefs.extend(part.warned_xrefs)
    for xref, named in part.extracted.items():
        state.extracted.setdefault(xref, named)
    state.looks.update(part.looks)
    return True
