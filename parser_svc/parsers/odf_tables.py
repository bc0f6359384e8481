"""Tables of OpenDocument text and presentations (table:table) as rp.Table: a full grid whose
merged cells (table:number-columns-spanned / number-rows-spanned, with the table:covered-table-cell
elements they cover) repeat their text, rows of table:table-header-rows as header rows, and
repeated rows and cells (number-rows-repeated / number-columns-repeated) expanded within the
cell budget (checked before the expansion)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import TableBudget, safe
from parser_svc.parsers.odf_common import attr, count, inline_text, q

MAX_COLUMNS = 1024  # wider is the spreadsheet padding a pasted table drags along
_ROW, _CELL, _COVERED = q("table:table-row"), q("table:table-cell"), q("table:covered-table-cell")
_HEADER = q("table:table-header-rows")
_GROUPS = frozenset(q(n) for n in ("table:table-rows", "table:table-row-group"))
_PARAGRAPHS = (q("text:p"), q("text:h"))
_HIDDEN_IN_CELL = (q("text:note"), q("office:annotation"))


def _rows(node: Any, header: bool = False) -> Iterator[tuple[Any, bool]]:
    for child in node:
        if child.tag == _ROW:
            yield child, header
        elif child.tag == _HEADER:
            yield from _rows(child, True)
        elif child.tag in _GROUPS:
            yield from _rows(child, header)


def cell_text(cell: Any) -> str:
    """A cell's paragraphs (nested lists and tables too) on lines; notes and comments left out."""
    lines = []
    for p in cell.iter(*_PARAGRAPHS):
        if any(True for _ in p.iterancestors(*_HIDDEN_IN_CELL)):
            continue
        text = inline_text(p).strip()
        if text:
            lines.append(text)
    return safe("\n".join(lines))


class _Cell(NamedTuple):
    text: str
    cols: int  # columns spanned
    rows: int  # rows spanned
    covered: bool
    pad: bool  # one of a run of repeated empty cells (a spreadsheet's padding)


def _trim(rows: list[list[_Cell]], padding_rows: list[bool]) -> None:
    """Drops the padding after the content: trailing columns that are repeated empty cells in
    every row, trailing rows that are repeated empty rows."""
    while rows and padding_rows[-1]:
        rows.pop()
        padding_rows.pop()
    used = 1
    for r in rows:
        for i, cell in enumerate(r):
            if not cell.pad:
                used = max(used, i + cell.cols)
    for r in rows:
        del r[used:]


def _cells(row: Any, budget: TableBudget) -> list[_Cell]:
    cells: list[_Cell] = []
    for cell in row:
        if cell.tag not in (_CELL, _COVERED):
            continue
        repeat = min(max(count(attr(cell, "table:number-columns-repeated")), 1), MAX_COLUMNS)
        repeat = min(repeat, MAX_COLUMNS - len(cells))
        covered = cell.tag == _COVERED
        text = "" if covered else cell_text(cell)
        cols = max(count(attr(cell, "table:number-columns-spanned")), 1)
        spanned = max(count(attr(cell, "table:number-rows-spanned")), 1)
        budget.spend(repeat)
        pad = repeat > 1 and not text and not covered and cols == 1 and spanned == 1
        cells.extend([_Cell(text, cols, spanned, covered, pad)] * repeat)
    return cells


def read_table(node: Any, budget: TableBudget) -> rp.Table:
    rows: list[list[_Cell]] = []
    padding_rows: list[bool] = []
    header_rows, leading = 0, True
    for row, header in _rows(node):
        cells = _cells(row, budget)
        times = max(count(attr(row, "table:number-rows-repeated")), 1)
        padding = times > 1 and not any(c.text for c in cells)
        times = 1 if padding else times  # repeated empty rows: one stands for them
        budget.spend(len(cells) * (times - 1))
        for _ in range(times):
            rows.append(list(cells))
            padding_rows.append(padding)
            if leading and header:
                header_rows += 1
            else:
                leading = False
    _trim(rows, padding_rows)
    return _grid(rows, min(header_rows, len(rows)))


def _grid(rows: list[list[_Cell]], header_rows: int) -> rp.Table:
    width = max((len(r) for r in rows), default=0)
    grid = [[""] * width for _ in rows]
    covered: set[tuple[int, int]] = set()
    table = rp.Table(header_rows=header_rows)
    for r, cells in enumerate(rows):
        out = table.rows.add()
        for c, cell in enumerate(cells):
            if cell.covered or (r, c) in covered:
                continue
            cols, spanned = min(cell.cols, width - c), min(cell.rows, len(rows) - r)
            for rr in range(r, r + spanned):
                for cc in range(c, c + cols):
                    grid[rr][cc] = cell.text
                    covered.add((rr, cc))
            if cols > 1 or spanned > 1:
                out.spans.add(column=c, row_span=spanned, col_span=cols)
    for r, out in enumerate(table.rows):
        out.cells.extend(grid[r])
    return table
