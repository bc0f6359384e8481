"""A reading package as JSON, plain text, Markdown, HTML or chunks, for people and for LLM
pipelines (Markdown: docparse.render_markdown; HTML: docparse.render_html)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from docparse.render_email import attachment_note, attachment_title, header_fields
from docparse.render_html import to_html
from docparse.render_layout import page_text, sheet_rows
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp

__all__ = ["RENDERERS", "iter_json", "render", "to_html", "to_json", "to_markdown", "to_text"]


def to_text(package: rp.ReadingPackage, *, furniture: bool = False) -> str:
    """The text of each page, slide and sheet, separated by form feeds; page furniture
    (running headers, footers) left out unless `furniture`. An e-mail: its header lines
    above the body, then each attachment's text after its name."""
    parts: list[str] = []
    for page in package.pages:
        parts.append(page_text(page, furniture=furniture))
    for slide in package.slides:
        parts.append(slide.text + (f"\n\nNotes: {slide.notes}" if slide.notes else ""))
    for sheet in package.sheets:
        parts.append("\n".join("\t".join(row) for row in sheet_rows(sheet)))
    head = "\n".join(f"{name}: {value}" for name, value in header_fields(package, subject=True))
    if head:  # an e-mail's header block, above its body
        parts[:1] = [head + ("\n\n" + parts[0] if parts and parts[0] else "")]
    for attachment in package.attachments:
        inner = attachment_note(attachment)
        if attachment.HasField("package"):
            inner = to_text(attachment.package, furniture=furniture).rstrip("\n")
        parts.append(f"{attachment_title(attachment)}\n\n{inner}")
    return "\n\f\n".join(parts) + "\n"


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


def _chunks(package: rp.ReadingPackage, furniture: bool) -> str:
    from docparse.chunks import to_chunks_jsonl  # only the "chunks" format needs it

    return to_chunks_jsonl(package)


Renderer = Callable[[rp.ReadingPackage, bool], str]
RENDERERS: dict[str, Renderer] = {
    "json": lambda package, furniture: to_json(package),
    "text": lambda package, furniture: to_text(package, furniture=furniture),
    "markdown": lambda package, furniture: to_markdown(package, furniture=furniture),
    "html": lambda package, furniture: to_html(package, furniture=furniture),
    "chunks": _chunks,
}


def render(data: bytes, fmt: str, furniture: bool = False) -> bytes:
    """A serialized ReadingPackage rendered as `fmt` (a RENDERERS key), UTF-8; `furniture`
    keeps running headers and footers in text, Markdown and HTML. Pure function of its
    arguments, so it can run in another process."""
    return RENDERERS[fmt](rp.ReadingPackage.FromString(data), furniture).encode()
