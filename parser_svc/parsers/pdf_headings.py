"""A PDF's headings, title and page furniture, marked once every page is read (pdf.py, after
the ranges read by other processes are joined): roles and levels are set on the existing text
blocks; no text changes.

- Page furniture: blocks in the top or bottom FURNITURE_BAND of the page whose text, digits
  aside, repeats on at least half the pages (2 at least) become "header" / "footer"; so does a
  page number there with nothing beyond it (alone, or on a line of its own beside a section's
  running title), and in a one-page document a small one-line head (or foot with a number). A
  lone page number further in (within NUMBER_BAND), below (above) every other block of its
  page, is furniture too when it stands at one height on as many pages.
- Body size: the font size with the most characters (furniture aside).
- Headings: blocks of one or two lines larger than the body, or bold at the body size, short
  and not ending in a period (up to MAX_HEADING_LINES lines when larger: a heading wrapped in
  a narrow column). Levels: the headings' (size, bold) classes, largest first (bold before
  regular at one size); within a class, numbering ("2.", "2.1", "2.1.3") nests deeper.
  The document outline, where there is one, wins for the titles it names.
- Title: the largest text near the top of page 1, when larger than the body: "title", level 1.
- Footnotes (pdf_footnotes.py): small type under the body text, starting with a note's mark.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers.pdf_block_views import BlockView, PageView, page_view
from parser_svc.parsers.pdf_footnotes import mark_footnotes
from parser_svc.parsers.pdf_structure import Look

FURNITURE_BAND = 0.1  # of the page height, top and bottom
NUMBER_BAND = 0.25  # a page number apart from the text stands in this share, top or bottom
TITLE_BAND = 0.35  # the title stands in this top share of page 1
BIGGER = 0.5  # points above the body size that make a heading
MAX_HEADING_CHARS = 120
MAX_HEADING_LINES = 4  # a larger heading wrapped in a narrow column; 2 otherwise
MAX_LEVEL = 6
_PAGE_NUMBER = re.compile(
    r"^(?:page\s+)?[-\u2013(\[]?\s*(?:\d{1,4}|[ivxlc]{1,7})\s*[-\u2013)\]]?(?:\s*(?:of|/)\s*\d{1,4})?$",
    re.IGNORECASE,
)
_NUMBERING = re.compile(r"^(\d{1,3}(?:\.\d{1,3}){0,5})\.?\s+\S")
_LETTER = re.compile(r"[^\W\d_]")


def mark_structure(
    package: rp.ReadingPackage, looks: dict[int, list[Look]], outline: Sequence[Any]
) -> None:
    """Sets furniture, title and heading roles and levels on the package's PDF blocks read
    from their text (`looks`: page number -> each block's look)."""
    pages = [p for p in package.pages if len(looks.get(p.number, ())) == len(p.blocks) > 0]
    if not pages:
        return
    views = [page_view(page, looks[page.number]) for page in pages]
    sizes: Counter[float] = Counter()
    for view in views:
        for seen in view.blocks:
            sizes[seen.size] += len(seen.text)
    body = sizes.most_common(1)[0][0]
    _furniture(views, body)
    mark_footnotes(views, body)
    sized = [s for view in views for s in view.blocks if s.block.role not in ("header", "footer")]
    _headings([s for s in sized if _is_heading(s, body)])
    _title(pages[0], looks[pages[0].number], body)
    _outline(package, outline)


def _furniture(pages: list[PageView], body: float) -> None:
    seen: dict[tuple[str, str], set[int]] = {}
    zoned: list[tuple[PageView, BlockView, str, str, bool]] = []
    for view in pages:
        number = view.page.number
        for block in view.blocks:
            zone = _zone(view, block)
            if zone and block.block.role in ("", "list_item"):
                key = re.sub(r"\d+", "#", " ".join(block.text.lower().split()))
                seen.setdefault((zone, key), set()).add(number)
                # One page shows no repetition: a small one-line running head, or foot with a
                # number (not a footnote: those start with their number or mark), is
                # furniture there.
                small = block.size < body - BIGGER and "\n" not in block.text
                foot = "#" in key and not key.startswith(("#", "*", "\u2020", "\u2021"))
                alone = len(pages) == 1 and small and (zone == "header" or foot)
                zoned.append((view, block, zone, key, alone))
    least = max(2, (len(pages) + 1) // 2)
    for view, block, zone, key, alone in zoned:
        numbered = _numbered(block.text) and _outermost(view, block, zone)
        if numbered or alone or len(seen[(zone, key)]) >= least:
            _set_role(block.block, zone)
    _edge_numbers(pages, least)


def _set_role(block: rp.TextBlock, role: str) -> None:
    block.role = role
    block.marker, block.ordered, block.level = "", False, 0


def _numbered(text: str) -> bool:
    """A lone page number, or one on a line of its own beside one line of running head or
    foot (a section's title, which changes from page to page: no full stop)."""
    lines = [" ".join(line.split()) for line in text.strip().splitlines()]
    if len(lines) == 2 and _PAGE_NUMBER.match(lines[1]):
        lines.reverse()
    if not lines or _PAGE_NUMBER.match(lines[0]) is None:
        return False
    if len(lines) == 1:
        return True
    other = lines[1]
    return len(lines) == 2 and len(other) <= MAX_HEADING_CHARS and not other.endswith(".")


def _outermost(page: PageView, block: BlockView, zone: str) -> bool:
    """Nothing on the block's page stands above it (a head) or below it (a foot): a number
    under a running head is a formula's or a figure's."""
    if zone == "header":
        return all(b.y1 > block.y0 for b in page.blocks if b is not block)
    return all(b.y0 < block.y1 for b in page.blocks if b is not block)


def _edge_numbers(pages: list[PageView], least: int) -> None:
    """Page numbers set under (over) the text block further in than FURNITURE_BAND (LaTeX's
    plain style: a sixth of the page up): a lone number below (above) everything else on its
    page, within NUMBER_BAND, at the same height on `least` pages or more."""
    found: dict[tuple[str, int], list[rp.TextBlock]] = {}
    for page in pages:
        body = [b for b in page.blocks if b.has_box and b.block.role in ("", "list_item")]
        if len(body) < 2 or page.height <= 0:
            continue
        low = max(body, key=lambda b: b.y0)
        high = min(body, key=lambda b: b.y1)
        below = all(low.y0 >= b.y1 for b in body if b is not low)
        above = all(high.y1 <= b.y0 for b in body if b is not high)
        edges = [
            ("footer", low, below and low.y0 >= page.height * (1 - NUMBER_BAND)),
            ("header", high, above and high.y1 <= page.height * NUMBER_BAND),
        ]
        for zone, edge, apart in edges:
            if apart and _PAGE_NUMBER.match(" ".join(edge.text.split())):
                found.setdefault((zone, round(edge.y0)), []).append(edge.block)
    for (zone, _y), blocks in found.items():
        if len(blocks) >= least:
            for block in blocks:
                _set_role(block, zone)


def _zone(page: PageView, block: BlockView) -> str:
    if page.height <= 0 or not block.has_box:
        return ""
    if block.y1 <= page.height * FURNITURE_BAND:
        return "header"
    if block.y0 >= page.height * (1 - FURNITURE_BAND):
        return "footer"
    return ""


def _is_heading(seen: BlockView, body: float) -> bool:
    block, size, bold = seen.block, seen.size, seen.bold
    text = seen.text.strip()
    lines = seen.text.count("\n") + 1
    if block.role not in ("", "list_item") or lines > MAX_HEADING_LINES:
        return False
    if lines > 2 and (size <= body + BIGGER or text.endswith((".", ",", ";", ":"))):
        return False  # three lines or more: a larger heading wrapped in a narrow column
    if len(text) > MAX_HEADING_CHARS or not _LETTER.search(text):
        return False
    if block.role == "list_item" and (not block.ordered or _NUMBERING.match(text) is None):
        return size > body + BIGGER  # a list item unless it stands out by its size
    if size > body + BIGGER:
        return True
    return bold and size >= body - BIGGER and not text.endswith((".", ",", ";", ":"))


def _headings(found: list[BlockView]) -> None:
    classes = sorted(
        {(round(b.size * 2) / 2, b.bold) for b in found}, key=lambda c: (-c[0], not c[1])
    )
    rank = {c: i + 1 for i, c in enumerate(classes)}
    depths: dict[tuple[float, bool], int] = {}
    for seen in found:
        depth = _depth(seen.text)
        if depth:
            key = (round(seen.size * 2) / 2, seen.bold)
            depths[key] = min(depths.get(key, depth), depth)
    for seen in found:
        key = (round(seen.size * 2) / 2, seen.bold)
        depth = _depth(seen.text)
        deeper = depth - depths[key] if depth and key in depths else 0
        block = seen.block
        block.role = "heading"
        block.level = min(MAX_LEVEL, rank[key] + deeper)
        block.marker, block.ordered = "", False


def _depth(text: str) -> int:
    numbered = _NUMBERING.match(text.strip())
    return numbered.group(1).count(".") + 1 if numbered else 0


def _title(page: rp.Page, looks: list[Look], body: float) -> None:
    if page.number != 1:
        return
    candidates = [
        (look[0], index)
        for index, (block, look) in enumerate(zip(page.blocks, looks, strict=True))
        if block.role in ("", "heading") and block.bbox.y0 <= page.height * TITLE_BAND
    ]
    if not candidates:
        return
    size, index = max(candidates, key=lambda c: (c[0], -c[1]))
    largest = max(look[0] for look in looks)
    if size > body + BIGGER and size >= largest:
        block = page.blocks[index]
        block.role, block.level = "title", 1


def _outline(package: rp.ReadingPackage, outline: Sequence[Any]) -> None:
    """The outline's entries (level, title, page number) name headings on their pages."""
    for entry in outline:
        if len(entry) < 3 or not 1 <= int(entry[2]) <= len(package.pages):
            continue
        level, title, number = int(entry[0]), " ".join(str(entry[1]).split()).lower(), entry[2]
        page = next((p for p in package.pages if p.number == number), None)
        if page is None or not title:
            continue
        for block in page.blocks:
            if block.role in ("", "heading", "title", "list_item") and (
                " ".join(block.text.split()).lower() == title
            ):
                if block.role != "title":
                    block.role = "heading"
                block.level = max(1, min(MAX_LEVEL, level))
                block.marker, block.ordered = "", False
                break
