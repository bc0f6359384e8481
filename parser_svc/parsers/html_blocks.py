"""The blocks of an HTML or XHTML body, from its markup (shared by HTML pages, EPUB chapters and
the HTML inside Markdown):

- h1-h6 (and role="heading" with aria-level): heading blocks with their level;
- ul / ol / menu: list items with their depth, marker and whether it counts (ol start, type,
  reversed and li value honoured; bullets •, ◦, ▪ by depth as browsers draw them);
- tables: `html_tables.build_table` (a one-row or one-column table that holds paragraphs or
  lists is page layout: its cells are read as content);
- pre: verbatim, role "code"; blockquote: role "quote" for its paragraphs;
- links as Markdown shows a link's target in text: "text (https://...)", for absolute links
  whose text is not the address itself; <br> a line break;
- images: data: URIs (and, through `ImageSource`, a container's files) as assets, else their alt
  text; figcaption a "caption" block and the figure's image caption;
- the page's own <nav> and <footer> (outside any article, main or section): page furniture,
  roles "header" and "footer" (renderings leave them out unless asked); footnotes and endnotes
  (epub:type or an ARIA doc-footnote / doc-endnote role): roles "footnote" and "endnote".
Dropped before reading: script, style, noscript, template, head and the like, and elements
hidden by the `hidden` attribute or an inline display:none / visibility:hidden. Nesting deeper
than MAX_DEPTH is read as plain text (no recursion past it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import AssetSink, TableBudget, safe, table_text
from parser_svc.parsers.html_images import ImageSource, image_ref
from parser_svc.parsers.html_tables import build_table, local, table_rows
from parser_svc.parsers.list_markers import format_number

MAX_DEPTH = 120
DROPPED = frozenset(
    {"script", "style", "noscript", "template", "head", "iframe", "object", "embed", "canvas"}
    | {"select", "datalist", "audio", "video", "map", "input", "textarea", "button", "math"}
    # ruby annotations (readings shown above the text), not the text itself
    | {"rt", "rp"}
)
HEADINGS = {f"h{n}": n for n in range(1, 7)}
LISTS = ("ul", "ol", "menu")
BLOCKS = frozenset(
    {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "address"}
    | {"figure", "details", "summary", "dl", "dt", "dd", "form", "fieldset", "legend", "hr"}
    | {"center", "hgroup", "body", "html", "li", "caption", "tr", "td", "th", "thead"}
    | {"tbody", "tfoot", "search", "dialog", "figcaption", "blockquote", "pre", "table"}
)
# The page's own navigation and footer (not an article's): page furniture, as running headers
# and footers are in paged documents.
FURNITURE = {"nav": "header", "footer": "footer"}
_SECTIONING = frozenset({"article", "main", "section", "aside", "blockquote", "li", "td", "th"})
_HIDDEN_STYLE = re.compile(r"(?:display\s*:\s*none|visibility\s*:\s*hidden)", re.I)
_SPACE = re.compile(r"[ \t\n\r\f]+")
_SHOWN_SCHEMES = ("http://", "https://", "ftp://", "mailto:")
BULLETS = ("•", "◦", "▪")
_OL_TYPES = {"a": "lowerLetter", "A": "upperLetter", "i": "lowerRoman", "I": "upperRoman"}
BR = "\x00"  # a line break among the pieces of a paragraph (no text holds a NUL)


@dataclass
class Kind:
    role: str = ""
    level: int = 0
    marker: str = ""
    ordered: bool = False


def hidden(element: Any) -> bool:
    if element.get("hidden") is not None:
        return True
    style = element.get("style")
    return bool(style and _HIDDEN_STYLE.search(style))


def strip_dropped(root: Any) -> None:
    """Removes what a reader never sees (DROPPED, hidden elements, comments), keeping the text
    that follows each (its tail)."""
    doomed = [
        el
        for el in root.iter()
        if not isinstance(el.tag, str) or local(el) in DROPPED or hidden(el)
    ]
    for element in doomed:
        parent = element.getparent()
        if parent is None:
            continue
        tail = element.tail or ""
        previous = element.getprevious()
        if tail and previous is not None:
            previous.tail = (previous.tail or "") + tail
        elif tail:
            parent.text = (parent.text or "") + tail
        parent.remove(element)


def _paragraph(pieces: list[str]) -> str:
    lines = "".join(pieces).split(BR)
    out = (_SPACE.sub(" ", line).strip() for line in lines)
    return "\n".join(line for line in out if line)


class HtmlBlocks:
    """Reads body elements into `page`: blocks, tables, images; `texts` for the page text."""

    def __init__(
        self,
        page: rp.Page,
        assets: AssetSink,
        budget: TableBudget,
        images: ImageSource | None = None,
    ) -> None:
        self.page = page
        self.assets = assets
        self.budget = budget
        self.images = images
        self.texts: list[str] = []
        self.pieces: list[str] = []
        self.pending: Kind | None = None
        self.quote = 0
        self.in_item = False
        self.in_cell = False
        self.cell_lines: list[str] = []
        # The role of what is inside page furniture or a note (`_furniture`).
        self.furniture = ""

    # --- output -------------------------------------------------------------------------

    def add(self, text: str, kind: Kind) -> None:
        text = safe(text)
        if not text.strip():
            return
        if self.in_cell:  # a line of the cell's text
            self.cell_lines.append(f"{kind.marker} {text}" if kind.marker else text)
            return
        if self.furniture and kind.role in ("", "quote", "heading", "list_item", "caption"):
            kind = Kind(self.furniture)
        self.texts.append(text)
        block = self.page.blocks.add(text=text, source="text", role=kind.role)
        block.level, block.marker, block.ordered = kind.level, kind.marker, kind.ordered

    def flush(self) -> None:
        text, self.pieces = _paragraph(self.pieces), []
        kind, self.pending = self.pending, None
        if kind is None:
            kind = Kind("quote" if self.quote else "")
        self.add(text, kind)

    def finish(self) -> None:
        self.flush()
        self.page.text = "\n\n".join(self.texts)

    # --- reading ------------------------------------------------------------------------

    def read(self, element: Any, depth: int = 0) -> None:
        """An element's content (its text and children, not its tail)."""
        if depth > MAX_DEPTH:
            self.pieces.append(" ".join(element.itertext()))
            return
        if element.text:
            self.pieces.append(element.text)
        for child in element:
            self.element(child, depth + 1)
            if child.tail:
                self.pieces.append(child.tail)

    def element(self, el: Any, depth: int) -> None:
        tag = local(el)
        heading = HEADINGS.get(tag) or _aria_heading(el)
        if heading:
            self.block(el, depth, Kind("heading", min(heading, 6)))
        elif tag in LISTS:
            self.flush()
            self.list(el, depth)
        elif tag == "table":
            self.flush()
            self.table(el, depth)
        elif tag == "pre":
            self.flush()
            text = "".join(el.itertext())
            text = text[1:] if text.startswith("\n") else text  # as browsers show a <pre>
            self.add(text.rstrip(), Kind("code"))
        elif tag == "blockquote":
            self.flush()
            self.quote += 1
            self.read(el, depth)
            self.flush()
            self.quote -= 1
        elif tag == "br" or (tag == "hr" and self.in_item):
            self.pieces.append(BR)
        elif tag == "hr":
            self.flush()
        elif tag in ("img", "image"):
            self.image(el)
        elif tag == "svg":
            for image in el.iter("{*}image"):
                self.image(image)
        elif tag == "a":
            self.link(el, depth)
        elif not self.furniture and (role := _furniture(el, tag)):
            self.flush()
            self.furniture = role
            self.read(el, depth)
            self.flush()
            self.furniture = ""
        elif tag == "figcaption":
            self.block(el, depth, Kind("caption"))
            self.caption_figure(el)
        elif tag in BLOCKS:
            self.block(el, depth, None)
        else:
            self.read(el, depth)

    def block(self, el: Any, depth: int, kind: Kind | None) -> None:
        """A block element: its own paragraph (inside a list item, a line of the item)."""
        if self.in_item and kind is None:
            self.pieces.append(BR)
            self.read(el, depth)
            self.pieces.append(BR)
            return
        self.flush()
        self.pending = kind
        self.read(el, depth)
        self.flush()

    def link(self, el: Any, depth: int) -> None:
        pieces = self.pieces
        start = len(pieces)
        self.read(el, depth)
        href = (el.get("href") or "").strip()
        # A link around blocks (a card's heading and text): their paragraphs are written.
        if self.pieces is not pieces or not href.lower().startswith(_SHOWN_SCHEMES):
            return
        text = _SPACE.sub(" ", "".join(pieces[start:]).replace(BR, " ")).strip()
        target = href[7:] if href.lower().startswith("mailto:") else href
        if text and text != target and text != href:
            self.pieces.append(f" ({href})")

    def list(self, el: Any, depth: int) -> None:
        ordered = local(el) == "ol"
        level = 1 + sum(1 for a in el.iterancestors() if local(a) in LISTS)
        items = [child for child in el if local(child) == "li"]
        reversed_ = ordered and el.get("reversed") is not None
        number = _int(el.get("start"), len(items) if reversed_ else 1)
        style = _OL_TYPES.get((el.get("type") or "").strip(), "decimal")
        for child in el:
            if local(child) == "li":
                number = _int(child.get("value"), number)
                bullet = BULLETS[min(level, 3) - 1]
                marker = format_number(number, style) + "." if ordered else bullet
                self.item(child, depth + 1, Kind("list_item", level, marker, ordered))
                number += -1 if reversed_ else 1
            else:
                self.element(child, depth + 1)
            if child.tail:
                self.pieces.append(child.tail)

    def item(self, el: Any, depth: int, kind: Kind) -> None:
        self.flush()
        self.pending = kind
        was, self.in_item = self.in_item, True
        self.read(el, depth)
        self.flush()
        self.in_item = was

    def table(self, el: Any, depth: int) -> None:
        if self.in_cell:
            self.pieces += [BR, BR.join(_nested_lines(el)), BR]
            return
        if _layout_table(el) or el.get("role") in ("presentation", "none"):
            self.read(el, depth)
            self.flush()
            return
        caption = next((c for c in el if local(c) == "caption"), None)
        caption_text = _paragraph([" ".join(caption.itertext())]) if caption is not None else ""
        table = build_table(el, lambda cell: self.cell_text(cell, depth), self.budget)
        table.caption = safe(caption_text)
        self.page.tables.append(table)
        self.add(caption_text, Kind("caption"))
        rows = [list(row.cells) for row in table.rows]
        if any(any(row) for row in rows):
            self.add(table_text(rows), Kind("table"))

    def cell_text(self, cell: Any, depth: int) -> str:
        """A cell's text; a table inside it as lines of cells joined by " | "."""
        saved = self.pieces, self.pending, self.in_item, self.in_cell, self.cell_lines
        self.pieces, self.pending, self.in_item, self.in_cell = [], None, True, True
        self.cell_lines = []
        self.read(cell, depth + 1)
        self.flush()
        text = "\n".join(self.cell_lines)
        self.pieces, self.pending, self.in_item, self.in_cell, self.cell_lines = saved
        return text

    def image(self, el: Any) -> None:
        ref = image_ref(el, self.assets, self.images)
        if ref is not None:
            self.page.images.append(ref)
            return
        alt = (el.get("alt") or "").strip()
        if alt:
            self.pieces.append(f" {alt} ")

    def caption_figure(self, caption: Any) -> None:
        figure = caption.getparent()
        if figure is None or local(figure) != "figure" or not self.page.images:
            return
        text = _paragraph([" ".join(caption.itertext())])
        if text and any(local(i) in ("img", "image") for i in figure.iter()):
            self.page.images[-1].caption = safe(text)


def _nested_lines(table: Any) -> list[str]:
    """A table inside a cell as lines: each row's cells joined by " | " (tables inside it read
    as their text)."""
    lines = []
    for tr, _section in table_rows(table):
        cells = [" ".join(c.itertext()) for c in tr if local(c) in ("td", "th")]
        lines.append(" | ".join(c for c in (_SPACE.sub(" ", c).strip() for c in cells) if c))
    return lines


def _layout_table(table: Any) -> bool:
    """A table used for page layout: one row or one column, holding paragraphs or lists."""
    rows = table_rows(table)
    if not rows:
        return True
    columns = max(sum(1 for c in tr if local(c) in ("td", "th")) for tr, _ in rows)
    if len(rows) > 1 and columns > 1:
        return False
    blocky = ("p", "div", "ul", "ol", "table", "h1", "h2", "h3", "h4", "h5", "h6", "pre")
    return any(local(el) in blocky for tr, _ in rows for el in tr.iter())


def _furniture(el: Any, tag: str) -> str:
    """The role of everything inside `el` when it is page furniture or a note: the page's own
    <nav> ("header") or <footer> ("footer"); a footnote or endnote (EPUB's epub:type, ARIA's
    doc-footnote / doc-endnote roles)."""
    kinds = f"{el.get('epub:type') or el.get('{http://www.idpf.org/2007/ops}type') or ''} "
    kinds += el.get("role") or ""
    if "footnote" in kinds:
        return "footnote"
    if "endnote" in kinds or "rearnote" in kinds:
        return "endnote"
    if tag in FURNITURE and not any(local(a) in _SECTIONING for a in el.iterancestors()):
        return FURNITURE[tag]
    return ""


def _aria_heading(el: Any) -> int:
    if el.get("role") != "heading":
        return 0
    return max(1, _int(el.get("aria-level"), 2))


def _int(text: str | None, default: int) -> int:
    try:
        return int((text or "").strip())
    except ValueError:
        return default
