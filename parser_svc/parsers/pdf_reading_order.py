"""A PDF page's blocks in reading order, whatever order the content stream drew them in.

Columns: the page's column gutters are vertical bands (at least GUTTER_MIN wide) that no
narrow line of body text crosses (lines in the top and bottom margins, lines of a few
characters and lines larger or smaller than the page's body text do not count: running
headers, page numbers, titles, footnotes), with enough body text on each side; one narrow line
in CROSSING_SHARE may cross one (affiliations centred under a title), the gutter then being the
band's emptiest run. A block reaching into a gutter (a full-width title, a wide figure caption),
or standing in the top or bottom margin (a running header, a footer), cuts the page into
sections; within each section the columns are read left to right, each top to bottom. A page
without gutters is read top to bottom, left to right (pymupdf's `sort=True` order).
"""

from __future__ import annotations

from bisect import bisect
from itertools import accumulate
from statistics import median

from parser_svc.parsers.pdf_blocks import Block, Line, list_marker

GUTTER_MIN = 6.0  # points
MARGIN_BAND = 0.08  # of the page height, top and bottom: furniture, left out of the gutters
NARROW = 0.6  # a line narrower than this share of the text's width can stand in a column
MIN_COLUMN_LINES = 3
MIN_LINE_CHARS = 12  # median characters of a column's lines (table cells are shorter)
MAX_COLUMNS = 3
CROSSING_SHARE = 10  # a gutter is crossed by at most one narrow line in this many
BIGGER = 0.5  # points: lines this much larger or smaller than the body (titles, footnotes)


def reading_order(blocks: list[Block], width: float, height: float) -> list[Block]:
    """The blocks in reading order; each block's `column_left` is set."""
    if not blocks:
        return blocks
    gutters = _clear_of_markers(_gutters(blocks, width, height), blocks)
    if not gutters:
        left = min(block.x0 for block in blocks)
        for block in blocks:
            block.column_left = left
        return sorted(blocks, key=lambda b: (b.y1, b.x0))
    blocks = [part for block in blocks for part in _split_across(block, gutters)]
    top, bottom = height * MARGIN_BAND, height * (1 - MARGIN_BAND)

    def cuts(block: Block) -> bool:  # crosses a gutter, or stands in the top or bottom margin
        return block.y1 <= top or block.y0 >= bottom or _crosses(block, gutters)

    cutters = sorted((b for b in blocks if cuts(b)), key=lambda b: (b.y0, b.x0))
    cut_marks = [(b.y0 + b.y1) / 2 for b in cutters]
    sections: list[list[Block]] = [[] for _ in range(len(cutters) + 1)]
    for block in blocks:
        if not cuts(block):
            sections[bisect(cut_marks, (block.y0 + block.y1) / 2)].append(block)
    mids = [(g0 + g1) / 2 for g0, g1 in gutters]
    out: list[Block] = []
    for index, section in enumerate(sections):
        columns: dict[int, list[Block]] = {}
        for block in section:
            columns.setdefault(bisect(mids, (block.x0 + block.x1) / 2), []).append(block)
        for column in sorted(columns):
            members = columns[column]
            left = min(block.x0 for block in members)
            for block in sorted(members, key=lambda b: (b.y0, b.x0)):
                block.column_left = left
                out.append(block)
        if index < len(cutters):
            cutters[index].column_left = cutters[index].x0
            out.append(cutters[index])
    return out


def _gutters(blocks: list[Block], width: float, height: float) -> list[tuple[float, float]]:
    lines = [line for block in blocks for line in block.lines]
    left = max(0, int(min(line.x0 for line in lines)))
    right = min(int(width) + 1, int(max(line.x1 for line in lines)) + 1)
    if right - left < 4 * GUTTER_MIN:
        return []
    top, bottom = height * MARGIN_BAND, height * (1 - MARGIN_BAND)
    chars: dict[float, int] = {}
    for line in lines:
        chars[line.size] = chars.get(line.size, 0) + line.chars
    body = max(chars, key=lambda size: chars[size])
    narrow = [
        line
        for line in lines
        if line.x1 - line.x0 < NARROW * (right - left)
        and line.chars >= 4
        and abs(line.size - body) <= BIGGER
        and line.y1 > top
        and line.y0 < bottom
    ]
    if len(narrow) < 2 * MIN_COLUMN_LINES:
        return []
    steps = [0] * (right - left + 2)
    for line in narrow:
        steps[max(0, int(line.x0) - left)] += 1
        steps[min(right - left + 1, int(line.x1) + 1 - left)] -= 1
    covered = list(accumulate(steps))
    last = max(i for i, count in enumerate(covered) if count)
    # A few narrow lines may cross a gutter (centred affiliations under a title, a table's
    # cells above the columns): those lines' blocks cut the page into sections.
    crossing = len(narrow) // CROSSING_SHARE
    gutters: list[tuple[float, float]] = []
    start = None
    # Not before the first band of text: few lines at the left edge are the margin of the
    # indented ones (list items), no gutter.
    first = next((i for i, count in enumerate(covered) if count > crossing), last)
    for i in range(first, last + 1):
        if covered[i] <= crossing and start is None:
            start = i
        elif covered[i] > crossing and start is not None:
            gutter = _emptiest(covered, start, i)
            if gutter[1] - gutter[0] >= GUTTER_MIN:
                gutters.append((left + gutter[0], left + gutter[1]))
            start = None
    if not gutters or len(gutters) >= MAX_COLUMNS:
        return []
    return gutters if _columns_of_text(narrow, gutters) else []


def _clear_of_markers(
    gutters: list[tuple[float, float]], blocks: list[Block]
) -> list[tuple[float, float]]:
    """Each gutter ending left of the list markers standing in it (a marker hangs left of its
    column's text, and has too few characters to count as text when gutters are found)."""
    out = []
    for g0, g1 in gutters:
        for block in blocks:
            if block.marker and block.text == block.marker and g0 < block.x0 < g1:
                g1 = block.x0 - 0.5
        if g1 - g0 >= GUTTER_MIN:
            out.append((g0, g1))
    return out


def _emptiest(covered: list[int], start: int, end: int) -> tuple[int, int]:
    """The widest run of `covered[start:end]` at its least coverage, as (start, end)."""
    least = min(covered[start:end])
    best = (start, start)
    run = None
    for i in range(start, end + 1):
        if i < end and covered[i] == least:
            run = i if run is None else run
        elif run is not None:
            best = max(best, (run, i), key=lambda r: r[1] - r[0])
            run = None
    return best


def _columns_of_text(lines: list[Line], gutters: list[tuple[float, float]]) -> bool:
    """Whether every column holds lines of running text (not a table's short cells)."""
    mids = [(g0 + g1) / 2 for g0, g1 in gutters]
    columns: list[list[int]] = [[] for _ in range(len(gutters) + 1)]
    for line in lines:
        columns[bisect(mids, (line.x0 + line.x1) / 2)].append(line.chars)
    return all(
        len(chars) >= MIN_COLUMN_LINES and median(chars) >= MIN_LINE_CHARS for chars in columns
    )


def _crosses(block: Block, gutters: list[tuple[float, float]]) -> bool:
    return any(block.x0 < g1 and block.x1 > g0 for g0, g1 in gutters)


def _split_across(block: Block, gutters: list[tuple[float, float]]) -> list[Block]:
    """A block whose lines stand on both sides of a gutter without crossing it (mupdf grouped
    lines drawn alternately in two columns) becomes one block per side."""
    if len(block.lines) < 2 or not _crosses(block, gutters):
        return [block]
    if any(line.x0 < g1 and line.x1 > g0 for line in block.lines for g0, g1 in gutters):
        return [block]
    mids = [(g0 + g1) / 2 for g0, g1 in gutters]
    sides: dict[int, list[Line]] = {}
    for line in block.lines:
        sides.setdefault(bisect(mids, (line.x0 + line.x1) / 2), []).append(line)
    parts = [Block(sorted(lines, key=lambda x: x.y0)) for _side, lines in sorted(sides.items())]
    for part in parts:
        found = list_marker(part.lines[0].text)
        if found is not None:
            part.marker, part.ordered = found
    return parts
