"""A PDF page's structure, where its blocks are built (pdf_pages.py): blocks split where a list
item or a heading starts (pdf_blocks.py), in reading order (pdf_reading_order.py), list items
with their marker and level; and each block's look (dominant font size, bold) kept for the
document's pass once every page is read (pdf_headings.py: headings, title, page furniture)."""

from __future__ import annotations

from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import safe
from parser_svc.parsers.pdf_blocks import (
    itemised,
    joined_paragraphs,
    list_levels,
    page_blocks,
    split_notes,
)
from parser_svc.parsers.pdf_reading_order import reading_order

# A block's dominant font size and whether it is bold.
Look = tuple[float, bool]


def add_page_blocks(
    textpage: Any, out: rp.Page, size: tuple[float, float] | None = None
) -> tuple[list[str], list[Look]]:
    """Adds the page's text blocks to `out` in reading order, list items marked; their texts
    and looks, block for block. `size`: the text page's width and height, when the caller has
    them (`textpage.rect` costs ~11 us)."""
    if size is None:
        rect = textpage.rect
        size = rect.width, rect.height
    ordered = reading_order(page_blocks(textpage), *size)
    blocks = split_notes(joined_paragraphs(itemised(ordered)))
    list_levels(blocks)
    texts: list[str] = []
    looks: list[Look] = []
    add = out.blocks.add  # built in place: append() copies a message built apart (4x slower)
    for block in blocks:
        clean = safe(block.text)
        texts.append(clean)
        made = add(text=clean, source="text")
        if block.marker:
            made.role, made.marker = "list_item", block.marker
            made.ordered, made.level = block.ordered, block.level
        bbox = made.bbox
        bbox.x0, bbox.y0, bbox.x1, bbox.y1 = block.x0, block.y0, block.x1, block.y1
        looks.append(block.look())
    return texts, looks
