"""A PDF's footnotes, marked once every page is read (pdf_headings.mark_structure, after the
page furniture): a block in smaller type than the body that starts with a note's mark (a number
or *, †, ‡, §, ¶, plain or superscript: pdf_blocks.NOTE_START), in the lower half of its page,
under body text and with none of it reaching below its top (over or under it), becomes role
"footnote", its `marker` the mark: what ties it to the mark in the text above. A small list
item so marked (`*` is a bullet too) is a note there.
"""

from __future__ import annotations

import re

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers.pdf_blocks import NOTE_START, SMALLER
from parser_svc.parsers.pdf_structure import Look

_MARK = re.compile(r"^[^\s.)]+")  # the mark of a block NOTE_START matches


def mark_footnotes(pages: list[rp.Page], looks: dict[int, list[Look]], body: float) -> None:
    for page in pages:
        blocks = list(zip(page.blocks, looks[page.number], strict=True))
        text = [b for b, (size, _bold) in blocks if b.role == "" and abs(size - body) <= SMALLER]
        for block, (size, _bold) in blocks:
            if block.role not in ("", "list_item") or size > body - SMALLER:
                continue
            if not block.HasField("bbox") or block.bbox.y0 < page.height / 2:
                continue
            found = NOTE_START.match(block.text)
            if found is None or not _under_text(block, text):
                continue
            mark = _MARK.match(found.group())
            block.role, block.marker = "footnote", mark.group() if mark else ""
            block.ordered, block.level = False, 0


def _under_text(note: rp.TextBlock, text: list[rp.TextBlock]) -> bool:
    """Whether body text stands over `note` and none of the body text over or under it
    reaches below its top."""
    over = [b for b in text if b.bbox.x0 < note.bbox.x1 and b.bbox.x1 > note.bbox.x0]
    return bool(over) and all(b.bbox.y1 <= note.bbox.y0 + 1 for b in over)
