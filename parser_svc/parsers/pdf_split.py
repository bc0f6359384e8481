"""A long PDF read by more than one process, when the worker has cores to spare: the parser's
side (the processes themselves: parser_svc/child/page_siblings.py).

The parse child cuts the pages into contiguous ranges (`ranges`), reads the first itself and
has a sibling process read each other range: the PDF parser is handed a `ForkRange` (the
parse child's is page_siblings.fork_sibling; without one it reads every page itself). The
sibling is forked *after the document is open* (it inherits the open document copy-on-write:
no second read, no second repair), reads its range exactly as the child would (`ReadRange`:
the same per-page code with its own caches) and sends back a `Part`: its pages, the assets it
stored, its warnings and counters. The child adds each part in page order (pdf.py), so the
package is the one a single process makes.

Where a part cannot be added as a single process would have made it, the child reads that
range itself instead (the same answer, only later): when an asset limit was reached on either
side or would be by the union, when mupdf warned while the sibling read (a damaged document:
the repair warning counts every line), or when the sibling failed on something other than the
document (an unexpected error). A ParseFailure or MemoryError in a sibling fails the parse as
it would have in the child; a sibling killed by a signal fails it as the child's own crash.

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


def ranges(total: int, processes: int, min_pages: int) -> list[range]:
    """`total` pages cut into up to `processes` contiguous ranges of at least `min_pages`
    pages each (one range: no split)."""
    if processes <= 1 or min_pages <= 0:
        return [range(total)]
    count = max(1, min(processes, total // min_pages))
    bounds = [total * i // count for i in range(count + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(count)]


# Reads one range of pages (in the process that calls it) and says what it found.
ReadRange = Callable[[range, ProgressFn], Part]


class RangeReader(Protocol):
    """A range of pages being read by another process."""

    @property
    def pages(self) -> range: ...

    @property
    def done(self) -> int:
        """Pages of the range read so far, as last polled."""
        ...

    def poll(self) -> None:
        """Takes in whatever progress has arrived, without waiting."""

    def finish(self, on_progress: Callable[[], None]) -> Part | None:
        """Waits for the range: its Part, or None when it must be read here again; raises the
        document's own failure (ParseFailure, MemoryError) or the process's crash."""
        ...

    def kill(self) -> None:
        """Stops the process (the parse failed or ended elsewhere)."""


# Starts reading `pages` with `read_range` in another process.
ForkRange = Callable[[range, ReadRange], RangeReader]
