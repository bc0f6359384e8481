"""A line of text an OCR engine found (ocr.py's tesseract, ocr_rapid.py's RapidOCR)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OcrLine:
    text: str
    # Corners in the pixel space of the image given to `PageReader.read`.
    x0: float
    y0: float
    x1: float
    y1: float
    confidence: float
