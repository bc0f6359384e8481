"""Which script a page is written in, found cheaply: each candidate script's first model reads
the same piece of the page's middle text line (whole words, up to 14 line heights wide), and the
most confident reading names the script.

Measured on the generated scans (tests/fixtures/scans.py, 150 DPI renders, CPU time of one
thread, all eight languages, seeds 0-7 and 200-203): tesseract's script detection (OSD) on a
whole page costs 250-650 ms, more than reading the page (~200 ms); on a crop of 2-3 lines
50-150 ms, and then it names Japanese pages "Han" and, now and then, Chinese or English ones
"Cyrillic". A piece of a line read by one model costs 10-60 ms, and the right script's model
reads it with 0.8-0.95 where the other scripts' stay below 0.7; Latin and Cyrillic letters look
alike (each model reads the other's text with up to 0.7), so both are read and compared, and
the Chinese and Japanese models read Latin text with 0.8-0.9, so those two come first. Found
this way (models preloaded by ocr.warm_up): 20-60 ms for a Latin or Cyrillic page, 70-160 ms
for Chinese, Japanese or Arabic, the right script on all 96 pages; before, a page of another
script than Latin was read with the Latin models, then OSD, then again (~1.1 s for Russian).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

# Scripts whose letters look alike: the more confident reading of the two wins at this.
LOOK_ALIKE = frozenset({"Latin", "Cyrillic"})
ALPHABET_CONFIDENCE = 0.7
# Below ALPHABET_CONFIDENCE but at least this: the winner's whole set reads the piece again.
DOUBT_CONFIDENCE = 0.55
# ...and wins when the set reads it with at least this.
SET_CONFIDENCE = 0.75
# Another script whose models read the piece with at least this confidence wins at once.
SURE_CONFIDENCE = 0.8
# Below this, no script's reading is trusted: the caller falls back to OSD on the page.
MIN_CONFIDENCE = 0.6
# A text band: at least this many pixel rows with ink, and this share of the width inked.
_MIN_BAND_ROWS = 6
_ROW_INK_SHARE = 0.005
# The piece of a line read: at most this many line heights wide (about 6-10 words).
_PIECE_HEIGHTS = 14
_MARGIN = 10

ReadLine = Callable[[Any, tuple[str, ...]], tuple[str, float]]


def text_bands(image: Any) -> list[tuple[int, int]]:
    """Rows of `image` (HxW grey uint8) with ink, as (top, bottom) bands: its text lines, roughly
    (a skew of a degree still leaves lines apart at ordinary line spacing)."""
    import numpy as np

    inked = (image < 128).sum(axis=1) > max(2, image.shape[1] * _ROW_INK_SHARE)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], inked.astype(np.int8), [0]))))
    return [
        (int(top), int(bottom))
        for top, bottom in zip(edges[::2], edges[1::2], strict=True)
        if bottom - top >= _MIN_BAND_ROWS
    ]


def line_piece(image: Any) -> Any | None:
    """A piece of the middle text line of `image` (grey), padded, or None without text. Bands
    taller than three times the median (pictures, tables, merged lines) are passed over."""
    import numpy as np

    if image.ndim == 3:
        image = image.mean(axis=2).astype(np.uint8)
    bands = text_bands(image)
    if not bands:
        return None
    median = sorted(b - t for t, b in bands)[len(bands) // 2]
    lines = [(t, b) for t, b in bands if b - t <= 3 * median] or bands
    top, bottom = lines[len(lines) // 2]
    height = bottom - top
    pad = max(4, height // 2)
    top, bottom = max(0, top - pad), min(image.shape[0], bottom + pad)
    inked = (image[top:bottom] < 128).any(axis=0)
    columns = np.flatnonzero(inked)
    if columns.size == 0:
        return None
    # From the line's left end, whole words up to the width: cut in the last gap between words.
    left, right = int(columns[0]), int(columns[-1]) + 1
    if right - left > _PIECE_HEIGHTS * height:
        window = inked[left : left + _PIECE_HEIGHTS * height]
        gap = np.ones(max(3, height // 3), dtype=np.int32)
        gaps = np.flatnonzero(np.convolve(window.astype(np.int32), gap, "valid") == 0)
        gaps = gaps[gaps >= window.size // 2]  # not after a first word (nor in CJK text)
        right = left + (int(gaps[-1]) if gaps.size else window.size)
    # Just the words: the margin around them is added white (the page beyond may hold the
    # start of the next word).
    left, right = max(0, left - 2), min(image.shape[1], right + 2)
    # Tesseract reads nothing from a line whose letters touch the crop's edge: a white margin.
    return np.pad(image[top:bottom, left:right], _MARGIN, constant_values=255)


def guess_script(
    image: Any,
    candidates: Sequence[tuple[str, tuple[str, ...]]],
    read_line: ReadLine,
    sets: Mapping[str, tuple[str, ...]],
) -> str:
    """The script of `candidates` ((script, models) in the order to try) whose models read a
    piece of the page's middle line best, or "" when none reads it with MIN_CONFIDENCE (or the
    page shows no text line). Latin and Cyrillic letters look alike, and each script's model
    reads the other's text with some confidence: both are read, and the more confident wins at
    ALPHABET_CONFIDENCE, or when its whole set (`sets`: eng alone misses umlauts and accents)
    reads the piece with SET_CONFIDENCE. Another script wins at once at SURE_CONFIDENCE."""
    piece = line_piece(image)
    if piece is None:
        return ""
    read: dict[str, float] = {}
    for script, models in candidates:
        text, confidence = read_line(piece, models)
        read[script] = confidence if text else 0.0
        if script not in LOOK_ALIKE:
            if read[script] >= SURE_CONFIDENCE:
                return script
        elif read.keys() >= LOOK_ALIKE and _alphabet(piece, read, read_line, sets):
            return max(LOOK_ALIKE, key=lambda s: read[s])
    best = max(read, key=lambda s: read[s], default="")
    return best if best and read[best] >= MIN_CONFIDENCE else ""


def _alphabet(
    piece: Any, read: dict[str, float], read_line: ReadLine, sets: Mapping[str, tuple[str, ...]]
) -> bool:
    """Whether the more confident of the look-alike scripts is the piece's script."""
    alphabet = max(LOOK_ALIKE, key=lambda s: read[s])
    if read[alphabet] >= ALPHABET_CONFIDENCE:
        return True
    if read[alphabet] < DOUBT_CONFIDENCE or len(sets.get(alphabet, ())) < 2:
        return False
    text, confidence = read_line(piece, sets[alphabet])
    if text:
        read[alphabet] = max(read[alphabet], confidence)  # in the running if no script wins
    return bool(text) and confidence >= SET_CONFIDENCE
