"""OCR of a PDF's pages on the cores the parse may use.

A page that needs OCR is rendered in the parse's own thread (pymupdf is not thread-safe) and read
on one of up to `ocr_page_threads` threads, while the parse goes on with the next pages (their
text layer, images and tables). tesserocr releases the GIL while tesseract reads, so a long scan
uses as many cores as it has threads. Each thread reads with its own engines (an engine reads one
image at a time): the first with the ones the fork server preloaded (slot 0), a second loads its
own (~0.5 s and ~40 MB for the Latin set) when a second page is waiting while the first is read.
Short documents (fewer than MIN_PAGES_FOR_THREADS pages) read on one thread: the second engine
would cost more than it saves. RapidOCR, the fallback engine, runs its own threads: one reader.

The pages' results are taken in page order, so the package, the warnings and the progress
(pages done, counted in order) are what a sequential parse gives.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pymupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseOptions

# Documents shorter than this read their OCR pages on one thread.
MIN_PAGES_FOR_THREADS = 4


@dataclass
class PendingPage:
    """A page whose OCR was started: its result is placed into `out` by `OcrPages.finish`."""

    out: rp.Page
    lines: Future[list[Any]]  # ocr.OcrLine
    zoom: float
    derotate: pymupdf.Matrix


class OcrPages:
    def __init__(self, options: ParseOptions, total_pages: int) -> None:
        from parser_svc.parsers.ocr import installed_models

        self.options = options
        wanted = max(1, options.ocr_page_threads)
        one = total_pages < MIN_PAGES_FOR_THREADS or not installed_models()
        self.threads = 1 if one else wanted
        self.in_flight = 0
        self._pool: ThreadPoolExecutor | None = None
        self._slots = itertools.count()
        self._local = threading.local()

    def start(self, page: pymupdf.Page, out: rp.Page) -> PendingPage:
        """Renders `page` and starts reading it; the caller first waits for pages in flight
        until fewer than `threads` are (`in_flight`), which bounds the images held."""
        import numpy as np

        o = self.options
        rect = page.rect
        zoom = o.ocr_dpi / 72
        longest = max(rect.width, rect.height) * zoom
        if longest > o.ocr_max_side_px:
            zoom *= o.ocr_max_side_px / longest
        pix = page.get_pixmap(
            matrix=pymupdf.Matrix(zoom, zoom), colorspace=pymupdf.csGRAY, alpha=False
        )
        image = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width)
        return self.start_pixels(image, out, zoom, page.derotation_matrix)

    def start_pixels(
        self, image: Any, out: rp.Page, zoom: float, derotate: pymupdf.Matrix | None = None
    ) -> PendingPage:
        """Starts reading `image` (HxW grey uint8), `zoom` pixels per point of `out` (an
        image document's frame, parsers/image.py); the same rules as `start`."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.threads, thread_name_prefix="ocr", initializer=self._claim_slot
            )
        self.in_flight += 1
        future = self._pool.submit(self._read, image)
        return PendingPage(out, future, zoom, derotate or pymupdf.Matrix(1, 1))

    def finish(self, pending: PendingPage) -> list[str]:
        """Waits for the page's OCR, adds its lines to its blocks and returns its text."""
        try:
            lines = pending.lines.result()
        finally:
            self.in_flight -= 1
        texts = []
        for line in lines:
            z = pending.zoom
            shown = pymupdf.Rect(line.x0 / z, line.y0 / z, line.x1 / z, line.y1 / z)
            x0, y0, x1, y1 = (shown * pending.derotate).normalize()
            pending.out.blocks.append(
                rp.TextBlock(
                    text=line.text,
                    bbox=rp.BoundingBox(x0=x0, y0=y0, x1=x1, y1=y1),
                    source="ocr",
                    confidence=line.confidence,
                )
            )
            texts.append(line.text)
        return ["\n".join(texts)] if texts else []

    def close(self) -> None:
        """Stops the threads (pages still in flight are read to the end first). A parse child
        ends with no thread of its own left running."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _claim_slot(self) -> None:
        from parser_svc.parsers import ocr

        ocr.use_slot(next(self._slots))

    def _read(self, image: Any) -> list[Any]:
        """One page on this thread's reader (it remembers the script the thread's last page
        needed, as a sequential parse does for the document)."""
        from parser_svc.parsers.ocr import PageReader

        reader = getattr(self._local, "reader", None)
        if reader is None:
            o = self.options
            reader = self._local.reader = PageReader(o.languages, o.ocr_threads)
        return reader.read(image)
