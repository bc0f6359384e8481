"""Is a PDF page's text layer readable? Fonts without a Unicode map (no ToUnicode CMap, a custom
encoding) come out of text extraction as U+FFFD, private-use code points or control
characters: the page looks like text but is garbage, and only OCR of the rendered page reads it.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from typing import Any

# Judged bad: U+FFFD (a glyph without Unicode), private use, control characters, unassigned
# code points (whitespace is not counted at all).
_BAD_CATEGORIES = frozenset({"Co", "Cc", "Cn", "Cs"})
# A page is garbage when at least this share of its visible characters is bad...
GARBAGE_SHARE = 0.10
# ...and there are at least this many of them (one odd symbol is not a broken font).
GARBAGE_MIN = 8

_REPLACEMENT_RUN = re.compile("\ufffd+")
# A span with more letters than this (U+FFFD is none) shows words, not maths variables.
_SPAN_LETTERS = 2


def bad_chars(text: str) -> int:
    """Characters of `text` that are no readable text. Each distinct character is judged once
    (a page has thousands of characters and a few hundred distinct ones)."""
    return sum(
        count
        for char, count in Counter("".join(text.split())).items()
        if not char.isprintable() and unicodedata.category(char) in _BAD_CATEGORIES
    ) + text.count("\ufffd")


def visible_count(text: str) -> tuple[int, bool]:
    """How many characters of `text` are not whitespace (as str.isspace() and str.split() tell
    it), and whether those are all printable; decided in C. The usual page's only whitespace is
    spaces and newlines, which the first test shows (no other whitespace character is
    printable): its count needs no copy of the text without them."""
    if text.replace("\n", " ").isprintable():
        return len(text) - text.count(" ") - text.count("\n"), True
    visible = "".join(text.split())
    return len(visible), visible.isprintable()


def _counted(text: str, counted: tuple[int, bool]) -> tuple[int, int]:
    """(bad characters, visible characters) of `text` (`counted`: its visible_count); (0, n)
    in the common case, decided without counting."""
    visible, printable = counted
    if printable and "\ufffd" not in text:
        return 0, visible
    return bad_chars(text), visible


def _garbage(bad: int, visible: int) -> str:
    if bad >= GARBAGE_MIN and bad >= GARBAGE_SHARE * max(1, visible):
        return f"{bad} of {visible} characters of its text layer have no Unicode meaning"
    return ""


def strip_replacements(text: str) -> str:
    """`text` without U+FFFD runs (what is left when a garbage page cannot be OCR'd)."""
    return _REPLACEMENT_RUN.sub("", text)


def fonts_without_unicode(doc: Any, fonts: list[Any], known: dict[int, bool]) -> list[str]:
    """Names of the fonts (a page's `get_fonts(full=True)`) whose glyphs have no Unicode:
    composite fonts with an Identity encoding (codes are glyph ids) and no ToUnicode map. Text
    extraction turns their glyph ids into arbitrary letters and control characters. `known`
    caches per font xref."""
    names = []
    for xref, _ext, kind, basefont, _name, encoding, *_ in fonts:
        if xref not in known:
            known[xref] = (
                kind == "Type0"
                and str(encoding).startswith("Identity")
                and doc.xref_get_key(xref, "ToUnicode")[0] in ("null", "none")
            )
        if known[xref]:
            names.append(str(basefont))
    return names


def unmapped_letters(textpage: Any) -> int:
    """U+FFFD (glyphs without a Unicode mapping) in the spans of `textpage` that show words
    too: letters of a text font the text cannot give back; one makes a word wrong. A span of
    symbols and U+FFFD, or of a maths variable or two, is a symbol font's (the large braces and
    arrow tails of displayed maths: GeoTopo-komprimiert.pdf of the corpus has 1-6 on 69 of its
    117 pages), which OCR reads no better: those are left out and the text layer kept."""
    count = 0
    for block in textpage.extractDICT()["blocks"]:
        for line in block.get("lines", ()):
            for span in line["spans"]:
                text = span["text"]
                if "\ufffd" in text and sum(c.isalpha() for c in text) > _SPAN_LETTERS:
                    count += text.count("\ufffd")
    return count


def judge_page(
    text: str,
    unmapped_fonts: Callable[[], list[str]],
    letters: Callable[[], int] = lambda: 0,
    counted: tuple[int, bool] | None = None,
) -> str:
    """Why the page's text layer is unreadable ("" when it is fine): too many characters
    without Unicode meaning, any letter without a Unicode mapping (`letters`: unmapped_letters,
    asked for only when the text shows U+FFFD), or fonts without a Unicode map (asked for only
    when the text shows bad characters) whose text shows at least a few of them.
    `counted`: visible_count(text), when the caller has it."""
    bad, visible = _counted(text, visible_count(text) if counted is None else counted)
    reason = _garbage(bad, visible)
    if reason:
        return reason
    unmapped = letters() if "\ufffd" in text else 0
    if unmapped:
        # Whatever their share (an Arabic page came back with 6 in 28 characters).
        return (
            f"{unmapped} of {visible} characters of its text layer are letters without a "
            f"Unicode mapping"
        )
    if bad >= GARBAGE_MIN:
        fonts = unmapped_fonts()
        if fonts:
            return f"font {fonts[0]!r} has no Unicode map"
    return ""
