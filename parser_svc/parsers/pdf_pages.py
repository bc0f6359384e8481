"""The pages of a PDF, one by one: each page's text blocks in reading order, its images stored as
assets once per document, its tables (pdf_table_structure.py), and the pages that need OCR read
beside the next ones (pdf_ocr.py). A `Reading` is what one process adds pages to (pdf.py
reads the document, pdf_split.py says how ranges read elsewhere are added).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    IMAGES_ALL,
    IMAGES_NONE,
    OCR_FORCE,
    OCR_OFF,
    AssetSink,
    ParseFailure,
    ParseOptions,
    ProgressFn,
    describe_error,
    is_out_of_memory,
    mime_for_ext,
    page_text,
    too_large,
)
from parser_svc.parsers.pdf_images import named_images
from parser_svc.parsers.pdf_ocr import OcrPages, PendingPage
from parser_svc.parsers.pdf_pass import page_box, text_and_rules
from parser_svc.parsers.pdf_resources import ResourceScans
from parser_svc.parsers.pdf_structure import Look, add_page_blocks
from parser_svc.parsers.pdf_table_structure import add_tables
from parser_svc.parsers.textlayer import (
    fonts_without_unicode,
    strip_replacements,
    unmapped_letters,
    visible_count,
)
from parser_svc.parsers.textlayer import judge_page as judge_text_layer

# Told of each page the moment this process adds it to a package, with the package and the
# document's page count: the parse child's draft parts (parser_svc/child/parse_child.py).
PageAdded = Callable[[rp.ReadingPackage, rp.Page, int], None]
page_added: PageAdded | None = None


class _State:
    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.failed_pages = 0
        self.image_pages = 0
        self.ocr_pages = 0
        # xref → (asset id or "", mime type): each image is stored once per document.
        self.extracted: dict[int, tuple[str, str]] = {}
        # Pages whose text layer was garbage (fonts without a Unicode map), read by OCR instead.
        self.garbage_pages: list[tuple[int, str]] = []  # (page number, why)
        self.font_unicode: dict[int, bool] = {}  # font xref -> has no Unicode map
        self.scans = ResourceScans()  # pages' font and image lists, by resources object
        # Image xref -> MD5 of its decoded pixels: each image is decoded once per document to
        # tell which xref a shown image is (pymupdf's get_image_info(xrefs=True) decodes every
        # image of the page's resources again on every page).
        self.image_digests: dict[int, bytes | None] = {}
        # Images whose extraction failed with a warning (pdf_split: a range read elsewhere).
        self.warned_xrefs: list[int] = []
        # Page number -> its text blocks' looks (pdf_structure.py), for pages read from their text.
        self.looks: dict[int, list[Look]] = {}


def _bbox(rect: Any) -> rp.BoundingBox:
    x0, y0, x1, y1 = rect
    return rp.BoundingBox(x0=x0, y0=y0, x1=x1, y1=y1)


def _usable_chars(text: str, visible: int) -> int:
    """Characters of `text` that are neither whitespace (`visible`: how many are not,
    textlayer.visible_count) nor U+FFFD."""
    return visible - text.count("\ufffd")


@dataclass
class Reading:
    """One process's reading of a document: what it adds pages, assets and warnings to."""

    doc: pymupdf.Document
    package: rp.ReadingPackage
    options: ParseOptions
    assets: AssetSink
    state: _State

    @classmethod
    def of(
        cls, doc: pymupdf.Document, package: rp.ReadingPackage, options: ParseOptions
    ) -> Reading:
        return cls(doc, package, options, AssetSink(package, options), _State())


def read_pages(reading: Reading, pages: range, progress: ProgressFn) -> None:
    """`pages`, in order. A page that needs OCR is read beside the next pages (pdf_ocr.py);
    pages are added to the package, and counted done, in page order."""
    doc, package, options, assets, state = (
        reading.doc, reading.package, reading.options, reading.assets, reading.state
    )  # fmt: skip
    total = doc.page_count
    ocr = OcrPages(options, len(pages))
    # Pages not yet added: each with its OCR in flight (or None) and why it needed OCR.
    waiting: deque[tuple[rp.Page, PendingPage | None, str]] = deque()

    def finish_first() -> None:
        out, pending, garbage = waiting.popleft()
        if pending is not None:
            try:
                out.text = page_text(ocr.finish(pending))
                out.ocr = True
                state.ocr_pages += 1
                if garbage:
                    state.garbage_pages.append((out.number, garbage))
            except Exception as err:
                _page_error(err, out.number - 1, state)
        package.pages.append(out)
        if page_added is not None:
            page_added(package, out, total)
        progress(len(package.pages), total, "text")

    def finish_ready() -> None:
        while waiting and waiting[0][1] is None:
            finish_first()

    try:
        for index in pages:
            out, needs_ocr, garbage = _page(doc, index, options, assets, state)
            pending = None
            if needs_ocr:
                while ocr.in_flight >= ocr.threads:
                    finish_first()
                    finish_ready()
                progress(len(package.pages), total, "ocr")
                try:
                    pending = ocr.start(doc[index], out)
                except Exception as err:
                    _page_error(err, index, state)
            waiting.append((out, pending, garbage))
            finish_ready()
        while waiting:
            finish_first()
    finally:
        ocr.close()


def _page(
    doc: pymupdf.Document,
    index: int,
    options: ParseOptions,
    assets: AssetSink,
    state: _State,
) -> tuple[rp.Page, bool, str]:
    """The page without its OCR; whether it needs OCR (its blocks are then left empty for the
    OCR's lines, and the caller reads it) and why its text layer is garbage, if it is."""
    try:
        page = doc.load_page(index)  # doc[index] checks the index a second time, ~5 us
        box = page_box(page)
        out = rp.Page(number=index + 1, width=box.width, height=box.height, rotation=box.rotation)
    except Exception as err:
        state.failed_pages += 1
        state.warnings.append(f"page {index + 1} cannot be read: {err}")
        return rp.Page(number=index + 1), False, ""
    try:
        # The page's rules and image count come from the run that reads its text.
        textpage, rules, drawn, image_page = text_and_rules(page, box.rotation)
        # Blocks in reading order, list items marked; their looks for the document's headings.
        # The text page is the unrotated page's: the page's own size when it is not rotated.
        size = None if box.rotation else (box.width, box.height)
        texts, looks = add_page_blocks(textpage, out, size)
        text = "".join(texts)
        counted = visible_count(text)  # in C; a per-character loop was not
        usable = _usable_chars(text, counted[0])
        # A page that draws no image has none to list or store (most pages: no image scan).
        images = _images(doc, page, out, assets, state, usable, image_page) if drawn != 0 else 0
        if images:
            state.image_pages += 1
        garbage = judge_text_layer(
            text,
            lambda: fonts_without_unicode(doc, state.scans.fonts(page), state.font_unicode),
            lambda: unmapped_letters(textpage),
            counted,
        )
        wanted = (images and usable < options.ocr_min_chars) or garbage
        if wanted or options.ocr_mode == OCR_FORCE:
            if options.ocr and options.ocr_mode != OCR_OFF:
                del out.blocks[:]
                return out, True, garbage
            elif wanted:
                why = "this job turned off (ocr_mode off)" if options.ocr else "is disabled"
                state.warnings.append(f"page {index + 1} needs OCR, which {why}")
        state.looks[index + 1] = looks
        if options.pdf_tables:
            add_tables(page, textpage, rules, out, state.warnings)
        if any("\ufffd" in t for t in texts):  # symbols without Unicode, or OCR is off
            texts = [strip_replacements(t) for t in texts]
            _strip_replacements(out)
        out.text = page_text(texts)
    except Exception as err:
        _page_error(err, index, state)
    return out, False, ""


def _strip_replacements(out: rp.Page) -> None:
    """No U+FFFD in the blocks and table cells of a page whose text layer is kept (no OCR)."""
    for block in out.blocks:
        block.text = strip_replacements(block.text)
    for table in out.tables:
        for row in table.rows:
            row.cells[:] = [strip_replacements(cell) for cell in row.cells]


def _page_error(err: Exception, index: int, state: _State) -> None:
    """A page that cannot be read is a warning; what fails the whole parse is raised."""
    if isinstance(err, ParseFailure | MemoryError):
        raise err
    state.failed_pages += 1
    if is_out_of_memory(err):
        raise too_large(
            f"page {index + 1} exceeded the parse's memory limit ({describe_error(err)})"
        ) from err
    state.warnings.append(f"page {index + 1} cannot be read: {describe_error(err)}")


def _images(
    doc: pymupdf.Document,
    page: pymupdf.Page,
    out: rp.Page,
    assets: AssetSink,
    state: _State,
    usable_chars: int,
    image_page: Any = None,
) -> int:
    """Adds the page's images (stored once per document) and returns how many it shows."""
    shown = 0
    listed = state.scans.images(page)  # pymupdf walks the page's resources each time
    if usable_chars and not listed:
        # No image resources (the quick check); a page without text may still draw inline
        # images, which only the full scan below sees.
        return 0
    mode = assets.options.images
    for info in named_images(doc, page, listed, image_page, state.image_digests):
        bbox = pymupdf.Rect(info["bbox"])
        if bbox.is_empty or bbox.width < 4 or bbox.height < 4:
            continue
        shown += 1
        xref = int(info.get("xref") or 0)
        if xref <= 0 or mode == IMAGES_NONE:
            continue  # inline (or images none): shown (OCR'd if need be), not listed
        if xref not in state.extracted:
            state.extracted[xref] = ("", "")
            if mode == IMAGES_ALL or _cheap(doc, xref):
                _extract(doc, xref, assets, state)
        asset_id, mime = state.extracted[xref]
        if asset_id or mode != IMAGES_ALL:  # referenced: listed, stored only when free
            out.images.append(
                rp.ImageRef(
                    asset_id=asset_id,
                    bbox=_bbox(bbox),
                    mime_type=mime,
                    width=int(info.get("width") or 0),
                    height=int(info.get("height") or 0),
                )
            )
    return shown


# Images "referenced": an image that is not a JPEG is still stored when it has at most this
# many pixels (256 x 256: logos, icons, small figures); its PNG costs up to ~12 ms, against
# ~150 ms per megapixel for larger ones (bench/README.md, "Images on request").
SMALL_IMAGE_PIXELS = 256 * 256


def _cheap(doc: pymupdf.Document, xref: int) -> bool:
    """Whether storing the image costs next to nothing: its stream is a JPEG (one DCTDecode
    filter: extract_image hands it out unchanged, not decoded, and browsers show it), or it is
    small (SMALL_IMAGE_PIXELS) by the size its dictionary declares."""
    try:
        if tuple(doc.xref_get_key(xref, "Filter")) == ("name", "/DCTDecode"):
            return True
        width, height = (doc.xref_get_key(xref, key) for key in ("Width", "Height"))
        if width[0] != "int" or height[0] != "int":
            return False
        return int(width[1]) * int(height[1]) <= SMALL_IMAGE_PIXELS
    except Exception:
        return False


def _extract(doc: pymupdf.Document, xref: int, assets: AssetSink, state: _State) -> None:
    """Stores the image `xref` as an asset (state.extracted names it), or warns."""
    try:
        image = doc.extract_image(xref)
    except Exception as err:
        state.warnings.append(f"image {xref} cannot be extracted: {err}")
        state.warned_xrefs.append(xref)
        image = None
    if image and image.get("image"):
        mime = mime_for_ext(str(image.get("ext", "")))
        asset_id = assets.add(
            image["image"],
            mime,
            int(image.get("width") or 0),
            int(image.get("height") or 0),
        )
        state.extracted[xref] = (asset_id, mime)
