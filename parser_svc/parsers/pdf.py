"""PDF with a text layer → ReadingPackage, page by page with pymupdf."""

from __future__ import annotations

import pymupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseFailure, ProgressFn

TEXT_BLOCK = 0


def parse_pdf(data: bytes, progress: ProgressFn) -> rp.ReadingPackage:
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as err:
        raise ParseFailure("CORRUPT_DOCUMENT", f"the PDF cannot be opened: {err}") from err
    with doc:
        if doc.needs_pass:
            raise ParseFailure("PASSWORD_REQUIRED", "the PDF is encrypted and needs a password")
        try:
            total = doc.page_count
        except Exception as err:
            raise ParseFailure("CORRUPT_DOCUMENT", f"page count unreadable: {err}") from err
        if total == 0:
            raise ParseFailure("CORRUPT_DOCUMENT", "the PDF has no pages")
        package = rp.ReadingPackage(content_type="pdf")
        meta = doc.metadata or {}
        package.metadata.CopyFrom(
            rp.DocumentMetadata(
                title=meta.get("title") or "",
                author=meta.get("author") or "",
                subject=meta.get("subject") or "",
                creator=meta.get("creator") or "",
                producer=meta.get("producer") or "",
            )
        )
        progress(0, total, "text")
        for index in range(total):
            package.pages.append(_page(doc, index))
            progress(index + 1, total, "text")
        warnings = pymupdf.TOOLS.mupdf_warnings()
        if warnings:
            package.warnings.append(f"the PDF needed repair: {warnings.splitlines()[0]}")
        return package


def _page(doc: pymupdf.Document, index: int) -> rp.Page:
    page = doc[index]
    rect = page.rect
    out = rp.Page(number=index + 1, width=rect.width, height=rect.height, rotation=page.rotation)
    texts = []
    for x0, y0, x1, y1, text, _no, kind in page.get_text("blocks", sort=True):
        if kind != TEXT_BLOCK or not text.strip():
            continue
        clean = text.strip()
        texts.append(clean)
        out.blocks.append(
            rp.TextBlock(text=clean, bbox=rp.BoundingBox(x0=x0, y0=y0, x1=x1, y1=y1), source="text")
        )
    out.text = "\n\n".join(texts)
    return out
