"""What the Markdown and HTML renderings share: a page's blocks and tables in reading order
(each table once, where it stands), tables continued across pages joined to the table they
continue, merged cells, heading levels and list markers, page furniture left out unless kept.
The renderings print only what the package says: no heading is made up."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from docparse.v1 import reading_package_pb2 as rp

FURNITURE = ("header", "footer")
HEADINGS = ("title", "heading")
# A list marker that Markdown and HTML can keep as the document writes it: a number or a
# letter followed by "." or ")".
COUNTED_MARKER = re.compile(r"^([0-9]{1,9}|[A-Za-z])([.)])$")

# A PDF table with a cell longer than this holds paragraphs: more likely a frame drawn around
# a figure or a column than a table, so the text inside its box stays text.
PROSE_CELL_CHARS = 400


def cell_text(cell: rp.Cell) -> str:
    kind = cell.WhichOneof("value")
    if kind is None:
        return ""
    value = getattr(cell, kind)
    if kind == "bool_value":
        return "TRUE" if value else "FALSE"
    if kind == "number_value" and float(value).is_integer():
        return str(int(value))
    return str(value)


_A1_CELL = re.compile(r"\$?([A-Z]{1,3})\$?([0-9]{1,7})")


def merged_range(reference: str) -> tuple[int, int, int, int] | None:
    """An A1 range ("B3:D5", "$B$3:$D$5", or one cell "B3") as (top row, left column,
    bottom row, right column), 1-based; None for what is no range. Corners given the other way
    round ("D5:B3", as a workbook may write them) name the same range."""
    first, _, last = reference.strip().upper().partition(":")
    start, end = _A1_CELL.fullmatch(first), _A1_CELL.fullmatch(last or first)
    if start is None or end is None:
        return None
    rows = sorted((int(start[2]), int(end[2])))
    columns = sorted((_column(start[1]), _column(end[1])))
    return rows[0], columns[0], rows[1], columns[1]


def _column(letters: str) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + ord(letter) - ord("A") + 1
    return number


def sheet_rows(sheet: rp.Sheet) -> list[list[str]]:
    width = max((cell.column for row in sheet.rows for cell in row.cells), default=0)
    table = []
    for row in sheet.rows:
        values = [""] * width
        for cell in row.cells:
            values[cell.column - 1] = cell_text(cell)
        table.append(values)
    return table


def one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Grid:
    """A table as rendered: its rows (with those of the tables continuing it on later pages),
    its header rows and caption."""

    rows: list[rp.TableRow]
    header_rows: int
    caption: str
    texts: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.texts = [list(row.cells) for row in self.rows]

    def extend(self, table: rp.Table) -> None:
        self.rows += list(table.rows)
        self.texts += [list(row.cells) for row in table.rows]


def _grid(table: rp.Table) -> Grid:
    return Grid(list(table.rows), table.header_rows, table.caption)


def joined_tables(tables_by_page: Sequence[Sequence[rp.Table]]) -> list[list[Grid | None]]:
    """Each page's tables as grids; a table that continues the last table of the previous
    page is appended to that table's grid and is None in its own page's list."""
    out: list[list[Grid | None]] = []
    last: Grid | None = None
    for tables in tables_by_page:
        grids: list[Grid | None] = []
        previous, last = last, None
        for table in tables:
            if table.continues_previous and previous is not None:
                previous.extend(table)
                grids.append(None)
                last = previous
                continue
            grid = _grid(table)
            grids.append(grid)
            last = previous = grid
        out.append(grids)
    return out


Spans = tuple[dict[tuple[int, int], tuple[int, int]], set[tuple[int, int]]]


def spans(grid: Grid, head: int = 0) -> Spans:
    """The merged cells: (row, column) of each top-left cell -> (rows, columns) it covers,
    clipped to the grid (and, with `head`, a header cell to the header rows); and the cells
    they cover besides their top-left one."""
    starts: dict[tuple[int, int], tuple[int, int]] = {}
    covered: set[tuple[int, int]] = set()
    height = len(grid.texts)
    for r, row in enumerate(grid.rows):
        width = len(grid.texts[r])
        bottom = head if r < head else height
        for span in row.spans:
            c = span.column
            if c >= width or (r, c) in covered:
                continue
            rows = max(1, min(span.row_span, bottom - r))
            columns = max(1, min(span.col_span, width - c))
            if rows == columns == 1:
                continue
            starts[(r, c)] = (rows, columns)
            covered.update(
                (r + dr, c + dc) for dr in range(rows) for dc in range(columns) if dr or dc
            )
    return starts, covered


def heading_level(block: rp.TextBlock) -> int:
    """A heading block's level, 1-6: a "title" without one is 1, a "heading" without one 2."""
    default = 1 if block.role == "title" else 2
    return max(1, min(6, block.level or default))


def list_level(block: rp.TextBlock) -> int:
    return max(1, block.level)


def item_text(block: rp.TextBlock) -> str:
    """A list item's text without the marker, when the text starts with it."""
    text = block.text
    marker = block.marker.strip()
    if marker and text.startswith(marker):
        text = text[len(marker) :].lstrip()
    return text


def marker_number(marker: str) -> int | None:
    """The value an ordered marker counts ("3." -> 3, "c)" -> 3), None if it does not."""
    found = COUNTED_MARKER.match(marker.strip())
    if found is None:
        return None
    mark = found.group(1)
    return int(mark) if mark.isdigit() else ord(mark.lower()) - ord("a") + 1


def block_in_table(block: rp.TextBlock, table: rp.Table) -> bool:
    """Whether the block lies in the table's box (both with geometry; a point of slack), the
    table's cells holding no paragraphs."""
    if not (block.HasField("bbox") and table.HasField("bbox")):
        return False
    if any(len(cell) > PROSE_CELL_CHARS for row in table.rows for cell in row.cells):
        return False
    inner, box = block.bbox, table.bbox
    return (
        inner.x0 >= box.x0 - 1
        and inner.y0 >= box.y0 - 1
        and inner.x1 <= box.x1 + 1
        and inner.y1 <= box.y1 + 1
    )


Item = rp.TextBlock | Grid


def table_has_text(table: rp.Table) -> bool:
    return any(cell for row in table.rows for cell in row.cells)


def _left_out(block: rp.TextBlock, captions: set[str], *, furniture: bool) -> bool:
    """Page furniture unless kept; a caption its table prints."""
    if block.role in FURNITURE:
        return not furniture
    return block.role == "caption" and one_line(block.text) in captions


def page_items(
    blocks: Sequence[rp.TextBlock],
    tables: Sequence[rp.Table],
    grids: Sequence[Grid | None],
    *,
    furniture: bool,
) -> list[Item] | None:
    """A page's or slide's blocks in reading order, each table once where it stands: a "table"
    block (Word, PowerPoint: the n-th table with text) or the blocks wholly inside a table's box
    (PDF) become the table; a table nothing stands for comes after the blocks. A table joined
    to an earlier one (`grids` has None) is left out where it stands, its blocks too. Caption
    blocks a table prints are left out, and page furniture unless `furniture`. None when the
    page is plain text (no roles, no tables): the page's text is the rendering."""
    if not tables and not any(block.role for block in blocks):
        return None
    with_text = [i for i, table in enumerate(tables) if table_has_text(table)]
    next_with_text = 0
    by_geometry = not any(block.role == "table" for block in blocks)
    captions = {one_line(g.caption) for g in grids if g is not None and g.caption}
    out: list[Item] = []
    placed: set[int] = set()

    def place(index: int) -> None:
        if index not in placed:
            placed.add(index)
            if (grid := grids[index]) is not None:
                out.append(grid)

    for block in blocks:
        if block.role == "table" and next_with_text < len(with_text):
            place(with_text[next_with_text])
            next_with_text += 1
            continue
        boxed = None
        if by_geometry:
            boxed = next(
                (i for i, table in enumerate(tables) if block_in_table(block, table)), None
            )
        if boxed is not None:
            place(boxed)
        elif not _left_out(block, captions, furniture=furniture):
            out.append(block)
    for index in range(len(tables)):
        place(index)
    return out


def has_headings(package: rp.ReadingPackage) -> bool:
    """Whether the document has a title or heading of its own (a block, a slide's title)."""
    blocks = [b for page in package.pages for b in page.blocks]
    blocks += [b for slide in package.slides for b in slide.blocks]
    return any(b.role in HEADINGS for b in blocks) or any(s.title for s in package.slides)


def page_text(page: rp.Page, *, furniture: bool) -> str:
    """The page's text, without its furniture blocks unless `furniture`."""
    if furniture or not any(block.role in FURNITURE for block in page.blocks):
        return page.text
    return "\n\n".join(block.text for block in page.blocks if block.role not in FURNITURE)
