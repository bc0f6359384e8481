"""A long PDF read by more than one process, when the worker has cores to spare: the parser's
side (the processes themselves: parser_svc/child/page_siblings.py).

The parse child cuts the pages into chunks of `CHUNK_PAGES` dealt out in turn (`plan`): the
child reads chunks 0, P, 2P, ..., sibling process s chunks s, P + s, ... So page k is read
about as soon as k/P pages' time has passed, whichever process reads it: a reader that takes
the pages in order (a UI showing page 1, 2, 3 while the job runs) waits for no half of the
document. The PDF parser is handed a `ForkRange` (the parse child's is
page_siblings.fork_sibling; without one it reads every page itself). A sibling is forked
*after the document is open* (it inherits the open document copy-on-write: no second read, no
second repair), reads its chunks exactly as the child would (`ReadRange`: the same per-page code
with its own caches) and sends back a `Part` per chunk: its pages, the assets it stored, its
warnings and counters. The child goes through the chunks in order, reading its own into the
package and adding each sibling's part when it comes (pdf.py), so the package is the one a
single process makes.

Where a part cannot be added as a single process would have made it, the child reads that
chunk itself instead (the same answer, only later): when an asset limit was reached on either
side or would be by the union, when mupdf warned while the sibling read (a damaged document:
the repair warning counts every line), or when the sibling failed on something other than the
document (an unexpected error: that chunk and the sibling's later ones). A ParseFailure or
MemoryError in a sibling fails the parse as it would have in the child; a sibling killed by a
signal fails it as the child's own crash.

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


def plan(total: int, processes: int, min_pages: int) -> list[tuple[range, int]]:
    """`total` pages as chunks in page order, each with the process that reads it (0: the
    child, s: sibling s): up to `processes` processes when each gets at least `min_pages`
    pages; one chunk of every page (one process) otherwise."""
    if processes <= 1 or min_pages <= 0:
        return [(range(total), 0)]
    count = max(1, min(processes, total // min_pages))
    if count == 1:
        return [(range(total), 0)]
    size = max(1, min(CHUNK_PAGES, total // count))
    starts = range(0, total, size)
    return [(range(start, min(start + size, total)), i % count) for i, start in enumerate(starts)]


# Reads one range of pages (in the process that calls it) and says what it found.
ReadRange = Callable[[range, ProgressFn], Part]


class RangeReader(Protocol):
    """Chunks of pages being read by another process, one after the other."""

    @property
    def chunks(self) -> list[range]: ...

    @property
    def done(self) -> int:
        """Pages of its chunks read so far, as last polled."""
        ...

    def poll(self) -> None:
        """Takes in whatever progress has arrived, without waiting."""

    def next_part(self, on_progress: Callable[[], None]) -> Part | None:
        """Waits for its next chunk: its Part, or None when it must be read here again (and so
        must every later one); raises the document's own failure (ParseFailure, MemoryError)
        or the process's crash."""
        ...

    def finish(self) -> None:
        """Waits for the process's end, once its last part is in: raises its crash."""

    def kill(self) -> None:
        """Stops the process (the parse failed or ended elsewhere)."""


# Starts reading `chunks`, in order, with `read_range` in another process.
ForkRange = Callable[[list[range], ReadRange], RangeReader]
