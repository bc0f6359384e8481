"""Ruled tables on a PDF page, found from the page's vector rules (a "lattice").

pymupdf's find_tables builds a Python object per character and costs 0.1-0.8 s per page; this
works on word boxes and line segments only (milliseconds per page): horizontal and vertical
rules are snapped and merged, rules that cross form connected grids, and each grid with at least
two rows and two columns becomes a table whose cells collect the words whose centres they hold;
a cell whose inner rules are missing is a merged cell (pdf_table_cells.py). Borderless tables
(whitespace alignment only): pdf_stream_tables.py; what a page's tables become:
pdf_table_structure.py.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from parser_svc.parsers.pdf_pass import (
    RULE_MIN_LENGTH,
    RULE_THIN_LINE,
    RULE_THIN_RECT,
    Rule,
    Rules,
)
from parser_svc.parsers.pdf_table_cells import Span, grid_cells, spanned_header_rows

SNAP = 2.0
MAX_ITEMS = 5000


# A merged rule: its position (y of a horizontal rule, x of a vertical one) and its extent
# (lo, hi) along the other axis. Tuples, not objects: a page can have thousands.
_Seg = tuple[float, float, float]


@dataclass(frozen=True)
class FoundTable:
    bbox: tuple[float, float, float, float]
    rows: list[list[str]]
    # Merged cells: (row, column, row_span, col_span) at their top-left cell.
    spans: list[Span] = field(default_factory=list)
    # The x-edges of the columns (columns + 1 values): what a continuation's columns match.
    columns: list[float] = field(default_factory=list)
    # (top, bottom) of each row.
    row_bounds: list[tuple[float, float]] = field(default_factory=list)
    # Header rows the rules or merged cells tell (0: they do not).
    header_rows: int = 0


def _segments(rules: Iterable[Rule]) -> tuple[list[_Seg], list[_Seg]]:
    hs: list[_Seg] = []
    vs: list[_Seg] = []
    for kind, ax, ay, bx, by in rules:
        if kind == "l":
            dx, dy = abs(ax - bx), abs(ay - by)
            if dy <= RULE_THIN_LINE and dx >= RULE_MIN_LENGTH:
                hs.append(((ay + by) / 2, min(ax, bx), max(ax, bx)))
            elif dx <= RULE_THIN_LINE and dy >= RULE_MIN_LENGTH:
                vs.append(((ax + bx) / 2, min(ay, by), max(ay, by)))
        else:  # "re"
            x0, x1 = min(ax, bx), max(ax, bx)
            y0, y1 = min(ay, by), max(ay, by)
            w, h = x1 - x0, y1 - y0
            if h <= RULE_THIN_RECT and w >= RULE_MIN_LENGTH:
                hs.append(((y0 + y1) / 2, x0, x1))
            elif w <= RULE_THIN_RECT and h >= RULE_MIN_LENGTH:
                vs.append(((x0 + x1) / 2, y0, y1))
            elif w >= RULE_MIN_LENGTH and h >= RULE_MIN_LENGTH:
                hs += [(y0, x0, x1), (y1, x0, x1)]
                vs += [(x0, y0, y1), (x1, y0, y1)]
    return _merge(hs), _merge(vs)


def rule_segments(rules: Rules) -> tuple[list[_Seg], list[_Seg]]:
    """The page's horizontal and vertical rules, merged: (position, lo, hi) each."""
    return _segments(rules[0])


def _merge(segs: list[_Seg]) -> list[_Seg]:
    """Joins collinear segments that touch or overlap (within SNAP)."""
    segs.sort(key=lambda s: (round(s[0] / SNAP), s[1]))
    out: list[_Seg] = []
    for seg in segs:
        if out:
            pos, lo, hi = out[-1]
            if abs(pos - seg[0]) <= SNAP and seg[1] <= hi + SNAP:
                if seg[2] > hi:
                    out[-1] = (pos, lo, seg[2])
                continue
        out.append(seg)
    return out


def _grids(hs: list[_Seg], vs: list[_Seg]) -> list[tuple[list[_Seg], list[_Seg]]]:
    """Connected components of crossing rules: a horizontal and a vertical rule cross when
    each one's position lies within the other's extent (within SNAP)."""
    parent = list(range(len(hs) + len(vs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # The vertical rules by x: a horizontal rule is checked against those within its extent.
    order = sorted(range(len(vs)), key=lambda j: vs[j][0])
    xs = [vs[j][0] for j in order]
    base = len(hs)
    for i, (y, left, right) in enumerate(hs):
        start = bisect_left(xs, left - SNAP)
        for k in range(start, bisect_right(xs, right + SNAP)):
            j = order[k]
            _x, top, bottom = vs[j]
            if top - SNAP <= y <= bottom + SNAP:
                parent[find(i)] = find(base + j)
    groups: dict[int, tuple[list[_Seg], list[_Seg]]] = {}
    for i, h in enumerate(hs):
        groups.setdefault(find(i), ([], []))[0].append(h)
    for j, v in enumerate(vs):
        groups.setdefault(find(base + j), ([], []))[1].append(v)
    return [g for g in groups.values() if len(g[0]) >= 2 and len(g[1]) >= 2]


def _cuts(values: Iterable[float]) -> list[float]:
    cuts: list[float] = []
    for value in sorted(values):
        if not cuts or value - cuts[-1] > SNAP:
            cuts.append(value)
    return cuts


def _index(cuts: Sequence[float], value: float) -> int:
    """The band of `cuts` holding `value` (the first i with value <= cuts[i + 1]), or -1
    outside. A binary search: a page's words times its bands was a linear scan each."""
    if value < cuts[0] or value > cuts[-1]:
        return -1
    if len(cuts) < 2:
        return -1
    return bisect_left(cuts, value, 1, len(cuts) - 1) - 1


def find_tables(rules: Rules, get_words: Callable[[], Sequence[Sequence[Any]]]) -> list[FoundTable]:
    """`rules`: the page's "l" and "re" items and its item count (parsers/pdf_pass.py); a page
    drawn with more than MAX_ITEMS items is not searched. `get_words` gives
    page.get_text("words") and is only called when the rules form a grid."""
    if rules[1] > MAX_ITEMS:
        return []
    hs, vs = _segments(rules[0])
    if len(hs) < 2 or len(vs) < 2:
        return []
    tables = []
    words: Sequence[Sequence[Any]] | None = None
    for ghs, gvs in _grids(hs, vs):
        ys = _cuts(h[0] for h in ghs)
        xs = _cuts(v[0] for v in gvs)
        if len(ys) < 3 or len(xs) < 3:
            continue  # fewer than 2 rows or 2 columns: a box or a rule, not a table
        if words is None:
            words = get_words()
        grid = grid_cells(ys, xs, ghs, gvs, words, _index)
        rows = grid.rows
        if len(rows) >= 2 and len(grid.columns) >= 3:
            # A double rule (an empty band a few points high) ends the header above it.
            header = grid.thin_rows[0] if grid.thin_rows else 0
            header = max(header, spanned_header_rows(grid.spans, len(rows)))
            tables.append(
                FoundTable(
                    (xs[0], ys[0], xs[-1], ys[-1]),
                    rows,
                    grid.spans,
                    grid.columns,
                    grid.row_bounds,
                    header if header < len(rows) else 0,
                )
            )
    return tables
