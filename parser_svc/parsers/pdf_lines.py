"""A text page's lines as the structure pass reads them: per text block with a line of text, its
lines' summaries — box, text (stripped), the size most of its characters have (rounded to 0.1
point), whether most of them are bold (the font's bold flag or "bold" in its name), and how many
characters are not spaces. The native module (native/page_lines.c) computes them from the text
page directly; without it they come from `extractDICT()`, the same figures
(tests/parser_svc/parsers/test_page_lines.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pymupdf import mupdf

from parser_svc.parsers.pdf_pass import native_module

# (x0, y0, x1, y1, text, size, bold, chars)
LineSummary = tuple[float, float, float, float, str, float, bool, int]

BOLD_FLAG = 16  # pymupdf's span flag for a bold font


def size_key(size: float) -> float:
    """A font size rounded to 0.1 point, halves up (the native module's rounding)."""
    return math.floor(size * 10.0 + 0.5) / 10.0


def page_lines(textpage: Any) -> list[list[LineSummary]]:
    """The page's text blocks, each its lines' summaries."""
    module = native_module()
    if module is None:
        return dict_lines(textpage.extractDICT())
    context = int(mupdf.internal_context_get().this)
    found: list[list[LineSummary]] = module.page_lines(context, textpage.this.m_internal_value())
    return found


def dict_lines(page: dict[str, Any]) -> list[list[LineSummary]]:
    blocks: list[list[LineSummary]] = []
    for raw in page["blocks"]:
        if raw.get("type", 0) != 0:
            continue
        lines = [line for line in map(_line, raw["lines"]) if line is not None]
        if lines:
            blocks.append(lines)
    return blocks


def _line(raw: dict[str, Any]) -> LineSummary | None:
    spans = raw["spans"]
    text = "".join(span["text"] for span in spans).strip()
    if not text:
        return None
    sizes: dict[float, int] = {}
    bold = 0
    for span in spans:
        count = len("".join(span["text"].split()))
        size = size_key(float(span["size"]))
        sizes[size] = sizes.get(size, 0) + count
        if span["flags"] & BOLD_FLAG or "bold" in str(span.get("font", "")).lower():
            bold += count
    chars = sum(sizes.values())
    x0, y0, x1, y1 = raw["bbox"]
    return x0, y0, x1, y1, text, max(sizes, key=lambda s: sizes[s]), bold * 2 > chars, chars


# (x0, y0, x1, y1, text) of a segment: a run of a line's words with word spaces between them.
Segment = tuple[float, float, float, float, str]


def page_segments(textpage: Any, gap_ems: float) -> list[Segment]:
    """The page's text lines (mupdf's) cut into segments where two words are further apart
    than `gap_ems` of the second one's height, each with the box of its words."""
    module = native_module()
    if module is None:
        return word_segments(textpage.extractWORDS(), gap_ems)
    context = int(mupdf.internal_context_get().this)
    found: list[Segment] = module.page_segments(context, textpage.this.m_internal_value(), gap_ems)
    return found


def word_segments(words: Sequence[Sequence[Any]], gap_ems: float) -> list[Segment]:
    """The same from pymupdf's words, which come line by line."""
    out: list[Segment] = []
    line: Any = None
    x0 = y0 = x1 = y1 = 0.0
    text: list[str] = []
    for w in words:
        key = (w[5], w[6])
        if key == line and w[0] - x1 <= gap_ems * (w[3] - w[1]):
            text.append(w[4])
            x1, y0, y1 = max(x1, w[2]), min(y0, w[1]), max(y1, w[3])  # a superscript's top too
            continue
        if text:
            out.append((x0, y0, x1, y1, " ".join(text)))
        line, x0, y0, x1, y1, text = key, w[0], w[1], w[2], w[3], [w[4]]
    if text:
        out.append((x0, y0, x1, y1, " ".join(text)))
    return out
