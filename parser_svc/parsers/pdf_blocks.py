"""A PDF page's text blocks with what they look like: each block's lines with their dominant
font size and boldness (for the document's headings, pdf_headings.py), and list items (a
leading marker, its kind, a nesting level from the indent). Built from the text page the page's
run made (its lines' summaries, pdf_lines.py: no second run of the page)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from parser_svc.parsers.pdf_lines import page_lines

# A line starting a new block in a mupdf block: a size change above this, or a boldness change.
SIZE_STEP = 0.8
# List markers: bullets, or numbers / letters / roman numerals followed by "." or ")", or
# parenthesised; then whitespace (the marker alone on its line joins the text beside it).
_BULLETS = "•◦▪‣●■□○▫·\u2013\u2014*-"  # en and em dashes are bullets too
_MARKER = re.compile(
    r"^(?:(?P<bullet>[" + re.escape(_BULLETS) + r"])"
    r"|(?P<ordered>(?:\d{1,3}|[a-z]|[ivxlc]{1,6}|[IVXLC]{1,6})[.)]"
    r"|\((?:\d{1,3}|[a-z]|[ivxlc]{1,6})\)))(?:\s+|$)"
)
# Indents closer than this are one list level.
INDENT_STEP = 6.0
# A caption's first line ("Table 2: ...", "Figure 3. ...", "Fig. 4 ...") starts a block of its own.
CAPTION_START = re.compile(r"^(?:(?:Table|Figure)\s+|Fig\.\s*)\d+(?:[:.\u2014]|\s)")


@dataclass(slots=True)
class Line:
    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    size: float
    bold: bool
    chars: int


@dataclass(slots=True)
class Block:
    """A text block of a page: its lines (never re-worded), its look and what it is."""

    lines: list[Line]  # not changed once the block is made: its box is theirs
    marker: str = ""
    ordered: bool = False
    level: int = 0
    column_left: float = 0.0  # the left edge of the column it stands in (pdf_reading_order)
    itemised: bool = False  # made by items_of: cut where items start, nothing to cut again
    x0: float = field(init=False)
    y0: float = field(init=False)
    x1: float = field(init=False)
    y1: float = field(init=False)
    # text and look() once worked out: the lines never change
    _text: str = field(init=False, compare=False, repr=False)
    _look: tuple[float, bool] | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._text, self._look = "", None
        first = self.lines[0]
        x0, y0, x1, y1 = first.x0, first.y0, first.x1, first.y1
        for line in self.lines:  # one pass: most blocks have a line or a few
            if line.x0 < x0:
                x0 = line.x0
            if line.y0 < y0:
                y0 = line.y0
            if line.x1 > x1:
                x1 = line.x1
            if line.y1 > y1:
                y1 = line.y1
        self.x0, self.y0, self.x1, self.y1 = x0, y0, x1, y1

    @property
    def text(self) -> str:
        if not self._text:  # a line's text is never empty
            self._text = "\n".join([line.text for line in self.lines])
        return self._text

    def look(self) -> tuple[float, bool]:
        """The font size with the most characters, and whether most characters are bold."""
        if self._look is None:
            self._look = self._looked()
        return self._look

    def _looked(self) -> tuple[float, bool]:
        sizes: dict[float, int] = {}
        bold = 0
        for line in self.lines:
            sizes[line.size] = sizes.get(line.size, 0) + line.chars
            bold += line.chars if line.bold else 0
        total = sum(sizes.values())
        return max(sizes, key=lambda s: sizes[s]), bold * 2 > total


def list_marker(text: str) -> tuple[str, bool] | None:
    """The list marker `text` starts with and whether it counts, or None."""
    found = _MARKER.match(text)
    if found is None:
        return None
    if found.group("bullet"):
        return found.group("bullet"), False
    return found.group("ordered"), True


def page_blocks(textpage: Any) -> list[Block]:
    """The page's text blocks as mupdf groups them, itemised (`items_of`)."""
    blocks: list[Block] = []
    for lines in page_lines(textpage):
        blocks += _items([Line(*line) for line in lines], 0.0)
    return blocks


def items_of(block: Block) -> list[Block]:
    """`block` split where a line starts a list item or changes size or weight (a heading run
    into its paragraph), a marker alone on its line joined to the text on its right; each
    part with its list marker, if it starts with one."""
    return _items(block.lines, block.column_left)


def _items(lines: list[Line], column_left: float) -> list[Block]:
    """items_of a block of these lines standing in a column that starts at `column_left`."""
    parts: list[list[Line]] = []
    for line in _joined_markers(lines):
        if parts and not _starts_block(parts[-1], line):
            parts[-1].append(line)
        else:
            parts.append([line])
    out = [Block(part, itemised=True) for part in parts]
    for part in out:
        part.column_left = column_left
        found = list_marker(part.lines[0].text)
        if found is not None:
            part.marker, part.ordered = found
    return out


def itemised(blocks: list[Block]) -> list[Block]:
    """Blocks in reading order, each itemised again (a block split across columns holds
    lines of several items), and a block that is only a list marker joined to the block
    beside it on the same line (mupdf may make the bullet a block of its own)."""
    out: list[Block] = []
    for block in blocks:
        last = out[-1] if out else None
        if (
            last is not None
            and len(last.lines) == 1
            and _MARKER.fullmatch(last.lines[0].text) is not None
            and _beside(last.lines[0], block.lines[0])
        ):
            out.pop()
            joined = Block([last.lines[0], *block.lines])
            joined.column_left = last.column_left
            block = joined
        # items_of gives the same parts again for one of its own (reading_order keeps a
        # block whole unless a gutter splits it, and a split part is new)
        out += [block] if block.itemised else items_of(block)
    return out


def _beside(marker: Line, line: Line) -> bool:
    return 0 < line.x0 - marker.x1 < HANGING and abs(
        (line.y0 + line.y1) - (marker.y0 + marker.y1)
    ) < (line.y1 - line.y0)


def _joined_markers(lines: list[Line]) -> list[Line]:
    """A line that is only a list marker, followed by a line beside it on the same baseline,
    becomes one line (mupdf splits a line at a wide gap, as after a bullet)."""
    out: list[Line] = []
    for line in lines:
        last = out[-1] if out else None
        if last is not None and _MARKER.fullmatch(last.text) is not None and _beside(last, line):
            out[-1] = Line(
                last.x0, min(last.y0, line.y0), line.x1, max(last.y1, line.y1),
                f"{last.text} {line.text}", line.size, line.bold, line.chars + last.chars,
            )  # fmt: skip
            continue
        out.append(line)
    return out


def _starts_block(current: list[Line], line: Line) -> bool:
    """Whether `line` starts a new block after the lines `current` of one: a list item, a
    caption's first line, a change of look, or a line back at a list item's marker after its
    hanging indent."""
    previous, first = current[-1], current[0]
    if list_marker(line.text) is not None or CAPTION_START.match(line.text):
        return True
    if abs(previous.size - line.size) > SIZE_STEP or previous.bold != line.bold:
        return True
    return (
        len(current) > 1
        and previous.x0 > first.x0 + 2.0
        and line.x0 < first.x0 + 1.0
        and list_marker(first.text) is not None
    )


def list_levels(blocks: list[Block]) -> None:
    """Each list item's nesting level: the rank of its indent (from its column's left edge)
    among the page's list items' indents, those closer than INDENT_STEP counting as one."""
    indents = sorted({round(b.x0 - b.column_left, 1) for b in blocks if b.marker})
    steps: list[float] = []
    for indent in indents:
        if not steps or indent - steps[-1] > INDENT_STEP:
            steps.append(indent)
    for block in blocks:
        if block.marker:
            indent = block.x0 - block.column_left
            block.level = 1 + sum(1 for step in steps[1:] if indent >= step - INDENT_STEP / 2)


def joined_paragraphs(blocks: list[Block]) -> list[Block]:
    """Blocks in reading order with the lines mupdf left apart joined into their paragraph (a
    content stream drawing columns line by line alternately gives a block per line): a block
    right under the previous one in the same column (closer than LINE_GAP of a line's height),
    starting at its left edge (a list item's hanging indent), in the same look, and not a list
    item or a caption itself. A list item takes the block's lines at its hanging indent; the
    lines after them (back at the marker's edge: the paragraph after the list) stay a block."""
    out: list[Block] = []
    for block in blocks:
        last = out[-1] if out else None
        if last is None or not _continues(last, block):
            out.append(block)
            continue
        taken = len(block.lines)
        if last.marker:
            edge = block.lines[0].x0
            taken = next(
                (i for i, line in enumerate(block.lines) if abs(line.x0 - edge) >= 2.0), taken
            )
        joined = Block(last.lines + block.lines[:taken], last.marker, last.ordered)
        joined.column_left = last.column_left
        out[-1] = joined
        if taken < len(block.lines):
            rest = Block(block.lines[taken:])
            rest.column_left = block.column_left
            out.append(rest)
    return out


LINE_GAP = 0.35
HANGING = 36.0  # points: the widest hanging indent of a list item's text after its marker


def _continues(last: Block, block: Block) -> bool:
    if block.marker or CAPTION_START.match(block.text):
        return False
    above, first = last.lines[-1], block.lines[0]
    height = first.y1 - first.y0
    # A paragraph goes on at its edge in its column; a line centred under a centred line (a
    # title's, which reading order may leave a column of its own) goes on too; a list item at
    # its hanging indent, right of its marker (under its second line, or within HANGING of the
    # marker under its first).
    centred = not last.marker and abs(first.x0 + first.x1 - above.x0 - above.x1) < 4.0
    if last.column_left != block.column_left and not centred:
        return False
    if not last.marker:
        aligned = abs(first.x0 - last.x0) < 2.0 or centred
    elif len(last.lines) > 1:
        aligned = abs(first.x0 - above.x0) < 2.0 and first.x0 > last.x0 + 2.0
    else:
        aligned = last.x0 + 2.0 < first.x0 < last.x0 + HANGING
    return (
        -height / 2 < first.y0 - above.y1 < LINE_GAP * height
        and aligned
        and abs(above.size - first.size) <= SIZE_STEP
        and above.bold == first.bold
    )


# A footnote's first line: its mark (a number, *, †, ‡, §, ¶ or superscript digits), then text.
NOTE_START = re.compile(
    r"^(?:\d{1,3}|[*\u2020\u2021\u00a7\u00b6]{1,3}|[\u00b9\u00b2\u00b3\u2070\u2074-\u2079]{1,3})"
    r"[.)]?[ \t]*(?=[^\W\d_])"
)
SMALLER = 0.5  # points under the page's body size: the small type of notes


def split_notes(blocks: list[Block]) -> list[Block]:
    """Blocks in small type (under the page's body size) whose lines start notes (a mark after
    a line that ends a sentence) cut into a block a note: footnotes set one under the other."""
    sizes: dict[float, int] = {}
    for block in blocks:
        for line in block.lines:
            sizes[line.size] = sizes.get(line.size, 0) + line.chars
    if not sizes:
        return blocks
    body = max(sizes, key=lambda size: sizes[size])
    out: list[Block] = []
    for block in blocks:
        lines = block.lines
        if len(lines) < 2 or block.look()[0] > body - SMALLER:
            out.append(block)
            continue
        parts: list[list[Line]] = [[lines[0]]]
        for before, line in pairwise(lines):
            if NOTE_START.match(line.text) and before.text.endswith((".", "!", "?", ":")):
                parts.append([line])
            else:
                parts[-1].append(line)
        for i, part in enumerate(parts):  # the first keeps the block's list marker, if any
            made = Block(part, itemised=True)
            if i == 0:
                made.marker, made.ordered, made.level = block.marker, block.ordered, block.level
            made.column_left = block.column_left
            out.append(made)
    return out
