"""PPTX → ReadingPackage with python-pptx: one Slide per slide with its text blocks (top to
bottom, left to right; bbox in points), tables, pictures (as assets), speaker notes and
reviewers' comments (legacy and modern comment parts)."""

from __future__ import annotations

import io
from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    AssetSink,
    ParseOptions,
    ProgressFn,
    corrupt,
    page_text,
    safe,
    table_text,
    too_large,
)
from parser_svc.parsers.office import check_zip, parse_xml
from parser_svc.parsers.pptx_structure import frame_blocks, slide_table

EMU_PER_PT = 12700
P_NS = "http://schemas.openxmlformats.org/presentationml/2006/main"
A_NS = "http://schemas.openxmlformats.org/drawingml/2006/main"


def parse_pptx(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    from pptx import Presentation

    check_zip(data, options, "presentation")
    try:
        deck = Presentation(io.BytesIO(data))
        slides = list(deck.slides)
    except Exception as err:
        raise corrupt(f"the presentation cannot be opened: {type(err).__name__}: {err}") from err
    total = len(slides)
    if total > options.max_pages:
        raise too_large(f"the presentation has {total} slides; the limit is {options.max_pages}")
    package = rp.ReadingPackage(content_type="pptx")
    props = deck.core_properties
    package.metadata.title = safe(props.title or "")
    package.metadata.author = safe(props.author or "")
    package.metadata.subject = safe(props.subject or "")
    width = (deck.slide_width or 0) / EMU_PER_PT
    height = (deck.slide_height or 0) / EMU_PER_PT
    assets = AssetSink(package, options)
    authors = _authors(deck)
    progress(0, total, "text")
    for number, slide in enumerate(slides, start=1):
        out = package.slides.add(number=number, width=width, height=height)
        out.hidden = slide._element.get("show") == "0"
        _slide(slide, out, assets)
        out.comments.extend(_comments(slide, authors))
        progress(number, total, "text")
    assets.finish()
    if total == 0:
        package.warnings.append("the presentation has no slides")
    elif not any(s.text or s.notes or s.images for s in package.slides):
        package.warnings.append("the presentation contains no text and no images")
    return package


def _bbox(shape: Any, dx: int = 0, dy: int = 0) -> rp.BoundingBox | None:
    if shape.left is None or shape.top is None or shape.width is None or shape.height is None:
        return None
    x0, y0 = (shape.left + dx) / EMU_PER_PT, (shape.top + dy) / EMU_PER_PT
    return rp.BoundingBox(
        x0=x0, y0=y0, x1=x0 + shape.width / EMU_PER_PT, y1=y0 + shape.height / EMU_PER_PT
    )


def _flatten(shapes: Any) -> list[Any]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    out = []
    for shape in shapes:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            out.extend(_flatten(shape.shapes))
        else:
            out.append(shape)
    return out


def _kind(shape: Any) -> str:
    """ "title", "subtitle", "body" (a placeholder whose paragraphs are bulleted by the master)
    or "" for a shape's text."""
    from pptx.enum.shapes import PP_PLACEHOLDER

    if not shape.is_placeholder:
        return ""
    try:
        kind = shape.placeholder_format.type
    except (ValueError, AttributeError):
        return ""
    if kind in (PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE, PP_PLACEHOLDER.VERTICAL_TITLE):
        return "title"
    if kind == PP_PLACEHOLDER.SUBTITLE:
        return "subtitle"
    if kind in (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT, PP_PLACEHOLDER.VERTICAL_BODY):
        return "body"
    return ""


def _layout_body(slide: Any, shape: Any) -> Any:
    """The text body of the layout placeholder `shape` inherits from, or None."""
    try:
        inherited = slide.slide_layout.placeholders.get(idx=shape.placeholder_format.idx)
    except (ValueError, AttributeError, KeyError):
        return None
    return None if inherited is None else inherited.element.find(f"{{{P_NS}}}txBody")


def _slide(slide: Any, out: rp.Slide, assets: AssetSink) -> None:
    shapes = _flatten(slide.shapes)
    shapes.sort(key=lambda s: ((s.top or 0) // (EMU_PER_PT * 10), s.left or 0))
    texts: list[str] = []
    for shape in shapes:
        bbox = _bbox(shape)
        if getattr(shape, "has_table", False) and shape.has_table:
            table = slide_table(shape.table, bbox)
            out.tables.append(table)
            text = table_text([list(row.cells) for row in table.rows]).strip()
            if text:
                texts.append(text)
                block = out.blocks.add(text=text, source="text", role="table")
                if bbox is not None:
                    block.bbox.CopyFrom(bbox)
            continue
        image = getattr(shape, "image", None) if shape.shape_type == 13 else None
        if image is not None:
            try:
                blob, mime = image.blob, image.content_type
                size = image.size
            except Exception:
                blob, mime, size = b"", "", (0, 0)
            asset_id = assets.add(blob, mime, int(size[0]), int(size[1]))
            if asset_id:
                ref = out.images.add(asset_id=asset_id, mime_type=mime)
                ref.width, ref.height = int(size[0]), int(size[1])
                if bbox is not None:
                    ref.bbox.CopyFrom(bbox)
        if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            kind = _kind(shape)
            layout = _layout_body(slide, shape) if kind == "body" else None
            for block in frame_blocks(shape.text_frame._txBody, kind, layout):
                if kind == "title" and not out.title:
                    out.title = block.text
                texts.append(block.text)
                if bbox is not None:
                    block.bbox.CopyFrom(bbox)
                out.blocks.append(block)
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        if frame is not None:
            out.notes = safe(frame.text.strip())
    out.text = page_text(texts)


def _authors(deck: Any) -> dict[str, str]:
    """Comment author ids → names (ppt/commentAuthors.xml and ppt/authors.xml)."""
    names: dict[str, str] = {}
    for part in deck.part.package.iter_parts():
        name = str(part.partname)
        if name in ("/ppt/commentAuthors.xml", "/ppt/authors.xml"):
            try:
                root = parse_xml(part.blob)
            except Exception:
                continue
            for author in root:
                key = author.get("id")
                if key is not None:
                    names[key] = author.get("name") or ""
    return names


def _comments(slide: Any, authors: dict[str, str]) -> list[rp.Comment]:
    comments = []
    for rel in slide.part.rels.values():
        if not rel.reltype.endswith("/comments") or rel.is_external:
            continue
        try:
            root = parse_xml(rel.target_part.blob)
        except Exception:
            continue
        for node in root:
            author = authors.get(node.get("authorId", ""), "")
            texts = [t.text or "" for t in node.iter(f"{{{P_NS}}}text", f"{{{A_NS}}}t")]
            text = safe(" ".join(t.strip() for t in texts if t.strip()))
            if text:
                comments.append(rp.Comment(author=safe(author), text=text))
    return comments
