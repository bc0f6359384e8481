"""What the text of a slide is, from the presentation's own markup (DrawingML).

- The title placeholder is one block, role "title" level 1; a subtitle placeholder is role
  "heading" level 2.
- Other text frames, paragraph by paragraph: a paragraph with a bullet is a "list_item" whose
  level is its a:pPr lvl + 1 and whose marker is its a:buChar (symbol fonts mapped, "•" when
  inherited) or, for a:buAutoNum, the number counted within the shape ("1.", "a)", "iv.").
  Body placeholders inherit bullets from the slide master unless a paragraph says a:buNone;
  other shapes have bullets only where the paragraph (or the shape's list style) sets one.
  Consecutive paragraphs without bullets are one body block.
- Tables: merged cells (gridSpan / rowSpan) as spans, the grid repeating the merged text; the
  table's firstRow flag as one header row.
"""

from __future__ import annotations

from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import make_table, safe
from parser_svc.parsers.list_markers import autonum_marker, bullet_marker

A_NS = "http://schemas.openxmlformats.org/drawingml/2006/main"
_A = f"{{{A_NS}}}"
MAX_LEVELS = 9


def _paragraph_text(p: Any) -> str:
    parts = []
    for node in p.iter(f"{_A}t", f"{_A}br"):
        parts.append((node.text or "") if node.tag == f"{_A}t" else "\n")
    return safe("".join(parts).strip())


def _bullet(ppr: Any, inherited: list[Any]) -> tuple[str, Any] | None:
    """("char", a:buChar) / ("auto", a:buAutoNum) / ("none", a:buNone) from the paragraph's pPr,
    then the list styles it inherits for its level (the shape's, its layout placeholder's);
    None when none says."""
    for props in (ppr, *inherited):
        if props is None:
            continue
        for tag, kind in (("buNone", "none"), ("buChar", "char"), ("buAutoNum", "auto")):
            node = props.find(_A + tag)
            if node is not None:
                return kind, node
    return None


def _list_style(tx_body: Any) -> Any:
    return None if tx_body is None else tx_body.find(_A + "lstStyle")


def _level(ppr: Any) -> int:
    try:
        return min(max(int(ppr.get("lvl", "0")), 0), MAX_LEVELS - 1) if ppr is not None else 0
    except ValueError:
        return 0


def frame_blocks(tx_body: Any, kind: str, layout: Any = None) -> list[rp.TextBlock]:
    """The blocks of a text body (p:txBody) of a shape of `kind`: "title", "subtitle", "body"
    (a body or content placeholder) or "" (any other shape). `layout`: the text body of the
    layout placeholder the shape inherits from, if any (its a:lstStyle may say a:buNone)."""
    paragraphs = tx_body.findall(_A + "p")
    if kind in ("title", "subtitle"):
        text = "\n".join(t for t in (_paragraph_text(p) for p in paragraphs) if t)
        if not text:
            return []
        role, level = ("title", 1) if kind == "title" else ("heading", 2)
        return [rp.TextBlock(text=text, source="text", role=role, level=level)]
    list_styles = [
        style for style in (tx_body.find(_A + "lstStyle"), _list_style(layout)) if style is not None
    ]
    blocks: list[rp.TextBlock] = []
    body: list[str] = []
    counters = [0] * MAX_LEVELS

    def flush() -> None:
        if body:
            blocks.append(rp.TextBlock(text="\n".join(body), source="text"))
            body.clear()

    for p in paragraphs:
        text = _paragraph_text(p)
        if not text:
            continue
        ppr = p.find(_A + "pPr")
        level = _level(ppr)
        inherited = [style.find(f"{_A}lvl{level + 1}pPr") for style in list_styles]
        bullet = _bullet(ppr, inherited)
        if bullet is None and kind == "body":
            bullet = ("char", None)
        if bullet is None or bullet[0] == "none":
            body.append(text)
            counters = [0] * MAX_LEVELS
            continue
        flush()
        block = rp.TextBlock(text=text, source="text", role="list_item", level=level + 1)
        counters[level + 1 :] = [0] * (MAX_LEVELS - level - 1)
        node = bullet[1]
        if bullet[0] == "auto":
            try:
                start = int(node.get("startAt", "1"))
            except ValueError:
                start = 1
            counters[level] = counters[level] + 1 if counters[level] else start
            block.marker = autonum_marker(counters[level], node.get("type", "arabicPeriod"))
            block.ordered = True
        else:
            counters[level] = 0
            block.marker = bullet_marker("" if node is None else node.get("char", ""))
        blocks.append(block)
    flush()
    return blocks


def slide_table(table: Any, bbox: rp.BoundingBox | None) -> rp.Table:
    """A python-pptx table as a full grid (merged cells repeat the merge origin's text) with
    its spans and header row."""
    height, width = len(table.rows), len(table.columns)
    grid = [[safe(table.cell(r, c).text.strip()) for c in range(width)] for r in range(height)]
    spans: list[list[rp.CellSpan]] = [[] for _ in range(height)]
    for r in range(height):
        for c in range(width):
            cell = table.cell(r, c)
            if not cell.is_merge_origin:
                continue
            rows = min(max(cell.span_height, 1), height - r)  # a span past the grid is cut
            cols = min(max(cell.span_width, 1), width - c)
            spans[r].append(rp.CellSpan(column=c, row_span=rows, col_span=cols))
            for rr in range(r, r + rows):
                for cc in range(c, c + cols):
                    grid[rr][cc] = grid[r][c]
    out = make_table(grid, bbox)
    for row, row_spans in zip(out.rows, spans, strict=True):
        row.spans.extend(row_spans)
    out.header_rows = 1 if table.first_row else 0
    return out
