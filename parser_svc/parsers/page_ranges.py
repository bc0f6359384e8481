"""A job's page selection ("1-5,10,20-"): parsed and normalised at submit (parser_svc/api/
submit.py), resolved against the document's page count by the PDF parser (pdf.py).

The syntax and the normalised form are the client package's (docparse/page_ranges.py: the
gateway reads `result?pages=` by the same rules), so there is one reading of a selection; the
normalised form (ranges sorted and merged: "3,1-2,5-" → "1-3,5-") is what the job record, the
dedupe identity and the package carry, so two spellings of one selection are one job. Here:
what a selection means for a document of a known page count.
"""

from __future__ import annotations

from docparse.page_ranges import (
    MAX_CHARS,
    MAX_PARTS,
    PageRangeError,
    Selection,
    normalised,
    parse,
    render,
)

__all__ = [
    "MAX_CHARS",
    "MAX_PARTS",
    "PageRangeError",
    "Selection",
    "indexes",
    "normalised",
    "parse",
    "past_end",
    "past_end_message",
    "render",
]


def past_end(selection: Selection, page_count: int) -> int:
    """The highest page the selection names explicitly beyond `page_count` (0: none). An open
    end is never past it; an open range starting past the last page is."""
    beyond = [max(first, last or 0) for first, last in selection]
    worst = max(beyond, default=0)
    return worst if worst > page_count else 0


def past_end_message(pages: str, beyond: int, page_count: int) -> str:
    """PAGE_RANGE_PAST_END's message, the same at submit and in the parse."""
    return f"pages {pages!r} names page {beyond}, but the document has {page_count} pages"


def indexes(selection: Selection, page_count: int) -> list[range]:
    """The selection as 0-based contiguous ranges of a document of `page_count` pages (every
    page for []); call past_end first: ranges are clipped to the document."""
    if not selection:
        return [range(page_count)]
    return [
        range(first - 1, min(page_count, last if last is not None else page_count))
        for first, last in selection
        if first <= page_count
    ]
