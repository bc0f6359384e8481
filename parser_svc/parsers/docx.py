"""DOCX → ReadingPackage with python-docx.

A Word document has no fixed pages: the package has one Page (number 1, the first section's
page size) whose blocks are, in order: headers, the body (paragraphs and tables interleaved as
in the document, text boxes after the paragraph that anchors them), footnotes, endnotes,
comments, footers. Each block's `role` says which. Images are stored as assets.
"""

from __future__ import annotations

import io
from typing import Any

from lxml import etree  # type: ignore[import-untyped]

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    AssetSink,
    ParseOptions,
    ProgressFn,
    corrupt,
    is_out_of_memory,
    make_table,
    page_text,
    safe,
    table_text,
)
from parser_svc.parsers.docx_structure import Kind, WordStructure, table_layout
from parser_svc.parsers.office import check_zip, parse_xml

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MC_NS = "http://schemas.openxmlformats.org/markup-compatibility/2006"
A_NS = "http://schemas.openxmlformats.org/drawingml/2006/main"
R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
NS = {"w": W_NS, "mc": MC_NS, "a": A_NS, "r": R_NS}
TEXT_BOXES = etree.XPath(".//w:txbxContent[not(ancestor::mc:Fallback)]", namespaces=NS)
BLIPS = etree.XPath(".//a:blip/@r:embed", namespaces=NS)
NOTE_PARTS = (
    ("/word/footnotes.xml", "footnote", "w:footnote"),
    ("/word/endnotes.xml", "endnote", "w:endnote"),
)


def parse_docx(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    import docx

    check_zip(data, options, "Word document")
    progress(0, 1, "text")
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as err:
        if is_out_of_memory(err):  # the child reports it as DOCUMENT_TOO_LARGE
            raise
        raise corrupt(f"the Word document cannot be opened: {type(err).__name__}: {err}") from err
    package = rp.ReadingPackage(content_type="docx")
    _metadata(document, package)
    page = rp.Page(number=1)
    if document.sections:
        first = document.sections[0]
        page.width = float(first.page_width.pt) if first.page_width else 0.0
        page.height = float(first.page_height.pt) if first.page_height else 0.0
    assets = AssetSink(package, options)
    reader = _Reader(document, page, assets)
    reader.headers_footers("header")
    for item in document.iter_inner_content():
        reader.block(item)
    reader.notes()
    reader.comments()
    reader.headers_footers("footer")
    assets.finish()
    page.text = page_text(reader.texts)
    package.pages.append(page)
    if not page.text and not package.assets:
        package.warnings.append(
            "the document contains no text and no images"
            + (f" ({len(page.tables)} empty tables)" if page.tables else "")
        )
    progress(1, 1, "text")
    return package


def _metadata(document: Any, package: rp.ReadingPackage) -> None:
    props = document.core_properties
    package.metadata.title = safe(props.title or "")
    package.metadata.author = safe(props.author or "")
    package.metadata.subject = safe(props.subject or "")
    for key in ("keywords", "category", "comments", "last_modified_by"):
        value = getattr(props, key, None)
        if value:
            package.metadata.extra[key] = safe(str(value))
    for key in ("created", "modified"):
        value = getattr(props, key, None)
        if value:
            package.metadata.extra[key] = value.isoformat()


def _xml_text(element: Any) -> str:
    """Text of a WordprocessingML subtree: paragraphs on lines, tabs and breaks kept."""
    lines = []
    for paragraph in element.iter(f"{{{W_NS}}}p"):
        parts = []
        for node in paragraph.iter(f"{{{W_NS}}}t", f"{{{W_NS}}}tab", f"{{{W_NS}}}br"):
            if node.tag == f"{{{W_NS}}}t":
                parts.append(node.text or "")
            elif node.tag == f"{{{W_NS}}}tab":
                parts.append("\t")
            else:
                parts.append("\n")
        line = "".join(parts).strip()
        if line:
            lines.append(line)
    return "\n".join(lines)


class _Reader:
    def __init__(self, document: Any, page: rp.Page, assets: AssetSink) -> None:
        self.document = document
        self.page = page
        self.assets = assets
        self.texts: list[str] = []
        numbering = self._part("/word/numbering.xml")
        self.structure = WordStructure(
            document.styles.element,
            None if numbering is None else getattr(numbering, "element", None),
        )
        # The body item just read (a table or an image), for a caption below it; a caption
        # read just before, for the table that follows it.
        self.previous: rp.Table | rp.ImageRef | None = None
        self.pending_caption = ""

    def add(self, text: str, role: str = "", kind: Kind | None = None) -> bool:
        text = safe(text.strip())
        if not text:
            return False
        self.texts.append(text)
        block = rp.TextBlock(text=text, source="text", role=role)
        if kind is not None:
            block.level, block.marker, block.ordered = kind.level, kind.marker, kind.ordered
        self.page.blocks.append(block)
        return True

    def block(self, item: Any) -> None:
        from docx.table import Table

        if isinstance(item, Table):
            self.table(item)
        else:
            self.paragraph(item)

    def paragraph(self, paragraph: Any) -> None:
        kind = self.structure.paragraph(paragraph._p)
        text = safe(paragraph.text.strip())
        images = len(self.page.images)
        self.images(paragraph._p, self.document.part)
        if len(self.page.images) > images:  # a figure: its caption may have come just before
            self.previous = self.page.images[-1]
            self.previous.caption, self.pending_caption = self.pending_caption, ""
        elif kind.role == "caption" and text:  # below the table or figure just read, or above
            if self.previous is not None and not self.previous.caption:
                self.previous.caption = text
            else:
                self.pending_caption = text
            self.previous = None
        elif text:
            self.previous, self.pending_caption = None, ""
        self.add(text, kind.role, kind)
        # Text boxes: w:txbxContent, once (not again in the VML fallback of mc:AlternateContent).
        for box in TEXT_BOXES(paragraph._p):
            self.add(_xml_text(box), "textbox")

    def table(self, table: Any) -> None:
        self.previous = None
        rows: list[list[str]] = []
        for row in table.rows:
            try:
                cells = [safe(cell.text.strip()) for cell in row.cells]
            except (IndexError, ValueError):  # malformed spans
                cells = [safe(_xml_text(tc)) for tc in row._tr.tc_lst]
            rows.append(cells)
        if not rows:
            return
        spans, header_rows, before = table_layout(table._tbl)
        # A full grid: the columns a row skips (w:gridBefore) as empty cells.
        before.extend([0] * (len(rows) - len(before)))
        rows = [[""] * skip + cells for cells, skip in zip(rows, before, strict=False)]
        # Kept even when every cell is empty: the structure is content too.
        out = make_table(rows)
        out.header_rows = header_rows
        for row_out, row_spans in zip(out.rows, spans, strict=False):
            row_out.spans.extend(row_spans)
        out.caption, self.pending_caption = self.pending_caption, ""
        self.page.tables.append(out)
        if any(any(row) for row in rows):
            self.add(table_text(rows), "table")
        self.images(table._tbl, self.document.part)
        self.previous = self.page.tables[-1]

    def images(self, element: Any, part: Any) -> None:
        for rid in BLIPS(element):
            try:
                image_part = part.related_parts[rid]
                blob = image_part.blob
                mime = image_part.content_type
            except (KeyError, AttributeError):
                continue
            asset_id = self.assets.add(blob, mime)
            if asset_id:
                self.page.images.append(rp.ImageRef(asset_id=asset_id, mime_type=mime))

    def headers_footers(self, kind: str) -> None:
        seen: set[str] = set()
        for section in self.document.sections:
            for attr in (kind, f"first_page_{kind}", f"even_page_{kind}"):
                try:
                    part = getattr(section, attr)
                    if part.is_linked_to_previous:
                        continue
                    text = _xml_text(part._element)
                except Exception:
                    continue
                if text and text not in seen:
                    seen.add(text)
                    self.add(text, kind)

    def _part(self, name: str) -> Any:
        for part in self.document.part.package.iter_parts():
            if str(part.partname) == name:
                return part
        return None

    def notes(self) -> None:
        for name, role, tag in NOTE_PARTS:
            part = self._part(name)
            if part is None:
                continue
            root = parse_xml(part.blob)
            for note in root.findall(tag, {"w": W_NS}):
                if note.get(f"{{{W_NS}}}type") in ("separator", "continuationSeparator"):
                    continue
                self.add(_xml_text(note), role)

    def comments(self) -> None:
        part = self._part("/word/comments.xml")
        if part is None:
            return
        root = parse_xml(part.blob)
        for comment in root.findall("w:comment", {"w": W_NS}):
            author = comment.get(f"{{{W_NS}}}author") or ""
            text = _xml_text(comment)
            if text:
                self.add(f"{author}: {text}" if author else text, "comment")
