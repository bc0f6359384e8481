"""An HTML <table> as a full grid (the HTML table model): rowspan and colspan fill the cells
they cover with the merged cell's text and become `CellSpan`s on the row of their top-left
cell; rows of <thead> (or leading rows of <th> cells only) are the header rows.

What a page controls is bounded before it is built: colspan at most 1000 and rowspan at most
the table's remaining rows (as browsers clamp them), and every grid cell, covered ones included,
counted against the page's cell budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import TableBudget

MAX_COLSPAN = 1000
SECTIONS = ("thead", "tbody", "tfoot")
CELLS = ("td", "th")


def local(element: Any) -> str:
    """An element's tag without namespace, lower case ("" for comments and the like)."""
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rpartition("}")[2].lower()


def table_rows(table: Any) -> list[tuple[Any, str]]:
    """The table's own rows in document order with their section ("thead", "tbody", "tfoot",
    or "" for a row directly in the table); rows of nested tables are not these."""
    rows: list[tuple[Any, str]] = []
    for child in table:
        tag = local(child)
        if tag == "tr":
            rows.append((child, ""))
        elif tag in SECTIONS:
            rows.extend((tr, tag) for tr in child if local(tr) == "tr")
    return rows


def _span(element: Any, name: str, default: int, top: int) -> int:
    try:
        value = int(str(element.get(name, default)).strip() or default)
    except ValueError:
        value = default
    return max(0, min(value, top))


def _header_rows(rows: list[tuple[Any, str]], kinds: list[list[str]]) -> int:
    """Rows of <thead> at the top; else leading rows of <th> cells only (not every row)."""
    count = 0
    while count < len(rows) and rows[count][1] == "thead":
        count += 1
    if count:
        return count
    while count < len(kinds) - 1 and kinds[count] and all(k == "th" for k in kinds[count]):
        count += 1
    return count


def build_table(table: Any, cell_text: Callable[[Any], str], budget: TableBudget) -> rp.Table:
    """The table's grid; `cell_text` reads one cell's content."""
    rows = table_rows(table)
    height = len(rows)
    grid: dict[tuple[int, int], str] = {}
    spans: list[list[rp.CellSpan]] = [[] for _ in rows]
    kinds: list[list[str]] = [[] for _ in rows]
    width = 0
    for r, (tr, _section) in enumerate(rows):
        c = 0
        for cell in tr:
            tag = local(cell)
            if tag not in CELLS:
                continue
            while (r, c) in grid:
                c += 1
            columns = _span(cell, "colspan", 1, MAX_COLSPAN) or 1
            # rowspan="0": to the end of the table; never past it.
            row_span = _span(cell, "rowspan", 1, height - r) or height - r
            budget.spend(columns * row_span)
            text = cell_text(cell)
            for dr in range(row_span):
                for dc in range(columns):
                    grid.setdefault((r + dr, c + dc), text)
            if columns > 1 or row_span > 1:
                spans[r].append(rp.CellSpan(column=c, row_span=row_span, col_span=columns))
            kinds[r].append(tag)
            c += columns
            width = max(width, c)
    budget.spend(height * width)
    out = rp.Table(header_rows=_header_rows(rows, kinds))
    for r in range(height):
        row = out.rows.add(cells=[grid.get((r, c), "") for c in range(width)])
        row.spans.extend(spans[r])
    return out
