"""A reading package as the units a chunker packs, in reading order: headings (with their
level), paragraphs (list items with their depth), and tables (rows, header rows, caption; a
table continued across pages joined to its start). Page furniture (roles "header" and
"footer") is left out. Pages are page numbers for PDF and Word, slide numbers for
presentations and sheet numbers for workbooks."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from docparse.render_email import attachment_note, attachment_title, header_fields, is_email
from docparse.render_layout import block_in_table, merged_range, sheet_rows, table_has_text
from docparse.v1 import reading_package_pb2 as rp

FURNITURE = frozenset({"header", "footer"})
HEADINGS = frozenset({"title", "heading"})
# A heading whose level the format does not say: a title counts as the top, a heading as one
# below it.
UNSTATED_LEVEL = {"title": 1, "heading": 2}


@dataclass(frozen=True)
class Box:
    """Where a unit stands: its page (slide, sheet) and its box in points."""

    page: int
    x0: float
    y0: float
    x1: float
    y1: float

    def as_dict(self) -> dict[str, Any]:
        return {"page": self.page, "x0": self.x0, "y0": self.y0, "x1": self.x1, "y1": self.y1}


@dataclass
class Heading:
    level: int
    text: str
    page: int
    boxes: tuple[Box, ...]


@dataclass
class Paragraph:
    text: str
    page: int
    boxes: tuple[Box, ...]
    # List items: their nesting depth (1 at the top); 0 for other blocks.
    list_level: int = 0


@dataclass
class TableUnit:
    caption: str
    header: list[list[str]]
    # Each body row with the index of the part (in `parts`) it came from.
    rows: list[tuple[list[str], int]]
    # (page, boxes) of each part: the table's start, then each page it continues on.
    parts: list[tuple[int, tuple[Box, ...]]] = field(default_factory=list)


Unit = Heading | Paragraph | TableUnit


def _boxes(message: rp.TextBlock | rp.Table, page: int) -> tuple[Box, ...]:
    if not message.HasField("bbox"):
        return ()
    box = message.bbox
    return (Box(page, box.x0, box.y0, box.x1, box.y1),)


def _table_unit(table: rp.Table, page: int) -> TableUnit:
    header_rows = min(table.header_rows, len(table.rows))
    return TableUnit(
        caption=table.caption,
        header=[list(row.cells) for row in table.rows[:header_rows]],
        rows=[(list(row.cells), 0) for row in table.rows[header_rows:]],
        parts=[(page, _boxes(table, page))],
    )


def _block_unit(block: rp.TextBlock, page: int, captions: set[str]) -> Unit | None:
    text = block.text.strip()
    if not text or block.role in FURNITURE:
        return None
    if block.role == "caption" and text in captions:
        return None  # it goes with its table
    boxes = _boxes(block, page)
    if block.role in HEADINGS:
        level = block.level or UNSTATED_LEVEL[block.role]
        return Heading(min(level, 6), " ".join(text.split()), page, boxes)
    if block.role == "list_item":
        indent = "  " * (max(block.level, 1) - 1)
        marker = block.marker if block.marker and not text.startswith(block.marker) else ""
        line = f"{indent}{marker} {text}" if marker else f"{indent}{text}"
        return Paragraph(line, page, boxes, max(block.level, 1))
    return Paragraph(text, page, boxes)


def _page_units(
    blocks: Sequence[rp.TextBlock], tables: Sequence[rp.Table], text: str, page: int
) -> Iterator[Unit | rp.Table]:
    """One page's or slide's units in reading order, its tables as they are (joined later).
    A table stands where the first text block inside its box is (PDF) or where a "table" block
    is (Word, PowerPoint: the n-th table with text); a table nothing stands for comes after
    the blocks. A page without blocks gives its text, paragraph by paragraph."""
    if not blocks:
        for paragraph in text.split("\n\n"):
            if paragraph.strip():
                yield Paragraph(paragraph.strip(), page, ())
    captions = {t.caption.strip() for t in tables if t.caption.strip() and table_has_text(t)}
    placed: set[int] = set()
    with_text = [i for i, table in enumerate(tables) if table_has_text(table)]
    for block in blocks:
        index = next((i for i, table in enumerate(tables) if block_in_table(block, table)), None)
        if index is None and block.role == "table":
            index = next((i for i in with_text if i not in placed), None)
        if index is not None:
            if index not in placed:
                placed.add(index)
                yield tables[index]
            continue
        unit = _block_unit(block, page, captions)
        if unit is not None:
            yield unit
    yield from (table for i, table in enumerate(tables) if i not in placed)


def _joined(units: Iterator[tuple[Unit | rp.Table, int]]) -> Iterator[Unit]:
    """Tables become table units; a table that continues the previous page's joins it when
    that is the last unit before it."""
    last: Unit | None = None
    for unit, page in units:
        if isinstance(unit, rp.Table):
            if not table_has_text(unit):
                continue
            table = _table_unit(unit, page)
            if unit.continues_previous and isinstance(last, TableUnit):
                last.parts.append(table.parts[0])
                part = len(last.parts) - 1
                if table.header != last.header:  # a repeated header is dropped
                    last.rows += [(cells, part) for cells in table.header]
                last.rows += [(cells, part) for cells, _ in table.rows]
                continue
            unit = table
        if last is not None:
            yield last
        last = unit
    if last is not None:
        yield last


def _fill_merged(sheet: rp.Sheet, grid: list[list[str]]) -> None:
    """Each merged range's value repeated in the cells it covers (the rows with values), as a
    table's grid has it."""
    rows = {row.number: index for index, row in enumerate(sheet.rows)}
    width = len(grid[0]) if grid else 0
    for merged in sheet.merged_ranges:
        found = merged_range(merged)
        if found is None or found[0] not in rows:
            continue
        top, left, bottom, right = found
        value = grid[rows[top]][left - 1] if left <= width else ""
        covered = (n for n in range(top, bottom + 1) if n in rows)
        if bottom - top > len(rows):
            covered = (n for n in rows if top <= n <= bottom)
        for number in covered:
            for column in range(left, min(right, width) + 1):
                grid[rows[number]][column - 1] = grid[rows[number]][column - 1] or value


def _sheet_units(sheet: rp.Sheet) -> Iterator[Unit]:
    """A worksheet: its name as a heading, its rows as a table (a merged range's value in each
    cell it covers) whose first row is the header when it holds only text and more rows
    follow."""
    grid = sheet_rows(sheet)
    _fill_merged(sheet, grid)
    yield Heading(1, sheet.name, sheet.number, ())
    if not grid:
        return
    first = sheet.rows[0].cells
    header = 1 if len(grid) > 1 and all(c.HasField("string_value") for c in first) else 0
    yield TableUnit("", grid[:header], [(row, 0) for row in grid[header:]], [(sheet.number, ())])


def package_units(package: rp.ReadingPackage) -> Iterator[Unit]:
    """Every unit of the package in reading order: pages, then slides (their notes after
    them), then sheets. An e-mail: its subject (a heading) and header lines first, and after
    its body each attachment under a heading "Attachment N: name", with the units of its own
    package (whose page numbers are the attachment's, its headings a level down) or why it
    was not read."""
    if is_email(package):
        if package.email.subject.strip():
            yield Heading(1, " ".join(package.email.subject.split()), 1, ())
        fields = header_fields(package, subject=False)
        if fields:
            yield Paragraph("\n".join(f"{name}: {value}" for name, value in fields), 1, ())

    def located() -> Iterator[tuple[Unit | rp.Table, int]]:
        for page in package.pages:
            for unit in _page_units(page.blocks, page.tables, page.text, page.number):
                yield unit, page.number
        for slide in package.slides:
            for unit in _page_units(slide.blocks, slide.tables, slide.text, slide.number):
                yield unit, slide.number
            if slide.notes.strip():
                yield Paragraph(f"Notes: {slide.notes.strip()}", slide.number, ()), slide.number

    yield from _joined(located())
    for sheet in package.sheets:
        yield from _sheet_units(sheet)
    for attachment in package.attachments:
        yield Heading(1, attachment_title(attachment), 1, ())
        if attachment.HasField("package"):  # its headings one level below this one
            for unit in package_units(attachment.package):
                if isinstance(unit, Heading):
                    unit = dataclasses.replace(unit, level=min(unit.level + 1, 6))
                yield unit
        else:
            yield Paragraph(attachment_note(attachment), 1, ())
