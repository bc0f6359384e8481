"""Image documents (PNG, JPEG, TIFF, GIF, BMP, WebP) -> ReadingPackage: one Page per page.

A TIFF's pages are the package's pages (a fax, a multi-page scan); reduced-resolution copies
(thumbnails) are left out. An animated GIF, WebP or PNG is one page, its first frame: the frame
mail clients and viewers that do not animate show, where senders put the message; a 300-frame
animation is not 300 pages of the same banner. A JPEG is one page (a multi-picture JPEG's other
pictures are previews or depth maps).

Each page is read by OCR with the machinery of a PDF's scanned pages (pdf_ocr.py OcrPages,
ocr.py PageReader: language hints, script detection, several pages at once on
`ocr_page_threads`, RapidOCR where tesseract is missing), at the frame's own resolution
(image_frames.py). Sizes and page counts are checked from the headers before a pixel is decoded
(image_tiff.py walks at most `max_pages + 1` TIFF directories).

With `images` other than none the page lists the frame as an image covering it, stored as an
asset: a PNG, JPEG, GIF or WebP file as it came (browsers show it), a TIFF or BMP page as PNG.
"""

from __future__ import annotations

import warnings
from collections import deque
from pathlib import Path
from typing import Any

from PIL import Image

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    IMAGES_NONE,
    OCR_OFF,
    AssetSink,
    ParseFailure,
    ParseOptions,
    ProgressFn,
    corrupt,
    describe_error,
    is_out_of_memory,
    page_text,
    safe,
    too_large,
)
from parser_svc.parsers.image_frames import (
    LABELS,
    MIME,
    PILLOW_ERRORS,
    Geometry,
    blank,
    check_pixels,
    frame_png,
    image_failure,
    magic_kind,
    ocr_pixels,
    open_image,
    plan,
)
from parser_svc.parsers.image_meta import add_metadata
from parser_svc.parsers.image_tiff import walk_tiff
from parser_svc.parsers.pdf_ocr import OcrPages, PendingPage

# Distinct warnings of the image library kept in a package.
MAX_LIBRARY_WARNINGS = 5


def parse_image(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    kind = magic_kind(data)
    if kind is None:
        raise ParseFailure(
            ErrorReason.UNSUPPORTED_FORMAT,
            "the content is not a PNG, JPEG, TIFF, GIF, BMP or WebP image",
        )
    package = rp.ReadingPackage(content_type=kind)
    with warnings.catch_warnings(record=True) as noticed:
        warnings.simplefilter("always")
        im = open_image(data, kind)
        try:
            frames = _frames(im, data, kind, options, package.warnings)
            add_metadata(im, package.metadata)
            assets = AssetSink(package, options)
            _read(_Job(im, data, kind, options, package, assets), frames, progress)
            assets.finish()
        finally:
            im.close()
    # What Pillow worked around ("Corrupt EXIF data", "Truncated File Read" in metadata).
    found = dict.fromkeys(
        " ".join(str(w.message).split())[:200]
        for w in noticed
        if "PIL" in Path(w.filename).parts and not issubclass(w.category, DeprecationWarning)
    )
    for text in list(found)[:MAX_LIBRARY_WARNINGS]:
        package.warnings.append(f"the {LABELS[kind]} image is damaged in part: {safe(text)}")
    if not _reads_text(options):
        why = "this job turned off (ocr_mode off)" if options.ocr else "is disabled"
        pages = "its page needs" if len(package.pages) == 1 else "its pages need"
        package.warnings.append(f"the image has no text layer: {pages} OCR, which {why}")
    elif not any(page.text for page in package.pages):
        package.warnings.append("no text was found in the image by OCR")
    return package


def _reads_text(options: ParseOptions) -> bool:
    return options.ocr and options.ocr_mode != OCR_OFF


def _frames(
    im: Image.Image, data: bytes, kind: str, options: ParseOptions, notes: Any
) -> list[int]:
    """The frames read as pages (Pillow frame numbers), every page's size checked."""
    label = LABELS[kind]
    if kind != "tiff":
        check_pixels(*im.size, f"the {label} image")
        # A JPEG's other pictures (multi-picture format) are previews, not frames.
        count = _frame_count(im) if kind != "jpeg" else 1
        if count > 1:
            notes.append(
                f"the {label} image is animated ({count} frames): its first frame was read, "
                "the one viewers that do not animate show"
            )
        return [0]
    chain = walk_tiff(data, options.max_pages)
    if chain is None:
        raise corrupt("the TIFF header is damaged")
    if chain.more:
        raise too_large(f"the TIFF has more than {options.max_pages} pages (the limit)")
    pages = [d for d in chain.directories if not d.reduced] or chain.directories
    if not pages:
        raise corrupt(f"the TIFF has no readable page: {chain.damage or 'no page is listed'}")
    for number, directory in enumerate(pages, 1):
        check_pixels(directory.width, directory.height, f"page {number} of the TIFF")
    if chain.damage:
        notes.append(
            f"the TIFF is damaged: {chain.damage}; the {len(pages)} pages before were read"
        )
    skipped = len(chain.directories) - len(pages)
    if skipped:
        notes.append(f"{skipped} reduced-resolution copies (thumbnails) were left out")
    return [d.index for d in pages]


def _frame_count(im: Image.Image) -> int:
    try:
        return int(getattr(im, "n_frames", 1))
    except PILLOW_ERRORS:
        return 1


class _Job:
    """One image document being read: the open image and where its pages go."""

    def __init__(
        self,
        im: Image.Image,
        data: bytes,
        kind: str,
        options: ParseOptions,
        package: rp.ReadingPackage,
        assets: AssetSink,
    ) -> None:
        self.im, self.data, self.kind, self.options = im, data, kind, options
        self.package, self.assets = package, assets
        self.failed = 0


def _read(job: _Job, frames: list[int], progress: ProgressFn) -> None:
    """Decodes the frames in order in this thread (Pillow reads one file sequentially) while
    OCR reads up to `ocr.threads` decoded pages at once; pages are added in order."""
    total = len(frames)
    reading = _reads_text(job.options)
    ocr = OcrPages(job.options, total)
    waiting: deque[tuple[rp.Page, PendingPage | None]] = deque()

    def finish_first() -> None:
        out, pending = waiting.popleft()
        if pending is not None:
            try:
                out.text = page_text(ocr.finish(pending))
                out.ocr = True
            except Exception as err:
                _page_error(job, err, out.number, total)
        job.package.pages.append(out)
        progress(len(job.package.pages), total, "ocr" if reading else "image")

    progress(0, total, "ocr" if reading else "image")
    try:
        for number, index in enumerate(frames, 1):
            out, pixels, zoom = _frame(job, index, number, total)
            pending = None
            if pixels is not None and blank(pixels):
                out.ocr = True  # read: nothing on it
            elif pixels is not None:
                while ocr.in_flight >= ocr.threads:
                    finish_first()
                pending = ocr.start_pixels(pixels, out, zoom)
            waiting.append((out, pending))
            while waiting and waiting[0][1] is None:
                finish_first()
        while waiting:
            finish_first()
    finally:
        ocr.close()
    if job.failed == total:
        raise corrupt(f"none of the {total} pages of the {LABELS[job.kind]} can be read")


def _frame(job: _Job, index: int, number: int, total: int) -> tuple[rp.Page, Any, float]:
    """Page `number` (frame `index`) decoded: the page, its OCR pixels (None when OCR is off
    or the frame cannot be read) and their pixels per point."""
    label = LABELS[job.kind]
    try:
        if index:
            job.im.seek(index)
        size = job.im.size
        check_pixels(*size, f"page {number} of the {label}" if total > 1 else f"the {label} image")
        geometry = plan(job.im, job.options)
        if job.kind == "jpeg":  # decode at the OCR size (libjpeg scales while decoding)
            job.im.draft("L", (geometry.ocr_width, geometry.ocr_height))
        job.im.load()
    except ParseFailure:
        raise
    except PILLOW_ERRORS as err:
        if total == 1:
            raise image_failure(err, job.kind) from err
        _page_error(job, err, number, total)
        return rp.Page(number=number), None, 1.0
    out = rp.Page(number=number, width=geometry.width_pt, height=geometry.height_pt)
    _add_image(job, out, geometry, size)
    if not _reads_text(job.options):
        return out, None, geometry.zoom
    try:
        return out, ocr_pixels(job.im, geometry), geometry.zoom
    except PILLOW_ERRORS as err:
        _page_error(job, err, number, total)
        return out, None, geometry.zoom


def _add_image(job: _Job, out: rp.Page, geometry: Geometry, size: tuple[int, int]) -> None:
    """The frame as the page's image: the file itself (PNG, JPEG, GIF, WebP) or the page as
    PNG (TIFF, BMP), stored as an asset when there is a store."""
    options = job.options
    if options.images == IMAGES_NONE:
        return
    width, height = size if geometry.orientation < 5 else size[::-1]
    mime = MIME.get(job.kind, "image/png")
    asset_id = ""
    if options.assets_dir is not None:
        try:
            payload = job.data if job.kind in MIME else frame_png(job.im, geometry.orientation)
        except PILLOW_ERRORS as err:
            job.package.warnings.append(
                f"page {out.number} cannot be stored as an image: {describe_error(err)}"
            )
            return
        asset_id = job.assets.add(payload, mime, width, height)
    bbox = rp.BoundingBox(x0=0, y0=0, x1=geometry.width_pt, y1=geometry.height_pt)
    out.images.append(
        rp.ImageRef(asset_id=asset_id, bbox=bbox, mime_type=mime, width=width, height=height)
    )


def _page_error(job: _Job, err: BaseException, number: int, total: int) -> None:
    """A page that cannot be read is a warning (the document fails when no page can be);
    memory exhaustion fails the parse."""
    if isinstance(err, ParseFailure | MemoryError):
        raise err
    if is_out_of_memory(err):
        raise too_large(
            f"page {number} exceeded the parse's memory limit ({describe_error(err)})"
        ) from err
    job.failed += 1
    job.package.warnings.append(f"page {number} of {total} cannot be read: {describe_error(err)}")
