"""The cells of a ruled grid (pdf_tables.py), merged cells included.

The grid's bands come from every rule's position; a cell whose inner rules are missing covers
several bands (a heading over two columns, a label down two rows). Cells are the connected
parts of the bands joined where no rule separates them; a part that fills its bounding
rectangle is one merged cell: its text is repeated in each band it covers (the proto's full
grid) and a span (row, column, rows, columns) names it at its top-left band.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from statistics import median
from typing import Any

# (position, lo, hi): a merged rule, as pdf_tables.py makes them.
Seg = tuple[float, float, float]
# (row, column, row_span, col_span) of a merged cell's top-left band.
Span = tuple[int, int, int, int]

SLACK = 2.0
# Symbols of set-setting maths, and the pieces of big brackets and braces fonts draw from the
# private use area (or that come out as U+FFFD): a formula's, not a table cell's.
_MATHS = re.compile(
    r"[=\u2208\u2209\u222a\u2229\u2286\u2282\u2287\u2283\u2202\u2200\u2203\u2211"
    r"\u220f\u222b\u221a\u221e\u21a6\u2205\u2245\u2243\u2260\u00ac\u2227\u2228"
    r"\u2217\ue000-\uf8ff\ufffd]"
)
MATHS_SHARE = 0.5
OVERLAP = 0.7  # rows whose centres are closer than this share of their height overlap


@dataclass
class GridCells:
    """A grid's rows of cell texts, with empty rows and columns left out."""

    rows: list[list[str]]
    spans: list[Span]
    columns: list[float]  # x-edges of the kept columns (len(columns) = columns + 1)
    row_bounds: list[tuple[float, float]]  # (top, bottom) of each kept row
    header_rows: int = 0
    thin_rows: list[int] = field(default_factory=list)


def _ruled(segs: Sequence[Seg], at: float, across: float) -> bool:
    return any(
        abs(pos - at) <= SLACK and lo - SLACK <= across <= hi + SLACK for pos, lo, hi in segs
    )


def _parts(
    ys: Sequence[float], xs: Sequence[float], hs: Sequence[Seg], vs: Sequence[Seg]
) -> list[int]:
    """A part id per band (row-major): bands joined where no rule separates them."""
    n_rows, n_cols = len(ys) - 1, len(xs) - 1
    parent = list(range(n_rows * n_cols))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    v_at = {i: [v for v in vs if abs(v[0] - xs[i]) <= SLACK] for i in range(1, n_cols)}
    h_at = {i: [h for h in hs if abs(h[0] - ys[i]) <= SLACK] for i in range(1, n_rows)}
    for r in range(n_rows):
        mid_y = (ys[r] + ys[r + 1]) / 2
        for c in range(n_cols):
            mid_x = (xs[c] + xs[c + 1]) / 2
            here = r * n_cols + c
            if c + 1 < n_cols and not _ruled(v_at[c + 1], xs[c + 1], mid_y):
                parent[find(here)] = find(here + 1)
            if r + 1 < n_rows and not _ruled(h_at[r + 1], ys[r + 1], mid_x):
                parent[find(here)] = find(here + n_cols)
    return [find(i) for i in range(n_rows * n_cols)]


def _rectangles(parts: list[int], n_cols: int) -> dict[int, Span]:
    """Each part that fills its bounding rectangle of bands and covers more than one."""
    boxes: dict[int, list[int]] = {}
    counts: dict[int, int] = {}
    for i, part in enumerate(parts):
        r, c = divmod(i, n_cols)
        box = boxes.setdefault(part, [r, c, r, c])
        box[0], box[1] = min(box[0], r), min(box[1], c)
        box[2], box[3] = max(box[2], r), max(box[3], c)
        counts[part] = counts.get(part, 0) + 1
    out: dict[int, Span] = {}
    for part, (r0, c0, r1, c1) in boxes.items():
        area = (r1 - r0 + 1) * (c1 - c0 + 1)
        if area > 1 and counts[part] == area:
            out[part] = (r0, c0, r1 - r0 + 1, c1 - c0 + 1)
    return out


def grid_cells(
    ys: Sequence[float],
    xs: Sequence[float],
    hs: Sequence[Seg],
    vs: Sequence[Seg],
    words: Sequence[Sequence[Any]],
    index: Any,
) -> GridCells:
    """`index(cuts, value)`: the band holding value, or -1 (pdf_tables._index)."""
    n_rows, n_cols = len(ys) - 1, len(xs) - 1
    parts = _parts(ys, xs, hs, vs)
    merged = _rectangles(parts, n_cols)
    texts: dict[int, list[str]] = {}
    top, bottom, left, right = ys[0], ys[-1], xs[0], xs[-1]
    for word in words:
        cx, cy = (word[0] + word[2]) / 2, (word[1] + word[3]) / 2
        if not (top <= cy <= bottom and left <= cx <= right):
            continue
        row, col = index(ys, cy), index(xs, cx)
        if row >= 0 and col >= 0:
            part = parts[row * n_cols + col]
            key = part if part in merged else -1 - (row * n_cols + col)
            texts.setdefault(key, []).append(str(word[4]))

    def text(r: int, c: int) -> str:
        part = parts[r * n_cols + c]
        key = part if part in merged else -1 - (r * n_cols + c)
        return " ".join(texts.get(key, []))

    grid = [[text(r, c) for c in range(n_cols)] for r in range(n_rows)]
    keep_rows = [r for r in range(n_rows) if any(grid[r])]
    keep_cols = [c for c in range(n_cols) if any(grid[r][c] for r in keep_rows)]
    thin = [
        sum(1 for k in keep_rows if k < r)
        for r in range(n_rows)
        if not any(grid[r]) and ys[r + 1] - ys[r] <= 4.0 and 0 < r < n_rows - 1
    ]
    spans = _kept_spans(merged.values(), keep_rows, keep_cols)
    return GridCells(
        rows=[[grid[r][c] for c in keep_cols] for r in keep_rows],
        spans=spans,
        columns=[xs[c] for c in keep_cols] + ([xs[keep_cols[-1] + 1]] if keep_cols else []),
        row_bounds=[(ys[r], ys[r + 1]) for r in keep_rows],
        thin_rows=thin,
    )


def _kept_spans(merged: Any, keep_rows: list[int], keep_cols: list[int]) -> list[Span]:
    """The merged cells in the indices of the kept rows and columns (spans of 1 x 1 left out)."""
    row_at = {r: i for i, r in enumerate(keep_rows)}
    col_at = {c: i for i, c in enumerate(keep_cols)}
    spans: list[Span] = []
    for r0, c0, rs, cs in merged:
        rows = [row_at[r] for r in range(r0, r0 + rs) if r in row_at]
        cols = [col_at[c] for c in range(c0, c0 + cs) if c in col_at]
        if rows and cols and (len(rows) > 1 or len(cols) > 1):
            spans.append((rows[0], cols[0], len(rows), len(cols)))
    spans.sort()
    return spans


def spanned_header_rows(spans: Sequence[Span], n_rows: int) -> int:
    """A two-level header: a cell of the first row over several columns (a group heading),
    the rows under it down to the last that a first-row cell reaches; 0 without one."""
    first = [s for s in spans if s[0] == 0]
    if not any(s[3] > 1 for s in first) or n_rows < 3:
        return 0
    return min(n_rows - 1, max([2] + [s[2] for s in first]))


def maths(rows: Sequence[Sequence[str]], row_bounds: Sequence[tuple[float, float]]) -> bool:
    """Whether text found in columns is displayed maths (aligned equations, a matrix, cases,
    a sum with its limits), not a table: half its cells hold formula symbols, or some do
    while its rows overlap (sub- and superscripts, stacked limits: the median distance
    between row centres well under the median row height)."""
    filled = [cell for row in rows for cell in row if cell.strip()]
    if not filled or len(row_bounds) < 2:
        return False
    share = sum(1 for cell in filled if _MATHS.search(cell)) / len(filled)
    if share >= MATHS_SHARE:
        return True
    centres = [(top + bottom) / 2 for top, bottom in row_bounds]
    pitch = median(b - a for a, b in pairwise(centres))
    return share > 0 and pitch < OVERLAP * median(bottom - top for top, bottom in row_bounds)
