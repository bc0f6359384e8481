"""Markdown → ReadingPackage with markdown-it-py (CommonMark and GFM tables): one Page whose
blocks carry the document's structure — headings with their level, list items with their depth,
marker and whether they count, tables (the header row, `header_rows` 1), fenced and indented
code (role "code", verbatim), block quotes (role "quote"); HTML blocks are read as HTML
(`html_blocks.py`). A YAML front matter's title, author and description are the metadata; else
the title is the first level-1 heading. Links show their target as "text (url)".

Bounded: a long document is parsed in pieces (`markdown_chunks.py`), so the tokens held at
once are those of about 64 KB of Markdown; markdown-it-py's nesting limit (MAX_NESTING levels:
a piece that reaches it is read as plain text, since markdown-it drops what lies deeper); the
tokens are walked in one loop (no recursion).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import AssetSink, ParseOptions, ProgressFn, TableBudget, safe, table_text
from parser_svc.parsers.html_blocks import BULLETS, HtmlBlocks, Kind, strip_dropped
from parser_svc.parsers.html_page import parse_tree
from parser_svc.parsers.markdown_chunks import chunks, references
from parser_svc.parsers.plain_text import paragraphs
from parser_svc.parsers.text_charset import decode_text

_FRONT_MATTER = re.compile(
    r"\A---[ \t]*\r?\n(.{0,16384}?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S
)
_FIELD = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$")
_META_FIELDS = {"title": "title", "author": "author", "description": "subject"}
# Block nesting markdown-it builds (deeper, it drops the content: the document is then read as
# plain text).
MAX_NESTING = 50
_SHOWN_SCHEMES = ("http://", "https://", "ftp://", "mailto:")


def front_matter(text: str, package: rp.ReadingPackage) -> str:
    """The text without its YAML front matter, whose simple `key: value` fields become the
    metadata (title, author, description; others in `extra`)."""
    found = _FRONT_MATTER.match(text)
    if found is None:
        return text
    for line in found.group(1).splitlines():
        match = _FIELD.match(line)
        if match is None or not match.group(2):
            continue
        key, value = match.group(1).lower(), safe(match.group(2).strip("\"'"))
        if key in _META_FIELDS:
            setattr(package.metadata, _META_FIELDS[key], value)
        else:
            package.metadata.extra[key] = value
    return text[found.end() :]


def inline_text(token: Any) -> str:
    """An inline token's text as a reader sees it: emphasis marks gone, code spans' text,
    images' alt text, links' targets after their text, hard breaks as line breaks."""
    out: list[str] = []
    links: list[tuple[int, str]] = []
    for child in token.children or []:
        kind = child.type
        if kind in ("text", "code_inline"):
            out.append(child.content)
        elif kind == "softbreak":
            out.append(" ")
        elif kind == "hardbreak":
            out.append("\n")
        elif kind == "image":
            out.append(child.content)
        elif kind == "html_inline":
            out.append("\n" if child.content.lower().startswith("<br") else "")
        elif kind == "link_open":
            links.append((len(out), str(child.attrs.get("href", ""))))
        elif kind == "link_close" and links:
            start, href = links.pop()
            text = "".join(out[start:]).strip()
            target = href[7:] if href.lower().startswith("mailto:") else href
            if href.lower().startswith(_SHOWN_SCHEMES) and text and text not in (href, target):
                out.append(f" ({href})")
    return "\n".join(" ".join(line.split()) for line in "".join(out).split("\n")).strip()


@dataclass
class _List:
    ordered: bool
    number: int
    delimiter: str
    level: int


@dataclass
class _Writer:
    page: rp.Page
    assets: AssetSink
    budget: TableBudget
    texts: list[str] = field(default_factory=list)
    lists: list[_List] = field(default_factory=list)
    item: Kind | None = None  # the list item whose text is still to come
    # The item just written, while its later paragraphs (before a nested list) are its lines.
    last_item: rp.TextBlock | None = None
    quote: int = 0
    heading: int = 0
    row: list[str] | None = None
    table: rp.Table | None = None

    def add(self, text: str, kind: Kind) -> None:
        text = safe(text)
        if not text.strip():
            return
        self.texts.append(text)
        block = self.page.blocks.add(text=text, source="text", role=kind.role)
        block.level, block.marker, block.ordered = kind.level, kind.marker, kind.ordered

    def paragraph(self, text: str) -> None:
        if self.heading:
            self.add(text, Kind("heading", self.heading))
        elif self.item is not None:
            self.add(text, self.item)
            self.item = None
            self.last_item = self.page.blocks[-1] if self.page.blocks else None
        elif self.last_item is not None and text.strip():
            self.last_item.text += "\n" + safe(text)
            self.texts[-1] = self.last_item.text
        else:
            self.add(text, Kind("quote" if self.quote else ""))

    def open_item(self, token: Any) -> None:
        current = self.lists[-1]
        if current.ordered:
            number = int(token.info) if str(token.info).isdigit() else current.number
            current.number = number + 1
            self.item = Kind("list_item", current.level, f"{number}{current.delimiter}", True)
        else:
            self.item = Kind("list_item", current.level, BULLETS[min(current.level, 3) - 1])

    def html(self, source: str) -> None:
        root = parse_tree(source, "Markdown document's HTML")
        strip_dropped(root)
        body = next(root.iter("{*}body"), root)
        reader = HtmlBlocks(self.page, self.assets, self.budget)
        reader.read(body)
        reader.flush()
        self.texts += reader.texts

    def end_table(self) -> None:
        if self.table is None:
            return
        rows = [list(row.cells) for row in self.table.rows]
        self.budget.spend(sum(len(row) for row in rows))
        self.page.tables.append(self.table)
        if any(any(row) for row in rows):
            self.add(table_text(rows), Kind("table"))
        self.table = None


def _step(writer: _Writer, token: Any) -> None:
    kind = token.type
    if kind == "inline":
        text = inline_text(token)
        if writer.row is not None:
            writer.row.append(safe(text))
        else:
            writer.paragraph(text)
    elif kind == "heading_open":
        writer.heading = min(6, int(token.tag[1:]))
    elif kind == "heading_close":
        writer.heading = 0
    elif kind in ("bullet_list_open", "ordered_list_open"):
        ordered = kind == "ordered_list_open"
        start = int(token.attrs.get("start", 1)) if ordered else 1
        writer.lists.append(_List(ordered, start, token.markup, len(writer.lists) + 1))
        writer.last_item = None
    elif kind in ("bullet_list_close", "ordered_list_close"):
        writer.lists.pop()
    elif kind == "list_item_open":
        writer.open_item(token)
    elif kind == "list_item_close":
        writer.item = writer.last_item = None
    elif kind in ("blockquote_open", "blockquote_close"):
        writer.quote += 1 if kind == "blockquote_open" else -1
    elif kind in ("fence", "code_block"):
        writer.add(token.content.rstrip("\n"), Kind("code"))
    elif kind == "html_block":
        writer.html(token.content)
    elif kind == "table_open":
        writer.table = rp.Table()
    elif kind == "thead_close" and writer.table is not None:
        writer.table.header_rows = len(writer.table.rows)
    elif kind == "tr_open":
        writer.row = []
    elif kind == "tr_close" and writer.table is not None and writer.row is not None:
        writer.table.rows.add(cells=writer.row)
        writer.row = None
    elif kind == "table_close":
        writer.end_table()


def parse_markdown(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    progress(0, 1, "text")
    decoded = decode_text(data, "Markdown document")
    text = decoded.text
    package = rp.ReadingPackage(content_type="markdown")
    package.metadata.extra["charset"] = decoded.encoding
    del decoded
    text = front_matter(text, package)
    page = package.pages.add(number=1)
    assets = AssetSink(package, options)
    writer = _Writer(page, assets, TableBudget(options.max_cells))
    parser = MarkdownIt("commonmark", {"maxNesting": MAX_NESTING}).enable("table")
    env: dict[str, Any] = {}
    parser.parse(references(text), env)
    for piece in chunks(text):
        tokens = parser.parse(piece, env)
        if max((token.level for token in tokens), default=0) >= MAX_NESTING - 2:
            # markdown-it drops what nests deeper than its limit: every word is kept as text.
            if not package.warnings:
                package.warnings.append(
                    f"the Markdown nests deeper than {MAX_NESTING - 2} levels: read as plain text"
                )
            tokens = []
            for paragraph in paragraphs(piece):
                writer.add(paragraph, Kind())
        for token in tokens:
            _step(writer, token)
        del tokens
        writer.lists, writer.item, writer.last_item, writer.quote = [], None, None, 0
    del text
    page.text = "\n\n".join(writer.texts)
    assets.finish()
    if not package.metadata.title:
        first = next((b for b in page.blocks if b.role == "heading" and b.level == 1), None)
        package.metadata.title = first.text if first is not None else ""
    if not page.text:
        package.warnings.append("the Markdown document has no text")
    progress(1, 1, "text")
    return package
