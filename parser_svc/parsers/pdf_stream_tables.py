"""Borderless tables on a PDF page: text aligned in columns, at most a rule under the header
(a "stream" table), found from the page's word boxes alone.

Each text line (mupdf's) is cut into segments where two words are further apart than GAP_EMS of
their height (wider than any word space); lines of prose (PROSE_SPACES words, PROSE_WIDTH wide)
are set aside, the rest grouped into visual rows by their vertical centre. A run of at least
MIN_ROWS close rows of two or more segments (a short row of one segment may head or interrupt
it) is a table when its segments keep to column intervals: the union of the segments of the
rows with the most common number of segments, less a first or last interval that is a column
of the page's prose beside the table. The longest stretch of rows that keeps to the columns is
the table; a segment over several columns is a merged cell (a group heading), but a last row
of one segment in larger type is a heading after the table. Prose set in columns is not a
table: long cells, or a first column of list markers, reject it, and so does a line of prose
inside its box. A horizontal rule between two rows of the top half ends the header; a first
row's cell over empty header cells spans them (_two_row_header_spans). Pure Python on tuples,
one pass over the segments.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from statistics import median

from parser_svc.parsers.pdf_lines import Segment
from parser_svc.parsers.pdf_table_cells import Span, maths, spanned_header_rows
from parser_svc.parsers.pdf_tables import FoundTable

GAP_EMS = 0.7
MIN_ROWS = 3
TALLER = 1.25  # a segment this many times the table's median height is no cell of it
ROW_GAP_EMS = 2.2
GUTTER_EMS = 1.0  # the least gap between two columns of prose
MAX_CELL_WORDS = 4  # median words per cell
MAX_COLUMN_CHARS = 30  # median characters of any one column's cells
PROSE_SPACES, PROSE_WIDTH = 4, 100.0  # a line of five words or more, 100 points wide or more
_MARKER = re.compile(
    r"^([•◦▪‣·*\-\u2013\u2014]|\(?[0-9]{1,3}[.)]|\(?[a-zA-Z][.)]|\(?[ivxlcIVXLC]{1,5}[.)])$"
)

_Segment = Segment


def _rows(segments: list[_Segment]) -> list[list[_Segment]]:
    """Visual rows, top to bottom, each its segments left to right."""
    segments.sort(key=lambda s: s[1] + s[3])
    rows: list[list[_Segment]] = []
    centre = height = 0.0
    for seg in segments:
        cy, h = (seg[1] + seg[3]) / 2, seg[3] - seg[1]
        if rows and abs(cy - centre) <= 0.5 * (h if h < height else height):
            rows[-1].append(seg)
        else:
            rows.append([seg])
            centre, height = cy, h
    for row in rows:
        if len(row) > 1:
            row.sort()
    return rows


def _runs(rows: list[list[_Segment]], barriers: list[float]) -> list[list[list[_Segment]]]:
    """Consecutive rows of two or more segments, close enough to be one table and with no line
    of prose between them (`barriers`: their vertical centres, sorted); a short row of one
    segment before or between such rows (a group heading, a cell with the rest of its row
    empty) is one of them (find_stream_tables keeps a first one only over columns)."""
    runs: list[list[list[_Segment]]] = [[]]
    pending: list[_Segment] | None = None  # a row of one segment, kept if the run goes on
    last_bottom = -1e9
    for row in rows:
        top, bottom = row[0][1], row[0][3]
        close = top - last_bottom <= ROW_GAP_EMS * (bottom - top) and bisect_right(
            barriers, last_bottom
        ) == bisect_right(barriers, top)
        last_bottom = bottom
        if len(row) >= 2:
            if not close:
                runs.append([])
                pending = None
            if pending is not None:
                runs[-1].append(pending)
            pending = None
            runs[-1].append(row)
        elif row[0][4].count(" ") < MAX_CELL_WORDS:
            if pending is not None or not close:
                runs.append([])
            pending = row
        else:
            pending = None
            runs.append([])
    return [run for run in runs if len(run) >= MIN_ROWS]


def _territories(segment: _Segment, columns: list[tuple[float, float]]) -> list[int]:
    """The columns a row's one segment stands over, each column reaching to the middle of the
    gaps beside it (a heading centred over two columns need not reach their text)."""
    over = []
    for c in range(len(columns)):
        lo = (columns[c - 1][1] + columns[c][0]) / 2 if c else -1e9
        hi = (columns[c][1] + columns[c + 1][0]) / 2 if c + 1 < len(columns) else 1e9
        if min(hi, segment[2]) - max(lo, segment[0]) > 2:
            over.append(c)
    return over


def _group_heading(segment: _Segment, columns: list[tuple[float, float]]) -> bool:
    """Whether a row's one segment heads a group of columns: over two or more of them, the
    first column left empty (a paragraph's last line or a caption starts at the left)."""
    over = _territories(segment, columns)
    return len(over) >= 2 and 0 not in over


def _intervals(run: list[list[_Segment]]) -> list[tuple[float, float]]:
    """The columns: the union of the segments of the rows with the most common number of
    segments, when it makes that many intervals (else the next most common number's)."""
    counts = [len(row) for row in run if len(row) >= 2]
    for count in sorted(set(counts), key=lambda n: (-counts.count(n), -n))[:3]:
        extents = sorted((s[0], s[2]) for row in run if len(row) == count for s in row)
        merged: list[tuple[float, float]] = []
        for lo, hi in extents:
            if merged and lo <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        if len(merged) == count:
            return merged
    return []


# A row on the table's columns: its cells, its merged cells (column, columns covered) and
# its segments within the table.
_Fitted = tuple[list[str], list[tuple[int, int]], list[_Segment]]


def _fit(row: list[_Segment], columns: list[tuple[float, float]]) -> _Fitted | None:
    """The row on the columns, leaving out what stands beside the table (a line of the
    page's other column); None when a segment falls between columns."""
    left, right = columns[0][0] - 1, columns[-1][1] + 1
    row = [seg for seg in row if seg[2] > left and seg[0] < right]
    his = [hi for _lo, hi in columns]
    cells = [""] * len(columns)
    spans: list[tuple[int, int]] = []
    for segment in row:
        hit = _territories(segment, columns) if len(row) == 1 else []
        for c in range(bisect_right(his, segment[0]), len(columns) if len(row) > 1 else 0):
            if columns[c][0] >= segment[2]:
                break
            hit.append(c)
        if not hit or any(cells[c] for c in hit):
            return None
        for c in hit:
            cells[c] = segment[4]
        if len(hit) > 1:
            spans.append((hit[0], len(hit)))
    return cells, spans, row


def _table_rows(
    run: list[list[_Segment]], columns: list[tuple[float, float]]
) -> tuple[list[list[str]], list[Span], list[list[_Segment]]]:
    """The longest stretch of the run's rows that keep to the columns (a first row of one
    segment only when it heads a group of columns): cells, merged cells, segments."""
    stretches: list[list[_Fitted]] = [[]]
    for row in run:
        fitted = _fit(row, columns)
        if fitted is None:
            stretches.append([])
        elif fitted[2]:
            stretches[-1].append(fitted)
    best = max(stretches, key=len)
    if best and len(best[0][2]) == 1 and not _group_heading(best[0][2][0], columns):
        best = best[1:]
    if best:  # a last row of one segment in larger type: a heading under the table
        tall = TALLER * median(s[3] - s[1] for fitted in best for s in fitted[2])
        while best and len(best[-1][2]) == 1 and best[-1][2][0][3] - best[-1][2][0][1] > tall:
            best = best[:-1]
    spans = [(r, c, 1, n) for r, fitted in enumerate(best) for c, n in fitted[1]]
    return [fitted[0] for fitted in best], spans, [fitted[2] for fitted in best]


def _prose(rows: list[list[str]]) -> bool:
    filled = [cell for row in rows for cell in row if cell]
    if median(len(cell.split()) for cell in filled) > MAX_CELL_WORDS:
        return True
    for c in range(len(rows[0])):
        column = [row[c] for row in rows if row[c]]
        if column and median(len(cell) for cell in column) > MAX_COLUMN_CHARS:
            return True
    firsts = [row[0] for row in rows if row[0]]
    return all(_MARKER.match(cell) for cell in firsts)


def _header_by_rule(run: list[list[_Segment]], rules: list[float]) -> int:
    """Rows above a horizontal rule drawn between two rows of the top half (`rules`: the
    y of the page's horizontal rules across most of the table's width)."""
    for r in range(1, (len(run) + 1) // 2 + 1):
        above = max(s[3] for s in run[r - 1])
        below = min(s[1] for s in run[r])
        if any(above - 1 <= y <= below + 1 for y in rules):
            return r
    return 0


def find_stream_tables(
    segments: list[Segment],
    rule_ys: Callable[[tuple[float, float, float, float]], list[float]],
    taken: Sequence[tuple[float, float, float, float]] = (),
) -> list[FoundTable]:
    """`segments`: the page's text lines cut at gaps wider than GAP_EMS of a word's height
    (pdf_lines.page_segments); `rule_ys(box)`: the y of horizontal rules across most of box's
    width; `taken`: boxes already holding a (ruled) table, whose words are left out."""
    if taken:
        segments = [
            seg
            for seg in segments
            if not any(
                b[0] - 1 <= (seg[0] + seg[2]) / 2 <= b[2] + 1
                and b[1] - 1 <= (seg[1] + seg[3]) / 2 <= b[3] + 1
                for b in taken
            )
        ]
    # Lines of prose (a column of text beside a table would join its rows) are left out;
    # a table with one inside its box is no table found here.
    everything = segments
    is_prose = [_prose_line(seg) for seg in segments]
    prose = [seg for seg, flag in zip(segments, is_prose, strict=True) if flag]
    if prose:
        segments = [seg for seg, flag in zip(segments, is_prose, strict=True) if not flag]
    if len(segments) < 2 * MIN_ROWS:  # no column's share can hold a table (most text pages)
        return []
    # Two columns of prose: each column's tables apart (rows beside each other are no one row).
    tables = []
    for part in _page_columns(prose, segments):
        if len(part) < 2 * MIN_ROWS:
            continue
        rows = _rows(part)
        if sum(1 for row in rows if len(row) >= 2) < MIN_ROWS:
            continue
        lo, hi = min(seg[0] for seg in part), max(seg[2] for seg in part)
        barriers = sorted((seg[1] + seg[3]) / 2 for seg in prose if seg[0] < hi and seg[2] > lo)
        for run in _runs(rows, barriers):
            table = _table(run, rule_ys, everything)
            if table is not None and not any(_inside(seg, table.bbox) for seg in prose):
                tables.append(table)
    return tables


def _page_columns(
    prose: list[_Segment], segments: list[_Segment], least: int = MIN_ROWS
) -> list[list[_Segment]]:
    """The segments of each column of the page's prose, left to right (one on most pages);
    beside a first gutter, two lines of prose on each side show a next one."""
    gutter = _gutter(prose, segments, least)
    if gutter is None:
        return [segments]
    left = _page_columns(
        [seg for seg in prose if seg[2] <= gutter], [seg for seg in segments if seg[2] <= gutter], 2
    )
    right = _page_columns(
        [seg for seg in prose if seg[0] >= gutter], [seg for seg in segments if seg[0] >= gutter], 2
    )
    return left + right


def _gutter(prose: list[_Segment], others: list[_Segment], least: int) -> float | None:
    """The x of the gap between two columns of the page's prose (`least` lines or more on
    each side and three times as many as across it; the gap GUTTER_EMS of their height wide)
    that no other segment of text their size crosses; None on a page of one column."""
    if len(prose) < 2 * least:
        return None
    # Counted by bisection in the sorted edges: a page's lines, not their square.
    ends = sorted(seg[2] for seg in prose)
    starts = sorted(seg[0] for seg in prose)
    for x in sorted(set(ends)):
        left = bisect_right(ends, x)
        first_right = bisect_right(starts, x)
        right = len(prose) - first_right
        across = len(prose) - left - right  # a page footer, a full-width line
        if min(left, right) < max(least, 3 * across):
            continue
        height = median(seg[3] - seg[1] for seg in prose)
        nearest = starts[first_right]
        if nearest - x < GUTTER_EMS * height:
            return None
        gap = (x + nearest) / 2  # a title in larger type may stand across it
        small = [seg for seg in others if seg[3] - seg[1] <= TALLER * height]
        return None if any(seg[0] < gap < seg[2] for seg in small) else gap
    return None


def _without_page_columns(
    columns: list[tuple[float, float]], run: list[list[_Segment]], everything: list[_Segment]
) -> list[tuple[float, float]]:
    """The columns without a first or last one that is a column of the page's text beside the
    table: lines of prose above or below the run stand over it and none of the others."""
    top, bottom = run[0][0][1], run[-1][0][3]
    reach = 3 * (bottom - top) / len(run)
    near = [
        seg
        for seg in everything
        if (top - reach <= seg[3] <= top + 1 or bottom - 1 <= seg[1] <= bottom + reach)
        and _prose_line(seg)
    ]
    while len(columns) > 2:
        last, before = columns[-1], columns[-2]
        if sum(1 for seg in near if seg[2] > last[0] and before[1] < seg[0] < last[1]) >= 2:
            columns = columns[:-1]
            continue
        first, after = columns[0], columns[1]
        if sum(1 for seg in near if seg[0] < first[1] and first[0] < seg[2] < after[0]) >= 2:
            columns = columns[1:]
            continue
        break
    return columns


def _prose_line(seg: _Segment) -> bool:
    return seg[4].count(" ") >= PROSE_SPACES and seg[2] - seg[0] >= PROSE_WIDTH


def _inside(seg: _Segment, box: tuple[float, float, float, float]) -> bool:
    cx, cy = (seg[0] + seg[2]) / 2, (seg[1] + seg[3]) / 2
    return box[0] - 1 <= cx <= box[2] + 1 and box[1] - 1 <= cy <= box[3] + 1


def _table(
    run: list[list[_Segment]],
    rule_ys: Callable[[tuple[float, float, float, float]], list[float]],
    everything: list[_Segment],
) -> FoundTable | None:
    """The run as a table, or None when its rows do not keep to columns or read as prose."""
    words_per_segment = sorted(seg[4].count(" ") for row in run for seg in row)
    if words_per_segment[len(words_per_segment) // 2] >= MAX_CELL_WORDS:
        return None  # lines of prose (the cheap test, before the columns)
    columns = _without_page_columns(_intervals(run), run, everything)
    if len(columns) < 2:
        return None
    cells, spans, run = _table_rows(run, columns)
    bounds = [(min(s[1] for s in row), max(s[3] for s in row)) for row in run]
    if len(cells) < MIN_ROWS or _prose(cells) or maths(cells, bounds):
        return None
    box = (
        min(s[0] for row in run for s in row),
        min(s[1] for row in run for s in row),
        max(s[2] for row in run for s in row),
        max(s[3] for row in run for s in row),
    )
    header = max(_header_by_rule(run, rule_ys(box)), spanned_header_rows(spans, len(cells)))
    if header == 2 and not any(span[0] == 0 for span in spans):
        spans = sorted(spans + _two_row_header_spans(cells))
    return FoundTable(
        box,
        cells,
        spans,
        [lo for lo, _hi in columns] + [columns[-1][1]],
        bounds,
        header if header < len(cells) else 0,
    )


def _two_row_header_spans(cells: list[list[str]]) -> list[Span]:
    """The merged cells of a two-row header without rules between its cells: a first-row
    cell stands over the empty first-row cells after it that head filled second-row cells (a
    group heading), or down the empty second-row cell under it; its text fills them (the
    proto's full grid)."""
    top, under = cells[0], cells[1]
    spans: list[Span] = []
    for c, text in enumerate(top):
        if not text:
            continue
        if not under[c]:
            under[c] = text
            spans.append((0, c, 2, 1))
            continue
        end = c + 1
        while end < len(top) and not top[end] and under[end]:
            end += 1
        if end - c > 1:
            top[c + 1 : end] = [text] * (end - c - 1)
            spans.append((0, c, 1, end - c))
    return spans
