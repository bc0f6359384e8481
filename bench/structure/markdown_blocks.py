"""Markdown as the scorer reads it: a list of blocks (heading, list item, table, paragraph).
Tables come as pipe tables (the first row the header) or as HTML `<table>` with spans and
`<th>`/`<thead>` header rows; HTML comments (page separators) are dropped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from bench.structure.teds import CellT, ParsedTable

HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
ITEM = re.compile(r"^(\s*)([-*+•◦▪–]|\d{1,3}[.)]|[a-zA-Z][.)])\s+(.*)$")  # noqa: RUF001
COMMENT = re.compile(r"<!--.*?-->", re.S)
SEPARATOR = re.compile(r"^\|?\s*:?-{2,}")


@dataclass
class Block:
    kind: str  # heading | item | table | paragraph
    text: str = ""
    level: int = 0
    marker: str = ""
    table: ParsedTable | None = None
    lines: list[str] = field(default_factory=list)


def norm(text: str) -> str:
    """Lower case words and numbers only: emphasis, punctuation and line breaks do not count."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


class _HtmlTable(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[CellT]] = []
        self.header_rows = 0
        self.in_head = False
        self.cell: list[str] | None = None
        self.spans = (1, 1)
        self.row_is_header = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "thead":
            self.in_head = True
        elif tag == "tr":
            self.rows.append([])
            self.row_is_header = True
        elif tag in ("td", "th"):
            self.cell = []
            self.spans = (int(values.get("rowspan") or 1), int(values.get("colspan") or 1))
            self.row_is_header = self.row_is_header and (tag == "th" or self.in_head)

    def handle_endtag(self, tag: str) -> None:
        if tag == "thead":
            self.in_head = False
        elif tag in ("td", "th") and self.cell is not None and self.rows:
            self.rows[-1].append((" ".join("".join(self.cell).split()), *self.spans))
            self.cell = None
        elif (
            tag == "tr"
            and self.rows
            and self.row_is_header
            and self.header_rows == len(self.rows) - 1
        ):
            self.header_rows += 1

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def html_table(text: str) -> ParsedTable:
    parser = _HtmlTable()
    parser.feed(text)
    return ParsedTable(parser.rows, parser.header_rows)


def pipe_table(lines: list[str]) -> ParsedTable:
    rows: list[list[CellT]] = []
    for line in lines:
        if SEPARATOR.match(line.strip()) and set(line.strip()) <= set("|:- "):
            continue
        inner = line.strip().removeprefix("|").removesuffix("|")
        cells = re.split(r"(?<!\\)\|", inner)
        rows.append([(" ".join(re.sub(r"<br\s*/?>", " ", c).split()), 1, 1) for c in cells])
    return ParsedTable(rows, 1 if rows else 0)


def _table_lines(lines: list[str], start: int) -> tuple[Block, int]:
    """The table starting at `start` and the line after it."""
    if lines[start].lstrip().startswith("<table"):
        end = start
        while end < len(lines) - 1 and "</table>" not in lines[end]:
            end += 1
        return Block("table", table=html_table("\n".join(lines[start : end + 1]))), end + 1
    end = start
    while end < len(lines) and lines[end].lstrip().startswith("|"):
        end += 1
    return Block("table", table=pipe_table(lines[start:end])), end


def blocks(markdown: str) -> list[Block]:
    lines = COMMENT.sub("", markdown).splitlines()
    out: list[Block] = []
    open_block: Block | None = None  # a paragraph or list item still taking lines
    indents: list[int] = []  # the enclosing list items' indents
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        index += 1
        if not stripped:
            open_block = None
            continue
        if stripped.startswith(("|", "<table")):
            block, index = _table_lines(lines, index - 1)
            out.append(block)
            open_block, indents = None, []
        elif heading := HEADING.match(stripped):
            out.append(Block("heading", heading[2].strip("# "), len(heading[1])))
            open_block, indents = None, []
        elif item := ITEM.match(line.expandtabs(4)):
            indent = len(item[1])
            while indents and indents[-1] > indent:
                indents.pop()
            if not indents or indents[-1] < indent:
                indents.append(indent)
            open_block = Block("item", item[3], len(indents), item[2])
            out.append(open_block)
        elif open_block is not None:
            open_block.text += " " + stripped
        else:
            open_block = Block("paragraph", stripped)
            out.append(open_block)
            indents = []
    return out
