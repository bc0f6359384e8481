"""A PDF's footnotes, marked once every page is read (pdf_headings.mark_structure, after the
page furniture): a block in smaller type than the body that starts with a note's mark (a number
or *, †, ‡, §, ¶, plain or superscript: pdf_blocks.NOTE_START), in the lower half of its page,
under body text and with none of it reaching below its top (over or under it), becomes role
"footnote", its `marker` the mark: what ties it to the mark in the text above. A small list
item so marked (`*` is a bullet too) is a note there.
"""

from __future__ import annotations

import re

from parser_svc.parsers.pdf_block_views import BlockView, PageView
from parser_svc.parsers.pdf_blocks import NOTE_START, SMALLER

_MARK = re.compile(r"^[^\s.)]+")  # the mark of a block NOTE_START matches


def mark_footnotes(pages: list[PageView], body: float) -> None:
    for page in pages:
        text = [b for b in page.blocks if b.block.role == "" and abs(b.size - body) <= SMALLER]
        for seen in page.blocks:
            block = seen.block
            if block.role not in ("", "list_item") or seen.size > body - SMALLER:
                continue
            if not seen.has_box or seen.y0 < page.height / 2:
                continue
            found = NOTE_START.match(seen.text)
            if found is None or not _under_text(seen, text):
                continue
            mark = _MARK.match(found.group())
            block.role, block.marker = "footnote", mark.group() if mark else ""
            block.ordered, block.level = False, 0


def _under_text(note: BlockView, text: list[BlockView]) -> bool:
    """Whether body text stands over `note` and none of the body text over or under it
    reaches below its top."""
    over = [b for b in text if b.x0 < note.x1 and b.x1 > note.x0]
    return bool(over) and all(b.y1 <= note.y0 + 1 for b in over)
