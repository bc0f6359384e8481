"""A reading package as plain text or Markdown, for people and for LLM pipelines."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from docparse.v1 import reading_package_pb2 as rp


def _cell(cell: rp.Cell) -> str:
    kind = cell.WhichOneof("value")
    if kind is None:
        return ""
    value = getattr(cell, kind)
    if kind == "bool_value":
        return "TRUE" if value else "FALSE"
    if kind == "number_value" and float(value).is_integer():
        return str(int(value))
    return str(value)


def _sheet_rows(sheet: rp.Sheet) -> list[list[str]]:
    width = max((cell.column for row in sheet.rows for cell in row.cells), default=0)
    table = []
    for row in sheet.rows:
        values = [""] * width
        for cell in row.cells:
            values[cell.column - 1] = _cell(cell)
        table.append(values)
    return table


def _markdown_table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    padded = [[c.replace("|", "\\|").replace("\n", " ") for c in r] + [""] * (width - len(r))
              for r in rows]  # fmt: skip
    lines = ["| " + " | ".join(padded[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in padded[1:]]
    return "\n".join(lines)


def to_text(package: rp.ReadingPackage) -> str:
    parts: list[str] = []
    for page in package.pages:
        parts.append(page.text)
    for slide in package.slides:
        parts.append(slide.text + (f"\n\nNotes: {slide.notes}" if slide.notes else ""))
    for sheet in package.sheets:
        parts.append("\n".join("\t".join(row) for row in _sheet_rows(sheet)))
    return "\n\f\n".join(parts) + "\n"


def _table_has_text(table: rp.Table) -> bool:
    return any(cell for row in table.rows for cell in row.cells)


# A PDF table with a cell longer than this holds paragraphs: more likely a frame drawn around
# a figure or a column than a table, so the text inside its box stays text.
PROSE_CELL_CHARS = 400


def _inside(block: rp.TextBlock, table: rp.Table) -> bool:
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


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _markdown_blocks(
    blocks: Sequence[rp.TextBlock],
    tables: Sequence[rp.Table],
    text: str,
    *,
    heading: str,
    already: str = "",
) -> list[str]:
    """A page's or slide's blocks in reading order with their roles as Markdown: titles and
    headings as headings (`heading` is the level's marks), list items as items, and each table
    once, where it stands: a "table" block (Word, PowerPoint: the n-th table with text) or the
    text blocks wholly inside a table's box (PDF) become the table; a table nothing stands for comes
    after the blocks. `already`: a title printed above (the first block repeating it is left
    out). Without blocks: the text, then the tables."""
    rendered = [_markdown_table([list(r.cells) for r in t.rows]) for t in tables]
    if not tables and not any(block.role for block in blocks):
        return [text]  # plain text (OCR lines stay lines of one paragraph)
    if not blocks:
        return [text, *rendered]
    out: list[str] = []
    placed: set[int] = set()
    with_text = [i for i, table in enumerate(tables) if _table_has_text(table)]
    next_with_text = 0
    # Formats that mark their tables' text (Word, PowerPoint) are placed by that; a PDF's by
    # geometry.
    by_geometry = not any(block.role == "table" for block in blocks)

    def place(index: int) -> None:
        if index not in placed:
            placed.add(index)
            out.append(rendered[index])

    for block in blocks:
        if block.role == "table" and next_with_text < len(with_text):
            place(with_text[next_with_text])
            next_with_text += 1
            continue
        boxed = None
        if by_geometry:
            boxed = next((i for i, table in enumerate(tables) if _inside(block, table)), None)
        if boxed is not None:
            place(boxed)
            continue
        line = _one_line(block.text)
        if already and line == _one_line(already) and block.role in ("title", "heading"):
            already = ""
            continue
        already = ""
        if block.role in ("title", "heading") and line:
            out.append(f"{heading} {line}")
        elif block.role == "list_item":
            out.append("- " + block.text.replace("\n", "\n  "))
        else:
            out.append(block.text)
    out += [rendered[i] for i in range(len(tables)) if i not in placed]
    return out


def to_markdown(package: rp.ReadingPackage) -> str:
    """Markdown: the title, then each page (or the Word document's body), slide and sheet;
    heading roles as headings, list items as items, each table once as a Markdown table."""
    out: list[str] = []
    title = package.metadata.title
    if title:
        out.append(f"# {_one_line(title)}")
    # A Word document is one page whose number means nothing: its headings are the sections.
    unpaged = package.content_type in ("docx", "doc") and len(package.pages) == 1
    for page in package.pages:
        if not unpaged:
            out.append(f"## Page {page.number}")
        out += _markdown_blocks(
            page.blocks,
            page.tables,
            page.text,
            heading="##" if unpaged else "###",
            already=title if unpaged else "",
        )
    for slide in package.slides:
        out.append(f"## Slide {slide.number}" + (f": {slide.title}" if slide.title else ""))
        out += _markdown_blocks(
            slide.blocks, slide.tables, slide.text, heading="###", already=slide.title
        )
        if slide.notes:
            out.append(f"> Notes: {slide.notes}")
    for sheet in package.sheets:
        out.append(f"## Sheet {sheet.name}")
        out.append(_markdown_table(_sheet_rows(sheet)))
    return "\n\n".join(part for part in out if part) + "\n"


def to_json(package: rp.ReadingPackage) -> str:
    """The package in its protobuf JSON form, as the HTTP API answers it: proto field names,
    enums by name, 64-bit integers as strings, every scalar field present."""
    return "".join(iter_json(package))


def _as_dict(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def iter_json(message: Message, depth: int = 2) -> Iterator[str]:
    """`message` as JSON (what json_format.MessageToJson gives, up to key order), in pieces:
    its repeated message fields (pages, sheets, and their blocks and rows, `depth` levels
    down) element by element. json_format builds the whole document as Python objects first,
    about 40 times the size of the package (a 13 MB workbook of 1M cells peaked at 600 MB);
    this holds one element's at a time."""
    streamed = [
        field
        for field in message.DESCRIPTOR.fields
        if depth > 0
        and field.is_repeated
        and field.message_type is not None
        and not field.message_type.GetOptions().map_entry
        and len(getattr(message, field.name))
    ]
    if not streamed:
        yield json.dumps(_as_dict(message))
        return
    shell = type(message)()
    shell.CopyFrom(message)
    for field in streamed:
        shell.ClearField(field.name)
    head = json.dumps(_as_dict(shell))
    yield head[:-1]  # without its closing brace
    separator = ", " if head != "{}" else ""
    del shell
    for field in streamed:
        yield f'{separator}"{field.name}": ['
        for index, item in enumerate(getattr(message, field.name)):
            if index:
                yield ", "
            yield from iter_json(item, depth - 1)
        yield "]"
        separator = ", "
    yield "}"


RENDERERS = {"json": to_json, "text": to_text, "markdown": to_markdown}


def render(data: bytes, fmt: str) -> bytes:
    """A serialized ReadingPackage rendered as `fmt` (json, text or markdown), UTF-8. Pure
    function of its arguments, so it can run in another process."""
    return RENDERERS[fmt](rp.ReadingPackage.FromString(data)).encode()
