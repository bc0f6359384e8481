"""A long Markdown document in pieces markdown-it-py can parse one at a time: its tokens cost
about 100 bytes of memory per byte of Markdown and its time grows faster than the size, so a
20 MB document parsed whole takes gigabytes. The pieces end only where no block can continue
across the cut: before a line at column 0 that follows a blank line (a paragraph, list, quote,
indented code block or HTML block of the kinds that end at a blank line cannot go on past it),
never inside a fenced code block or a raw HTML block (<pre>, <script>, <style>, <textarea>,
comments). Link reference definitions are read first from the whole text, so a link finds its
definition in any piece.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

CHUNK_CHARS = 64 * 1024
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_RAW_OPEN = re.compile(r" {0,3}<(pre|script|style|textarea)(?:\s|>|$)|( {0,3}<!--)", re.I)
_RAW_CLOSE = {
    "pre": "</pre>",
    "script": "</script>",
    "style": "</style>",
    "textarea": "</textarea>",
    "comment": "-->",
}
_DEFINITION = re.compile(r" {0,3}\[[^\]\n]{1,999}\]:")


def references(text: str) -> str:
    """The link reference definitions of the document, one per line (to fill the parser's
    reference table before the pieces are parsed)."""
    return "\n\n".join(line for line in text.splitlines() if _DEFINITION.match(line))


class _Blocks:
    """Tracks whether a line is inside a fenced code block or a raw HTML block."""

    def __init__(self) -> None:
        self.fence = ""
        self.raw = ""

    def inside(self) -> bool:
        return bool(self.fence or self.raw)

    def line(self, line: str) -> None:
        if self.fence:
            found = _FENCE.match(line)
            if found and found.group(1).startswith(self.fence) and not line[found.end() :].strip():
                self.fence = ""
            return
        if self.raw:
            if _RAW_CLOSE[self.raw] in line.lower():
                self.raw = ""
            return
        found = _FENCE.match(line)
        if found:
            self.fence = found.group(1)
            return
        opened = _RAW_OPEN.match(line)
        if opened:
            kind = (opened.group(1) or "comment").lower()
            rest = line[opened.end() :].lower()
            if _RAW_CLOSE[kind] not in rest:
                self.raw = kind


def chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """`text` in pieces of about `size` characters or more, cut where no block continues."""
    if len(text) <= size:
        yield text
        return
    blocks = _Blocks()
    piece: list[str] = []
    length = 0
    blank = False
    for line in text.splitlines(keepends=True):
        starts_block = blank and line[:1] not in (" ", "\t", "\n", "\r", "")
        if length >= size and starts_block and not blocks.inside():
            yield "".join(piece)
            piece, length = [], 0
        blocks.line(line)
        piece.append(line)
        length += len(line)
        blank = not line.strip()
    if piece:
        yield "".join(piece)
