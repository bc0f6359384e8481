"""ODT (OpenDocument text) → ReadingPackage: one Page (the first master page's size) whose
blocks follow the body: paragraphs, headings (text:h, level = text:outline-level capped at 6;
a paragraph in the "Title" style is the title), list items (text:list nesting = level, the
marker from the list style's level: numbers counted per list style with text:start-value,
text:display-levels, prefix and suffix honoured; bullets as their character), tables (see
odf_tables), text boxes; then footnotes and endnotes (text:note) and comments
(office:annotation). The master pages' headers and footers come first and last (roles "header"
and "footer"). Images in frames are assets."""

from __future__ import annotations

from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    AssetSink,
    ParseOptions,
    ProgressFn,
    TableBudget,
    corrupt,
    page_text,
    safe,
    table_text,
)
from parser_svc.parsers.list_markers import bullet_marker, format_number
from parser_svc.parsers.odf_common import (
    OdfPackage,
    Styles,
    attr,
    count,
    fill_metadata,
    image_ref,
    inline_text,
    open_odf,
    page_size,
    q,
)
from parser_svc.parsers.odf_tables import read_table

MAX_LEVELS = 10
_NUM_FORMATS = {
    "1": "decimal",
    "a": "lowerLetter",
    "A": "upperLetter",
    "i": "lowerRoman",
    "I": "upperRoman",
}
_P, _H, _LIST, _TABLE, _FRAME = (
    q(n) for n in ("text:p", "text:h", "text:list", "table:table", "draw:frame")
)
_ITEM, _LIST_HEADER = q("text:list-item"), q("text:list-header")
_NOTE, _ANNOTATION = q("text:note"), q("office:annotation")
_INLINE_OBJECTS = (_NOTE, _ANNOTATION, _FRAME)
# Containers whose content is not body text (declarations, forms, index templates).
_SKIP = frozenset(
    q(n)
    for n in (
        "text:sequence-decls",
        "text:variable-decls",
        "text:user-field-decls",
        "text:dde-connection-decls",
        "office:forms",
        "text:tracked-changes",
        "table:named-expressions",
        "text:table-of-content-source",
        "text:alphabetical-index-source",
        "text:illustration-index-source",
        "text:table-index-source",
        "text:object-index-source",
        "text:user-index-source",
        "text:bibliography-source",
        "office:annotation",
    )
)


def parse_odt(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    odf = open_odf(data, options, "odt", "text document")
    progress(0, 1, "text")
    content = odf.xml("content.xml")
    styles_root = odf.xml("styles.xml")
    body = content.find(f"{q('office:body')}/{q('office:text')}")
    if body is None:
        raise corrupt("the OpenDocument text document has no office:text body")
    package = rp.ReadingPackage(content_type="odt", decrypted=odf.decrypted)
    fill_metadata(odf.xml("meta.xml"), package)
    styles = Styles()
    styles.load(styles_root)
    styles.load(content)
    page = rp.Page(number=1)
    page.width, page.height = page_size(styles_root)
    assets = AssetSink(package, options)
    reader = TextReader(odf, styles, page, assets, TableBudget(options.max_cells))
    for text in _furniture(styles_root, "header"):
        reader.add(rp.TextBlock(text=text, role="header"))
    reader.walk(body)
    for block in reader.notes + reader.comments:
        reader.add(block)
    for text in _furniture(styles_root, "footer"):
        reader.add(rp.TextBlock(text=text, role="footer"))
    assets.finish()
    page.text = page_text(reader.texts)
    package.pages.append(page)
    if not page.text and not package.assets:
        package.warnings.append("the document contains no text and no images")
    progress(1, 1, "text")
    return package


class TextReader:
    """The blocks of a body of OpenDocument text (a document, a slide's text box) onto `page`."""

    def __init__(
        self, odf: OdfPackage, styles: Styles, page: rp.Page, assets: AssetSink, budget: TableBudget
    ) -> None:
        self.odf, self.styles, self.page, self.assets = odf, styles, page, assets
        self.budget = budget
        self.texts: list[str] = []
        self.notes: list[rp.TextBlock] = []
        self.comments: list[rp.TextBlock] = []
        # Running list counters per list style (text:list-style name), one per level.
        self.counters: dict[str, list[int]] = {}

    def add(self, block: rp.TextBlock) -> None:
        block.text = safe(block.text.strip())
        if block.text:
            block.source = "text"
            self.texts.append(block.text)
            self.page.blocks.append(block)

    def walk(self, node: Any) -> None:
        for child in node:
            tag = child.tag
            if tag in (_P, _H):
                self.paragraph(child)
            elif tag == _LIST:
                self.read_list(child, 1, "")
            elif tag == _TABLE:
                self.table(child)
            elif tag == _FRAME:
                self.frame(child)
            elif isinstance(tag, str) and tag not in _SKIP:
                self.walk(child)

    def paragraph(self, p: Any, block: rp.TextBlock | None = None) -> None:
        block = block if block is not None else rp.TextBlock()
        block.text = inline_text(p)
        if p.tag == _H:
            block.role = "heading"
            block.level = min(max(count(attr(p, "text:outline-level")), 1), 6)
        elif not block.role:
            names = self.styles.names("paragraph", attr(p, "text:style-name"))
            if "title" in names:
                block.role, block.level = "title", 1
            elif "caption" in names:
                block.role = "caption"
        self.add(block)
        self.inline_objects(p)

    def inline_objects(self, p: Any) -> None:
        """Notes, comments and frames inside a paragraph (not those nested in one another)."""
        for node in p.iter(*_INLINE_OBJECTS):
            if any(True for _ in node.iterancestors(*_INLINE_OBJECTS)):
                continue
            if node.tag == _NOTE:
                role = "endnote" if attr(node, "text:note-class") == "endnote" else "footnote"
                body = node.find(q("text:note-body"))
                text = _paragraphs(body) if body is not None else ""
                self.notes.append(rp.TextBlock(text=text, role=role))
            elif node.tag == _ANNOTATION:
                creator = node.find(q("dc:creator"))
                author = safe((creator.text or "").strip()) if creator is not None else ""
                text = _paragraphs(node)
                if text:
                    text = f"{author}: {text}" if author else text
                    self.comments.append(rp.TextBlock(text=text, role="comment"))
            else:
                self.frame(node)

    def frame(self, frame: Any) -> None:
        ref = image_ref(frame, self.odf, self.assets)
        if ref is not None:
            self.page.images.append(ref)
        for box in frame.findall(q("draw:text-box")):
            self.add(rp.TextBlock(text=_paragraphs(box), role="textbox"))

    def table(self, node: Any) -> None:
        table = read_table(node, self.budget)
        self.page.tables.append(table)
        rows = [list(row.cells) for row in table.rows]
        if any(any(row) for row in rows):
            self.add(rp.TextBlock(text=table_text(rows), role="table"))
        for frame in node.iter(_FRAME):
            ref = image_ref(frame, self.odf, self.assets)
            if ref is not None:
                self.page.images.append(ref)

    def read_list(
        self, node: Any, level: int, style: str, counters: list[int] | None = None
    ) -> None:
        """A text:list at nesting `level`. A nested list counts on with the counters of the
        list it is in (its own style, if it names one, only formats its level)."""
        style = attr(node, "text:style-name") or style
        if not style:  # the list style of the first paragraph's paragraph style
            first = node.find(f".//{_P}")
            if first is not None:
                style = self.styles.list_style("paragraph", attr(first, "text:style-name"))
        if counters is None:
            counters = self.counters.setdefault(style, [0] * MAX_LEVELS)
            continues = attr(node, "text:continue-numbering") == "true" or attr(
                node, "text:continue-list"
            )
            if not continues:
                counters[:] = [0] * MAX_LEVELS
        for item in node:
            if item.tag in (_ITEM, _LIST_HEADER):
                self.item(item, level, style, counters)

    def item(self, item: Any, level: int, style: str, counters: list[int]) -> None:
        depth = min(level, MAX_LEVELS) - 1
        block: rp.TextBlock | None = None
        if item.tag == _ITEM:
            spec = self._level_style(style, level)
            start = count(attr(item, "text:start-value"), 0)
            first = count(attr(spec, "text:start-value"), 1) if spec is not None else 1
            counters[depth] = start or (counters[depth] + 1 if counters[depth] else first)
            counters[depth + 1 :] = [0] * (MAX_LEVELS - depth - 1)
            block = rp.TextBlock(role="list_item", level=level)
            block.marker, block.ordered = self._marker(style, level, counters)
        waiting: list[Any] = []  # the item's paragraphs: one block, its lines
        for child in item:
            if child.tag == _P or (child.tag == _H and block is None):
                waiting.append(child)
                continue
            block = self._item_block(waiting, block)
            if child.tag == _H:
                self.paragraph(child)
            elif child.tag == _LIST:
                self.read_list(child, level + 1, style, counters)
            elif child.tag == _TABLE:
                self.table(child)
        self._item_block(waiting, block)

    def _item_block(self, waiting: list[Any], block: rp.TextBlock | None) -> rp.TextBlock | None:
        """Adds the waiting paragraphs as the item's block (plain text after the first)."""
        if not waiting:
            return block
        lines = (inline_text(p).strip() for p in waiting)
        out = block if block is not None else rp.TextBlock()
        out.text = "\n".join(line for line in lines if line)
        self.add(out)
        for p in waiting:
            self.inline_objects(p)
        waiting.clear()
        return None

    def _level_style(self, style: str, level: int) -> Any:
        node = self.styles.lists.get(style)
        if node is None:
            return None
        for spec in node:
            if count(attr(spec, "text:level"), 0) == level:
                return spec
        return None

    def _marker(self, style: str, level: int, counters: list[int]) -> tuple[str, bool]:
        spec = self._level_style(style, level)
        if spec is None or spec.tag == q("text:list-level-style-image"):
            return bullet_marker(""), False
        if spec.tag == q("text:list-level-style-bullet"):
            return bullet_marker(attr(spec, "text:bullet-char")), False
        fmt = attr(spec, "style:num-format")
        if fmt not in _NUM_FORMATS:
            return safe(attr(spec, "style:num-prefix") + attr(spec, "style:num-suffix")), False
        shown = min(max(count(attr(spec, "text:display-levels")), 1), level)
        numbers = []
        for lvl in range(level - shown + 1, level + 1):
            outer = self._level_style(style, lvl)
            kind = _NUM_FORMATS.get(attr(outer, "style:num-format") if outer is not None else "1")
            numbers.append(format_number(max(counters[lvl - 1], 1), kind or "decimal"))
        prefix, suffix = attr(spec, "style:num-prefix"), attr(spec, "style:num-suffix")
        return safe(prefix + ".".join(numbers) + suffix), True


def _paragraphs(node: Any) -> str:
    """The paragraphs under `node` (a note body, a comment, a text box) on lines."""
    lines = (inline_text(p).strip() for p in node.iter(_P, _H))
    return "\n".join(line for line in lines if line)


def _furniture(styles_root: Any, kind: str) -> list[str]:
    """The distinct texts of the master pages' headers or footers (`kind`), first, left and
    right pages alike; those a master page does not display left out."""
    texts: list[str] = []
    if styles_root is None:
        return texts
    for master in styles_root.iter(q("style:master-page")):
        for tag in (kind, f"{kind}-first", f"{kind}-left"):
            node = master.find(q(f"style:{tag}"))
            if node is None or attr(node, "style:display") == "false":
                continue
            text = _paragraphs(node)
            if text and text not in texts:
                texts.append(text)
    return texts
