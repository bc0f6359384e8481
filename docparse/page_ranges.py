"""Page selections ("1-5,10,20-"), the one reading of them: a job's `pages` at submit
(parser_svc/parsers/page_ranges.py builds on this module) and what the gateway reads
(GET /v1/jobs/{id}/result?pages=).

Pages are 1-based; a range's end may be left open ("20-": to the last page). Overlaps and order
do not matter: the selection is a set of pages. The normalised form sorts and merges the
ranges ("3,1-2,5-" → "1-3,5-").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_PARTS = 64
MAX_CHARS = 256
_PART = re.compile(r"^(\d{1,9})(?:(-)(\d{1,9})?)?$")

# A selection: (first, last) pairs of 1-based pages, last None for an open end; [] = every page.
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
                f'pages part {part[:40]!r} is not a page or a range (as in "1-5,10,20-")'
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


def selects(selection: Selection, page: int) -> bool:
    """Whether page `page` (1-based) is in the selection ([] selects every page)."""
    if not selection:
        return True
    return any(first <= page and (last is None or page <= last) for first, last in selection)


def of_pages(numbers: Iterable[int]) -> str:
    """The normalised selection of exactly these pages ("1-3,5"), so that it can be passed
    back as a `pages`: at most MAX_PARTS ranges, the first ones (pages read far out of order
    are named once the gaps between them close)."""
    ranges: Selection = []
    for number in sorted(set(numbers)):
        if ranges and ranges[-1][1] == number - 1:
            ranges[-1] = (ranges[-1][0], number)
        elif len(ranges) < MAX_PARTS:
            ranges.append((number, number))
        else:
            break
    return render(ranges)
