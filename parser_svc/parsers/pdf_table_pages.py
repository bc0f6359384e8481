"""Tables broken across PDF pages, joined once every page is read (pages may be read by
several processes, pdf_split.py): the first table of page k+1 continues the last table of page
k when their column x-edges agree within EDGE_SLACK points (the second's moved by the
difference of their left edges: a table carried on into another column of the page) and
little but page furniture stands between them, unless it has header rows of its own that are
not the first table's (another table with the same columns). It is marked `continues_previous`,
and its first rows, when they repeat the header rows of the table it continues, are dropped;
rows repeated so, where the first table had no header rows marked, are its header rows.

The column edges are not in the package: the pages of a candidate pair are read again for
their tables (pdf_table_structure.page_tables), only those.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pymupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers.pdf_pass import text_and_rules
from parser_svc.parsers.pdf_table_structure import page_tables

EDGE_SLACK = 2.0
# A borderless table ends where its last column's longest text does, which differs from page
# to page: its right edge may move by this share of the narrower last column.
LAST_COLUMN_SLACK = 0.5
MAX_TEXT_BETWEEN = 200  # characters of body text between the two tables
MAX_HEADER_ROWS = 3
FURNITURE = ("header", "footer", "caption")
_CONTINUED = re.compile(r"cont", re.IGNORECASE)


_Found = list[tuple[Sequence[float], list[float]]]  # a page's tables: (bbox, column x-edges)


def _edges(doc: pymupdf.Document, number: int, cache: dict[int, _Found]) -> _Found:
    if number not in cache:
        try:
            page = doc[number - 1]
            run = text_and_rules(page)
            found = page_tables(page, run.textpage, run.rules)
        except Exception:  # read once already: this second reading only adds a link
            found = []
        cache[number] = [(t.bbox, t.columns) for t in found]
    return cache[number]


def _columns_of(table: rp.Table, found: _Found) -> list[float] | None:
    box = table.bbox
    for bbox, columns in found:
        near = zip(bbox, (box.x0, box.y0, box.x1, box.y1), strict=True)
        if all(abs(a - b) <= 1 for a, b in near):
            return columns
    return None


def _text_between(
    before: rp.Page, after: rp.Page, last: rp.BoundingBox, first: rp.BoundingBox
) -> int:
    """Characters of body text read after the table `last` on `before` (below it, or in a
    column to its right) and before the table `first` on `after` (above it, or in a column to
    its left)."""
    count = 0
    for block in before.blocks:
        if block.role not in FURNITURE and block.HasField("bbox"):
            box = block.bbox
            if box.y0 >= last.y1 - 1 or box.x0 >= last.x1 - 1:
                count += len(block.text)
    for block in after.blocks:
        if block.role not in FURNITURE and block.HasField("bbox"):
            box = block.bbox
            if box.y1 <= first.y0 + 1 or box.x1 <= first.x0 + 1:
                count += len(block.text)
    return count


def _cells(table: rp.Table, count: int) -> list[list[str]]:
    return [list(row.cells) for row in table.rows[:count]]


def _drop_repeated_header(head: rp.Table, table: rp.Table) -> None:
    """Drops `table`'s first rows where they repeat `head`'s header rows (or, `head` having
    none marked, its first rows: they become its header rows)."""
    count = head.header_rows
    if not count:
        limit = min(MAX_HEADER_ROWS, len(head.rows), len(table.rows) - 1)
        while count < limit and _cells(head, count + 1) == _cells(table, count + 1):
            count += 1
        if count:
            head.header_rows = count
    if count and count < len(table.rows) and _cells(head, count) == _cells(table, count):
        del table.rows[:count]
        table.header_rows = 0


def join_continued_tables(doc: pymupdf.Document, package: rp.ReadingPackage) -> None:
    """Marks the tables that continue one on the page before (see the module's comment)."""
    cache: dict[int, _Found] = {}
    head: rp.Table | None = None  # the table a chain of continuations started with
    for before, after in zip(package.pages, package.pages[1:], strict=False):
        if not before.tables or not after.tables or after.number != before.number + 1:
            continue
        last = max(before.tables, key=lambda t: t.bbox.y1)
        first = min(after.tables, key=lambda t: t.bbox.y0)
        if not _candidates(last, first, before, after):
            continue
        ours = _columns_of(last, _edges(doc, before.number, cache))
        theirs = _columns_of(first, _edges(doc, after.number, cache))
        if ours is None or theirs is None:
            continue
        shift = first.bbox.x0 - last.bbox.x0
        if not _same_columns(ours, [x - shift for x in theirs]):
            continue
        if head is None or not last.continues_previous:
            head = last
        if _own_header(head, first):
            head = None
            continue
        first.continues_previous = True
        _drop_repeated_header(head, first)


def _own_header(head: rp.Table, first: rp.Table) -> bool:
    """Whether `first` has header rows of its own (a rule or bold type under them) that are
    not `head`'s: another table that happens to share its columns, not a continuation."""
    count = first.header_rows
    return bool(count) and _cells(first, count) != _cells(head, count)


def _candidates(last: rp.Table, first: rp.Table, before: rp.Page, after: rp.Page) -> bool:
    """Whether the two tables can be one, before their columns are compared."""
    if not last.rows or not first.rows or len(last.rows[0].cells) != len(first.rows[0].cells):
        return False
    # carried on in another column of the page, a table keeps its widths but not its x
    right = (last.bbox.x1 - last.bbox.x0) - (first.bbox.x1 - first.bbox.x0)
    columns = len(first.rows[0].cells)
    mean = min(last.bbox.x1 - last.bbox.x0, first.bbox.x1 - first.bbox.x0) / columns
    if abs(right) > max(EDGE_SLACK, LAST_COLUMN_SLACK * mean):
        return False  # the right edge checked again on the columns (_same_columns)
    if first.caption and not _CONTINUED.search(first.caption):
        return False  # a caption of its own: a new table
    return _text_between(before, after, last.bbox, first.bbox) <= MAX_TEXT_BETWEEN


def _same_columns(ours: Sequence[float], theirs: Sequence[float]) -> bool:
    """Whether two tables' column x-edges agree: all but the right edge within EDGE_SLACK,
    the right one within LAST_COLUMN_SLACK of the narrower last column."""
    if len(ours) != len(theirs) or len(ours) < 2:
        return False
    if any(abs(a - b) > EDGE_SLACK for a, b in zip(ours[:-1], theirs[:-1], strict=True)):
        return False
    last = min(ours[-1] - ours[-2], theirs[-1] - theirs[-2])
    return abs(ours[-1] - theirs[-1]) <= max(EDGE_SLACK, LAST_COLUMN_SLACK * last)
