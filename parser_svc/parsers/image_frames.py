"""One frame of an image document: opening it, its page geometry, and its pixels for OCR.

The page size comes from the image's DPI (72 when it declares none or nonsense). OCR reads the
frame at its own resolution, made square (a fax is 204 x 196 or 204 x 98 dpi: the coarser axis
is stretched to the finer one, pixel rows repeated for 1-bit images), bounded by
`ocr_max_side_px`. Below LOW_DPI (and images that declare no DPI, such as screenshots) the
frame is upscaled to UPSCALE_DPI: tesseract misreads letters only a few pixels high. Measured
on generated pages of 10 pt text (bench-style, tests/fixtures/scans.py error rates): at 72 dpi,
grey 5.2% -> 0.0% character errors, 1-bit 12.0% -> 5.5%; at 100 dpi and above upscaling gained
nothing and on noisy 1-bit faxes (9 pt, 204 x 196 dpi) upscaling to 300 dpi raised the error
rate from 1.0% to 5.7-8.6%, so a fax is read at its own 204 dpi.

JPEG orientation (EXIF, as phones write it) is honoured: the page is what a viewer shows.
"""

from __future__ import annotations

import io
import re
import struct
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from docparse.reasons import ErrorReason
from parser_svc.parsers import ParseFailure, ParseOptions, corrupt, too_large

# The largest frame decoded, in pixels (a 600-dpi A3 scan is ~70 megapixels; 100 megapixels
# of RGBA are 400 MB decoded). Checked from the header, before anything is decoded.
MAX_FRAME_PIXELS = 100_000_000
# Declared resolutions outside this range are taken as no resolution (72 dpi).
MIN_DPI, MAX_DPI = 20.0, 10_000.0
LOW_DPI, UPSCALE_DPI = 100.0, 200.0

LABELS = {
    "png": "PNG",
    "jpeg": "JPEG",
    "tiff": "TIFF",
    "gif": "GIF",
    "bmp": "BMP",
    "webp": "WebP",
}
# Pillow plugins that may open each kind (a JPEG with a multi-picture index opens as MPO).
_PILLOW_FORMATS = {
    "png": ["PNG"],
    "jpeg": ["JPEG", "MPO"],
    "tiff": ["TIFF"],
    "gif": ["GIF"],
    "bmp": ["BMP"],
    "webp": ["WEBP"],
}
MIME = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
}

# EXIF orientation -> the transpose that shows the image upright (as ImageOps.exif_transpose).
_ORIENTATION = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_SWAPS_AXES = frozenset({5, 6, 7, 8})
_EXIF_ORIENTATION = 0x0112


def magic_kind(data: bytes) -> str | None:
    """The kind ("png", "jpeg", "tiff", "gif", "bmp", "webp") the first bytes say, or None."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "tiff"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head.startswith(b"BM") and len(data) >= 26:
        return "bmp"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None


def image_failure(err: BaseException, kind: str) -> ParseFailure:
    """What Pillow's error on a `kind` file means: a decompression bomb is too large, a
    compression this Pillow cannot decode is unsupported, anything else is damage."""
    label = LABELS[kind]
    text = " ".join(str(err).split())[:200] or type(err).__name__
    if isinstance(err, Image.DecompressionBombError):
        # Pillow's own check, past twice its MAX_IMAGE_PIXELS: "Image size (N pixels) ..."
        found = re.search(r"\((\d+) pixels\)", text)
        size = f"{int(found.group(1)) / 1e6:.1f} megapixels" if found else "too many pixels"
        return too_large(
            f"the {label} image has {size}: over the limit of "
            f"{MAX_FRAME_PIXELS // 1_000_000} megapixels per page"
        )
    if isinstance(err, UnidentifiedImageError):  # its text names a Python object
        return corrupt(f"the {label} image cannot be read: its header is damaged")
    lowered = text.lower()
    if "unsupported" in lowered or "not available" in lowered or "unknown" in lowered:
        return ParseFailure(
            ErrorReason.UNSUPPORTED_FORMAT, f"the {label} image uses a form not supported: {text}"
        )
    if "truncated" in lowered:
        return corrupt(f"the {label} image is cut off: {text}")
    return corrupt(f"the {label} image cannot be read: {text}")


# What Pillow raises on a damaged or unexpected file.
PILLOW_ERRORS = (
    OSError,
    SyntaxError,
    ValueError,
    EOFError,
    IndexError,
    KeyError,
    TypeError,
    ZeroDivisionError,
    struct.error,
    UnidentifiedImageError,
    Image.DecompressionBombError,
)


def open_image(data: bytes, kind: str) -> Image.Image:
    """The image, its header read (nothing decoded yet)."""
    try:
        with warnings.catch_warnings():
            # The pixel limit here is MAX_FRAME_PIXELS, checked per frame by the caller.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(data), formats=_PILLOW_FORMATS[kind])
    except PILLOW_ERRORS as err:
        raise image_failure(err, kind) from err


def check_pixels(width: int, height: int, what: str) -> None:
    if width * height > MAX_FRAME_PIXELS:
        raise too_large(
            f"{what} is {width} x {height} pixels ({width * height / 1e6:.1f} megapixels): "
            f"over the limit of {MAX_FRAME_PIXELS // 1_000_000} megapixels per page"
        )


def _dpi(im: Image.Image) -> tuple[float, float]:
    raw = im.info.get("dpi")
    values: list[float] = []
    if isinstance(raw, tuple | list) and len(raw) >= 2:
        for value in raw[:2]:
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = 0.0
            values.append(number if MIN_DPI <= number <= MAX_DPI else 0.0)
    x, y = [*values, 0.0, 0.0][:2]
    return (x or y or 72.0), (y or x or 72.0)


def orientation(im: Image.Image) -> int:
    try:
        value = im.getexif().get(_EXIF_ORIENTATION, 1)
    except PILLOW_ERRORS:
        return 1
    return value if isinstance(value, int) and value in _ORIENTATION else 1


@dataclass(frozen=True)
class Geometry:
    """A frame's page (in points, as shown) and the size OCR reads it at."""

    width_pt: float
    height_pt: float
    # Pixels of the image given to OCR, in the frame's stored orientation.
    ocr_width: int
    ocr_height: int
    # OCR pixels per point.
    zoom: float
    orientation: int


def plan(im: Image.Image, options: ParseOptions) -> Geometry:
    """The current frame's page geometry and OCR size, from its header."""
    width, height = im.size
    xdpi, ydpi = _dpi(im)
    turn = orientation(im)
    width_pt, height_pt = width * 72 / xdpi, height * 72 / ydpi
    resolution = max(xdpi, ydpi)
    if resolution < LOW_DPI:
        resolution = UPSCALE_DPI
    ocr_w, ocr_h = width_pt * resolution / 72, height_pt * resolution / 72
    longest = max(ocr_w, ocr_h)
    if longest > options.ocr_max_side_px:
        ocr_w, ocr_h = (v * options.ocr_max_side_px / longest for v in (ocr_w, ocr_h))
    pixels_w, pixels_h = max(1, round(ocr_w)), max(1, round(ocr_h))
    zoom = pixels_w / width_pt
    if turn in _SWAPS_AXES:
        width_pt, height_pt = height_pt, width_pt
    return Geometry(width_pt, height_pt, pixels_w, pixels_h, zoom, turn)


def upright(im: Image.Image, turn: int) -> Image.Image:
    """`im` as a viewer shows it (EXIF orientation `turn` applied)."""
    method = _ORIENTATION.get(turn)
    return im.transpose(method) if method is not None else im


def _grey(im: Image.Image) -> Image.Image:
    """`im` in 8-bit grey; transparent parts white (text drawn on a transparent background
    would otherwise be black on black)."""
    if im.mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    if im.mode in ("RGBa", "La"):
        im = im.convert("RGBA")
    if im.mode.startswith("I;16"):
        pixels = np.asarray(im).astype(np.uint16, copy=False)
        return Image.fromarray((pixels >> 8).astype(np.uint8), "L")
    if im.mode in ("I", "F"):
        values = np.asarray(im, dtype=np.float32)
        low, high = float(values.min()), float(values.max())
        scaled = (values - low) * (255.0 / (high - low)) if high > low else values * 0
        return Image.fromarray(scaled.astype(np.uint8), "L")
    if im.mode in ("RGBA", "LA", "PA"):
        alpha = im.getchannel("A")
        flat = Image.new("L", im.size, 255)
        flat.paste(im.convert("L"), mask=alpha)
        return flat
    if im.mode == "L":
        return im
    try:
        return im.convert("L")
    except ValueError:
        return im.convert("RGB").convert("L")


def ocr_pixels(im: Image.Image, geometry: Geometry) -> Any:
    """The loaded frame as the HxW grey uint8 array OCR reads, upright."""
    bilevel = im.mode == "1"
    grey = _grey(im)
    size = (geometry.ocr_width, geometry.ocr_height)
    if grey.size != size:
        up = size[0] >= grey.width and size[1] >= grey.height
        if up:
            method = Image.Resampling.NEAREST if bilevel else Image.Resampling.BICUBIC
            grey = grey.resize(size, method)
        else:
            grey = grey.resize(size, Image.Resampling.LANCZOS, reducing_gap=2.0)
    grey = upright(grey, geometry.orientation)
    return np.ascontiguousarray(np.asarray(grey, dtype=np.uint8))


# A frame whose grey levels span less than this holds nothing to read (a blank page, the back
# of a sheet): OCR is not run on it (tesseract takes ~2 s on a blank 2500-pixel page).
BLANK_CONTRAST = 16


def blank(pixels: Any) -> bool:
    return int(pixels.max()) - int(pixels.min()) < BLANK_CONTRAST


def frame_png(im: Image.Image, turn: int) -> bytes:
    """The loaded frame, upright, as PNG (TIFF and BMP frames are stored so)."""
    shown = upright(im, turn)
    if shown.mode in ("I", "F") or shown.mode.startswith("I;16"):
        shown = _grey(shown)
    elif shown.mode not in ("1", "L", "LA", "P", "RGB", "RGBA"):
        shown = shown.convert("RGBA" if "A" in shown.mode else "RGB")
    out = io.BytesIO()
    shown.save(out, format="PNG", compress_level=3)
    return out.getvalue()
