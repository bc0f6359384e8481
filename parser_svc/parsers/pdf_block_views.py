"""The PDF blocks of a package as the document's structure pass reads them (pdf_headings.py,
pdf_footnotes.py): each block's text, box and look read once. Reading a field of a protobuf
message makes a new Python object each time (a block's text is copied out, its box is a
message of its own), and that pass reads every block's text and box several times: the views
cost a third of what those reads cost. Roles are still read from, and written to, the blocks
themselves (they change as the pass goes)."""

from __future__ import annotations

from typing import NamedTuple

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers.pdf_structure import Look


class BlockView(NamedTuple):
    block: rp.TextBlock
    text: str
    # The block's bbox as it reads (zeros when it has none, as an unset bbox reads).
    x0: float
    y0: float
    x1: float
    y1: float
    has_box: bool
    size: float
    bold: bool


class PageView(NamedTuple):
    page: rp.Page
    height: float
    blocks: list[BlockView]


def page_view(page: rp.Page, looks: list[Look]) -> PageView:
    """`page` with a view of each of its blocks (`looks`: theirs, block for block)."""
    views = []
    for block, (size, bold) in zip(page.blocks, looks, strict=True):
        has_box = block.HasField("bbox")
        if has_box:
            bbox = block.bbox
            box = (bbox.x0, bbox.y0, bbox.x1, bbox.y1)
        else:
            box = (0.0, 0.0, 0.0, 0.0)
        views.append(BlockView(block, block.text, *box, has_box, size, bold))
    return PageView(page, page.height, views)
