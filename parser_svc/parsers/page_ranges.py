"""A job's page selection ("1-5,10,20-"): parsed and normalised at submit (parser_svc/api/
submit.py), resolved against the document's page count by the PDF parser (pdf.py).

Pages are 1-based; a range's end may be left open ("20-": to the last page). Overlaps and order
do not matter: the selection is a set of pages, read in document order, each once. The
normalised form (ranges sorted and merged: "3,1-2,5-" → "1-3,5-") is what the job record, the
dedupe identity and the package carry, so two spellings of one selection are one job.
"""

from __future__ import annotations

import re

MAX_PARTS = 64
MAX_CHARS = 256
_PART = re.compile(r"^(\d{1,9})(?:(-)(\d{1,9})?)?$")

# A selection: (first, last) pairs of 1-based pages, last None for an open end.
Selection = list[tuple[int, int | None]]


class PageRangeError(ValueError):
    """A page selection that is not one; the message says what is wrong."""


def parse(spec: str) -> Selection:
    """The selection `spec` names, sorted and merged; [] for "" (every page). Raises
    PageRangeError for anything else than comma-separated pages and ranges."""
    text = spec.replace(" ", "")
    if not text:
        return []
    if len(spec) > MAX_CHARS:
        raise PageRangeError(f"pages is {len(spec)} characters long; the limit is {MAX_CHARS}")
    parts = text.split(",")
    if len(parts) > MAX_PARTS:
        raise PageRangeError(f"pages has {len(parts)} parts; the limit is {MAX_PARTS}")
    found: Selection = []
    for part in parts:
        match = _PART.match(part)
        if not match:
            raise PageRangeError(
                f'pages part {part!r} is not a page or a range (as in "1-5,10,20-")'
            )
        first = int(match.group(1))
        last: int | None = first
        if match.group(2):
            last = int(match.group(3)) if match.group(3) else None
        if first < 1:
            raise PageRangeError(f"pages part {part!r}: pages are numbered from 1")
        if last is not None and last < first:
            raise PageRangeError(f"pages part {part!r} ends before it starts")
        found.append((first, last))
    return _merged(found)


def _merged(found: Selection) -> Selection:
    found.sort(key=lambda r: r[0])
    merged: Selection = []
    for first, last in found:
        if merged:
            top_first, top_last = merged[-1]
            if top_last is None or first <= top_last + 1:
                wider = None if top_last is None or last is None else max(top_last, last)
                merged[-1] = (top_first, wider)
                continue
        merged.append((first, last))
    return merged


def normalised(spec: str) -> str:
    """The canonical spelling of `spec` ("" for every page); PageRangeError when it is none."""
    return render(parse(spec))


def render(selection: Selection) -> str:
    return ",".join(
        str(first) if last == first else f"{first}-{'' if last is None else last}"
        for first, last in selection
    )


def past_end(selection: Selection, page_count: int) -> int:
    """The highest page the selection names explicitly beyond `page_count` (0: none). An open
    end is never past it; an open range starting past the last page is."""
    beyond = [max(first, last or 0) for first, last in selection]
    worst = max(beyond, default=0)
    return worst if worst > page_count else 0


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
