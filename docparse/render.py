"""A reading package as plain text or Markdown, for people and for LLM pipelines."""

from __future__ import annotations

import json
from collections.abc import Iterator
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


def to_markdown(package: rp.ReadingPackage) -> str:
    out: list[str] = []
    if package.metadata.title:
        out.append(f"# {package.metadata.title}")
    for page in package.pages:
        out.append(f"## Page {page.number}")
        out.append(page.text)
        out += [_markdown_table([list(r.cells) for r in table.rows]) for table in page.tables]
    for slide in package.slides:
        out.append(f"## Slide {slide.number}" + (f": {slide.title}" if slide.title else ""))
        out.append(slide.text)
        out += [_markdown_table([list(r.cells) for r in table.rows]) for table in slide.tables]
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
