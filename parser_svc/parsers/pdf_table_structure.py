"""What a PDF page's tables become: the ruled ones (pdf_tables.py) and the borderless ones
(pdf_stream_tables.py) as `Table`s with their merged cells and header rows, and the captions
beside tables and images ("Table 2: ...", "Figure 3 ...", "Fig. 4") marked as such.

Header rows: what the rules or merged cells tell (a double rule, a two-level header, a rule
under a borderless table's first rows), else the leading rows set in bold when later rows are
not. Tables continued on the next page are joined per document (pdf_table_pages.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pymupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import safe
from parser_svc.parsers.pdf_lines import page_segments
from parser_svc.parsers.pdf_pass import Rules, rules_of
from parser_svc.parsers.pdf_stream_tables import GAP_EMS, find_stream_tables
from parser_svc.parsers.pdf_tables import FoundTable, find_tables, rule_segments

BOLD = 16  # a span's flags bit for bold type
MAX_BOLD_HEADER = 3
CAPTION_CHARS = 300
CAPTION_GAP = 24.0  # points between a caption and its table or figure, at most
OFF_PAGE = 2.0  # points a table's box may reach past the page's edge
TABLE_CAPTION = re.compile(r"^\s*Table\s+[0-9IVXivx]+[A-Za-z]?\b")
FIGURE_CAPTION = re.compile(r"^\s*(Figure|Fig\.)\s*[0-9IVXivx]+[A-Za-z]?\b")

Box = tuple[float, float, float, float]


def page_tables(page: pymupdf.Page, textpage: Any, rules: Rules | None) -> list[FoundTable]:
    """The page's ruled tables, then its borderless ones (top to bottom each)."""
    if rules is None:  # not read with the text: a second run of the page
        rules = rules_of(page.get_cdrawings())

    def words() -> Sequence[Sequence[Any]]:  # only when the rules form a grid
        found: Sequence[Sequence[Any]] = page.get_text("words", textpage=textpage)
        return found

    ruled = find_tables(rules, words) if rules[0] else []
    # A grid reaching off the page is a figure's drawing the page clips, not a table.
    ruled = [t for t in ruled if _on_page(t.bbox, page.rect)]
    horizontal: list[tuple[float, float, float]] | None = None

    def rule_ys(box: Box) -> list[float]:
        nonlocal horizontal
        if horizontal is None:
            horizontal = rule_segments(rules)[0] if rules[0] else []
        width = box[2] - box[0]
        return [
            y
            for y, lo, hi in horizontal
            if box[1] <= y <= box[3] and min(hi, box[2]) - max(lo, box[0]) >= 0.8 * width
        ]

    segments = page_segments(textpage, GAP_EMS)
    found = ruled + find_stream_tables(segments, rule_ys, [t.bbox for t in ruled])
    return sorted(found, key=lambda t: (t.bbox[1], t.bbox[0]))


def add_tables(
    page: pymupdf.Page, textpage: Any, rules: Rules | None, out: rp.Page, warnings: list[str]
) -> None:
    """Adds the page's tables to `out` and marks the captions beside its tables and images."""
    try:
        found = page_tables(page, textpage, rules)
        bold = _bold_rows(page, textpage, found) if found else []
    except Exception as err:
        warnings.append(f"page {page.number + 1}: table detection failed: {err}")
        return
    for table, bold_rows in zip(found, bold, strict=True):
        x0, y0, x1, y1 = table.bbox
        made = out.tables.add(bbox=rp.BoundingBox(x0=x0, y0=y0, x1=x1, y1=y1))
        for r, row in enumerate(table.rows):
            added = made.rows.add(cells=[safe(cell) for cell in row])
            for row0, column, row_span, col_span in table.spans:
                if row0 == r:
                    added.spans.add(column=column, row_span=row_span, col_span=col_span)
        made.header_rows = table.header_rows or bold_rows
    mark_captions(out)


def _bold_rows(page: pymupdf.Page, textpage: Any, found: list[FoundTable]) -> list[int]:
    """Per table: how many leading rows are set wholly in bold while a later row is not
    (at most MAX_BOLD_HEADER); 0 when that does not hold."""
    spans: list[tuple[float, bool]] = []  # (centre y, bold) of each span with text on the page
    for block in page.get_text("dict", textpage=textpage)["blocks"]:
        for line in block.get("lines", ()):
            for span in line["spans"]:
                if span["text"].strip():
                    y = (span["bbox"][1] + span["bbox"][3]) / 2
                    x = (span["bbox"][0] + span["bbox"][2]) / 2
                    heavy = bool(span["flags"] & BOLD) or "bold" in span["font"].lower()
                    spans.append((y, heavy) if _in_any(x, y, found) else (-1.0, heavy))
    out = []
    for table in found:
        kinds = []
        for top, bottom in table.row_bounds:
            inside = [heavy for y, heavy in spans if top <= y <= bottom]
            kinds.append(bool(inside) and all(inside))
        count = 0
        while count < len(kinds) and kinds[count]:
            count += 1
        out.append(count if 0 < count <= MAX_BOLD_HEADER and count < len(kinds) else 0)
    return out


def _on_page(box: Box, rect: pymupdf.Rect) -> bool:
    x0, y0, x1, y1 = float(rect.x0), float(rect.y0), float(rect.x1), float(rect.y1)
    return (
        box[0] >= x0 - OFF_PAGE
        and box[1] >= y0 - OFF_PAGE
        and box[2] <= x1 + OFF_PAGE
        and box[3] <= y1 + OFF_PAGE
    )


def _in_any(x: float, y: float, found: list[FoundTable]) -> bool:
    return any(t.bbox[0] <= x <= t.bbox[2] and t.bbox[1] <= y <= t.bbox[3] for t in found)


def _near(block: rp.TextBlock, box: rp.BoundingBox) -> bool:
    """Directly above or below `box`, across no further from it than its width (a caption
    set flush left above a centred table)."""
    b = block.bbox
    if max(b.x0, box.x0) - min(b.x1, box.x1) > box.x1 - box.x0:
        return False
    return -3 <= box.y0 - b.y1 <= CAPTION_GAP or -3 <= b.y0 - box.y1 <= CAPTION_GAP


def mark_captions(out: rp.Page) -> None:
    """A short block starting "Table N" next to a table, or "Figure N" / "Fig. N" next to an
    image, becomes a "caption" block and that table's or image's caption."""
    if not out.tables and not out.images:  # nothing to caption (most text pages)
        return
    for block in out.blocks:
        if block.role or not block.HasField("bbox") or len(block.text) > CAPTION_CHARS:
            continue
        targets: Sequence[rp.Table | rp.ImageRef]
        if TABLE_CAPTION.match(block.text):
            targets = out.tables
        elif FIGURE_CAPTION.match(block.text):
            targets = out.images
        else:
            continue
        for target in targets:
            if not target.caption and target.HasField("bbox") and _near(block, target.bbox):
                block.role = "caption"
                target.caption = " ".join(block.text.split())
                break
