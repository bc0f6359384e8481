"""ODP (OpenDocument presentation) → ReadingPackage: one Slide per draw:page (the master page's
size; hidden when its drawing-page style says presentation:visibility="hidden") with its
shapes in reading order (top to bottom, left to right; bbox in points): the title frame
(presentation:class "title": role "title", also Slide.title; "subtitle": a level-2 heading),
text boxes and shapes read like ODT text (lists with their level and marker), tables (see
odf_tables), images as assets; the speaker notes (presentation:notes) and comments."""

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
    too_large,
)
from parser_svc.parsers.odf_common import (
    OdfPackage,
    Styles,
    attr,
    fill_metadata,
    frame_bbox,
    image_ref,
    open_odf,
    page_size,
    q,
)
from parser_svc.parsers.odf_tables import read_table
from parser_svc.parsers.odf_text import TextReader

_PAGE, _FRAME, _GROUP = q("draw:page"), q("draw:frame"), q("draw:g")
_NOTES, _TABLE, _TEXT_BOX = q("presentation:notes"), q("table:table"), q("draw:text-box")
_CLASS = q("presentation:class")
# Shapes that hold text directly (text:p / text:list children).
_SHAPES = frozenset(
    q(n)
    for n in (
        "draw:custom-shape",
        "draw:rect",
        "draw:ellipse",
        "draw:polygon",
        "draw:path",
        "draw:circle",
        "draw:regular-polygon",
        "draw:caption",
        "draw:connector",
        "draw:line",
    )
)
_Y_BAND = 10.0  # points: shapes whose tops are this close read left to right


def parse_odp(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    odf = open_odf(data, options, "odp", "presentation")
    content = odf.xml("content.xml")
    styles_root = odf.xml("styles.xml")
    body = content.find(f"{q('office:body')}/{q('office:presentation')}")
    if body is None:
        raise corrupt("the OpenDocument presentation has no office:presentation body")
    pages = body.findall(_PAGE)
    total = len(pages)
    if total > options.max_pages:
        raise too_large(f"the presentation has {total} slides; the limit is {options.max_pages}")
    package = rp.ReadingPackage(content_type="odp", decrypted=odf.decrypted)
    fill_metadata(odf.xml("meta.xml"), package)
    styles = Styles()
    styles.load(styles_root)
    styles.load(content)
    width, height = page_size(styles_root)
    assets = AssetSink(package, options)
    budget = TableBudget(options.max_cells)
    progress(0, total, "text")
    for number, node in enumerate(pages, start=1):
        slide = package.slides.add(number=number, width=width, height=height)
        slide.hidden = _hidden(styles, node)
        _Slide(odf, styles, assets, budget, slide).read(node)
        progress(number, total, "text")
    assets.finish()
    if total == 0:
        package.warnings.append("the presentation has no slides")
    elif not any(s.text or s.notes or s.images for s in package.slides):
        package.warnings.append("the presentation contains no text and no images")
    return package


def _hidden(styles: Styles, page: Any) -> bool:
    if attr(page, "presentation:visibility") == "hidden":
        return True
    for node in styles.chain("drawing-page", attr(page, "draw:style-name")):
        props = node.find(q("style:drawing-page-properties"))
        if props is not None and attr(props, "presentation:visibility") == "hidden":
            return True
    return False


def _flatten(node: Any) -> list[Any]:
    """The page's shapes, groups opened (their shapes in document order)."""
    out: list[Any] = []
    for child in node:
        if child.tag == _GROUP:
            out.extend(_flatten(child))
        elif child.tag == _FRAME or child.tag in _SHAPES:
            out.append(child)
    return out


def _order(shape: Any) -> tuple[float, float]:
    box = frame_bbox(shape)
    if box is None:
        return 0.0, 0.0
    return box.y0 // _Y_BAND, box.x0


class _Slide:
    def __init__(
        self,
        odf: OdfPackage,
        styles: Styles,
        assets: AssetSink,
        budget: TableBudget,
        slide: rp.Slide,
    ) -> None:
        self.odf, self.styles, self.assets, self.budget = odf, styles, assets, budget
        self.slide = slide
        self.texts: list[str] = []

    def read(self, page: Any) -> None:
        shapes = sorted(_flatten(page), key=_order)
        for shape in shapes:
            self.shape(shape)
        notes = page.find(_NOTES)
        if notes is not None:
            self.slide.notes = self.notes(notes)
        for child in page:
            if isinstance(child.tag, str) and child.tag.endswith("}annotation"):
                self.comment(child)
        self.slide.text = page_text(self.texts)

    def shape(self, shape: Any) -> None:
        bbox = frame_bbox(shape)
        kind = attr(shape, "presentation:class")
        table = shape.find(_TABLE)
        if table is not None:
            self.table(table, bbox)
            return
        ref = image_ref(shape, self.odf, self.assets) if shape.tag == _FRAME else None
        if ref is not None:
            if bbox is not None:
                ref.bbox.CopyFrom(bbox)
            self.slide.images.append(ref)
        boxes = shape.findall(_TEXT_BOX) if shape.tag == _FRAME else [shape]
        for box in boxes:
            self.text(box, kind, bbox)

    def text(self, box: Any, kind: str, bbox: rp.BoundingBox | None) -> None:
        scratch = rp.Page()
        TextReader(self.odf, self.styles, scratch, self.assets, self.budget).walk(box)
        blocks = list(scratch.blocks)
        if kind in ("title", "subtitle") and blocks:
            text = "\n".join(b.text for b in blocks)
            role, level = ("title", 1) if kind == "title" else ("heading", 2)
            blocks = [rp.TextBlock(text=text, source="text", role=role, level=level)]
            if kind == "title" and not self.slide.title:
                self.slide.title = text
        for block in blocks:
            if bbox is not None:
                block.bbox.CopyFrom(bbox)
            self.texts.append(block.text)
            self.slide.blocks.append(block)
        self.slide.tables.extend(scratch.tables)
        self.slide.images.extend(scratch.images)

    def table(self, node: Any, bbox: rp.BoundingBox | None) -> None:
        table = read_table(node, self.budget)
        if bbox is not None:
            table.bbox.CopyFrom(bbox)
        self.slide.tables.append(table)
        text = table_text([list(row.cells) for row in table.rows]).strip()
        if text:
            self.texts.append(text)
            block = self.slide.blocks.add(text=text, source="text", role="table")
            if bbox is not None:
                block.bbox.CopyFrom(bbox)

    def notes(self, notes: Any) -> str:
        parts: list[str] = []
        for frame in notes.iter(_FRAME):
            if attr(frame, "presentation:class") != "notes":
                continue
            scratch = rp.Page()
            TextReader(self.odf, self.styles, scratch, self.assets, self.budget).walk(frame)
            parts.extend(b.text for b in scratch.blocks)
        return safe("\n".join(p for p in parts if p).strip())

    def comment(self, node: Any) -> None:
        creator = node.find(q("dc:creator"))
        author = safe((creator.text or "").strip()) if creator is not None else ""
        scratch = rp.Page()
        TextReader(self.odf, self.styles, scratch, self.assets, self.budget).walk(node)
        text = "\n".join(b.text for b in scratch.blocks)
        if text:
            self.slide.comments.append(rp.Comment(author=author, text=text))
