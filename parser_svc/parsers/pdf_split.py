"""A long PDF read by more than one process, when the worker has cores to spare: the parser's
side (the processes themselves: parser_svc/child/page_siblings.py; the child's loop:
pdf_chunks.py).

The parse child cuts the pages into chunks of `CHUNK_PAGES` (`plan` says how many processes)
and each chunk goes to whichever process is free first (`pdf_chunks.ChunkClaims`): the child
takes chunk 0 before any sibling starts (page 1 comes first), then every process claims the
lowest chunk left each time it finishes one. A process that is slower (the child also merges
the parts, relays the siblings' drafts and reports progress; a chunk of scanned pages takes
OCR) reads fewer chunks, so no process waits for another's share and page k is read about as
soon as k/P pages' time has passed: a reader that takes the pages in order (a UI showing page
1, 2, 3 while the job runs) waits for no half of the document. The PDF parser is handed a
`ForkRange` (the parse child's is page_siblings.fork_sibling; without one it reads every page
itself). A sibling is forked *after the document is open* (it inherits the open document
copy-on-write: no second read, no second repair), reads the chunks it claims exactly as the
child would (`ReadRange`: the same per-page code with its own caches) and sends back a `Part`
per chunk: its pages, the assets it stored, its warnings and counters. The child goes through
the chunks in order: one it claimed while every chunk before it is in, it reads into the
package; one it claimed earlier it reads ahead into a Part, as a sibling does, while it waits
for a sibling's (only while mupdf has not warned: a repair's warnings are counted in page
order); each part is added when its turn comes, so the package is the one a single process
makes.

Where a part cannot be added as a single process would have made it, the child reads that
chunk itself instead (the same answer, only later): when an asset limit was reached on either
side or would be by the union, when mupdf warned while the part was read (a damaged document:
the repair warning counts every line), or when a sibling failed on something other than the
document (an unexpected error: that chunk; the sibling stops, and the others claim the rest),
or ended without answering for a chunk it claimed. A ParseFailure or MemoryError in a sibling
fails the parse as it would have in the child; a sibling killed by a signal fails it as the
child's own crash.

Progress: a sibling reports its pages done (`RangeReader.done`); the child adds them to its
own count whenever it reports, so the job's progress counts every process's pages, never goes
back and never passes the total.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ProgressFn


@dataclass
class Part:
    """What reading one range gives besides its pages and assets (`package`)."""

    failed_pages: int = 0
    image_pages: int = 0
    ocr_pages: int = 0
    garbage_pages: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # xref -> (asset id or "", mime type): the images it tried, and the ones it warned about.
    extracted: dict[int, tuple[str, str]] = field(default_factory=dict)
    warned_xrefs: list[int] = field(default_factory=list)
    dropped_assets: int = 0
    mupdf_warnings: str = ""
    package: rp.ReadingPackage = field(default_factory=rp.ReadingPackage)
    # Page number -> its text blocks' looks (font size, bold), for the document's headings.
    looks: dict[int, list[tuple[float, bool]]] = field(default_factory=dict)


# How many processes read the pages of the document this process parsed last (accepted parts:
# a range read again by the child does not count): the parse child reports it in its "done"
# event, the worker in docparse_parse_processes_total.
last_processes = 1


# Pages a chunk holds: page k is read within about a chunk's time of k/P pages' (a chunk of a
# text page book is ~15 ms at 2 ms a page); each chunk a sibling reads costs a message and
# its merge, ~0.3 ms.
CHUNK_PAGES = 8
# Chunks a document is cut into at most (their numbers fill a pipe's 64 KB, 4 bytes each):
# past 131,072 pages a chunk holds more than CHUNK_PAGES.
MAX_CHUNKS = 16384


def plan(total: int, processes: int, min_pages: int) -> list[tuple[range, int]]:
    """`total` pages as chunks in page order, each with the process that would read it were
    they dealt out in turn (0: the child, s: sibling s; the processes claim them as they
    are free: pdf_chunks.py): up to `processes` processes when each gets at least
    `min_pages` pages; one chunk of every page (one process) otherwise."""
    if processes <= 1 or min_pages <= 0:
        return [(range(total), 0)]
    count = max(1, min(processes, total // min_pages))
    if count == 1:
        return [(range(total), 0)]
    size = max(1, min(CHUNK_PAGES, total // count), -(-total // MAX_CHUNKS))
    starts = range(0, total, size)
    return [(range(start, min(start + size, total)), i % count) for i, start in enumerate(starts)]


# Reads one range of pages (in the process that calls it) and says what it found.
ReadRange = Callable[[range, ProgressFn], Part]


class RangeReader(Protocol):
    """A process reading the chunks it claims, one after the other."""

    @property
    def done(self) -> int:
        """Pages of its chunks read so far, as last polled."""
        ...

    @property
    def ended(self) -> bool:
        """Its end of the pipe is closed: nothing more comes from it."""
        ...

    def fileno(self) -> int:
        """What to wait on for its next message."""
        ...

    def poll(self) -> None:
        """Takes in whatever has arrived, without waiting."""

    def read_some(self) -> None:
        """Waits for its next message (progress, a draft, an answer) or its end."""

    def answered(self, chunk: int) -> bool:
        """Whether its answer for `chunk` (which it claimed) has arrived."""
        ...

    def take(self, chunk: int) -> Part | None:
        """Its answer for `chunk`: the Part, or None when the chunk must be read by the child;
        raises the document's own failure (ParseFailure, MemoryError)."""
        ...

    def finish(self) -> None:
        """Waits for the process's end, once its last part is in: raises its crash."""

    def kill(self) -> None:
        """Stops the process (the parse failed or ended elsewhere)."""


class Claims(Protocol):
    """Chunk numbers, each handed to the first process that asks."""

    def next(self) -> int | None:
        """The lowest chunk no process has claimed, now claimed; None when none is left."""
        ...


# Starts a process that reads the chunks (of `chunks`) it claims from `claims` with
# `read_range`.
ForkRange = Callable[[Claims, list[range], ReadRange], RangeReader]
