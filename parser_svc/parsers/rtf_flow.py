"""Where an RTF document's text goes: paragraphs (with the role, level and list marker their
properties give) and tables (\\trowd ... \\cell ... \\row), for the body and for each header,
footer and note.

- Headings: \\outlinelevelN on the paragraph or its style (level N + 1; 9 is body text), or a
  style named "heading N" / "title" (through \\sbasedon).
- Lists: the marker Word writes in \\listtext (or the older \\pntext); the level is \\ilvl + 1.
- Tables: a row's cells end at their \\cellx boundaries; the boundaries of all rows make the
  grid, so a wide cell spans the columns it covers. \\clmgf/\\clmrg (horizontal) and
  \\clvmgf/\\clvmrg (vertical) merges become spans, the merged text repeated in every covered
  cell; leading rows with \\trhdr are header rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import TableBudget, safe, table_text
from parser_svc.parsers.list_markers import bullet_marker

# Destinations whose text is a flow of its own, and its role.
FLOWS = {
    "header": "header",
    "headerl": "header",
    "headerr": "header",
    "headerf": "header",
    "footer": "footer",
    "footerl": "footer",
    "footerr": "footer",
    "footerf": "footer",
    "footnote": "footnote",
    "annotation": "comment",
}
ORDER = {"header": 0, "": 1, "footnote": 2, "endnote": 3, "comment": 4, "footer": 5}
MAX_GRID = 1000  # columns of one table; more is damage
SNAP_TWIPS = 30  # cell boundaries closer than this (1.5 pt) are one column boundary
_ORDERED = re.compile(r"\(?(\d+(\.\d+)*|[a-zA-Z]|[ivxlcdmIVXLCDM]+)[.)]\)?|\d+(\.\d+)*")


@dataclass(slots=True)
class Para:
    """Paragraph properties, reset by \\pard."""

    style: int = 0
    outline: int | None = None
    intbl: bool = False
    listed: bool = False
    ilvl: int = 0


@dataclass(slots=True)
class CellDef:
    right: int
    hmerge: str = ""  # "first", "next" or ""
    vmerge: str = ""


@dataclass
class Row:
    cells: list[str]
    defs: list[CellDef]
    header: bool


@dataclass
class Flow:
    """One stream of paragraphs: the body, a header or footer, a footnote."""

    role: str
    headings: dict[int, tuple[str, int]]
    budget: TableBudget
    parts: list[str] = field(default_factory=list)
    para: Para = field(default_factory=Para)
    marker: str | None = None
    blocks: list[rp.TextBlock] = field(default_factory=list)
    tables: list[rp.Table] = field(default_factory=list)
    # The table being read: its finished rows, the current row's cells and cell text, and the
    # cell definitions (\cellx and the merge flags before it) of the current row.
    rows: list[Row] = field(default_factory=list)
    cells: list[str] = field(default_factory=list)
    cell_text: list[str] = field(default_factory=list)
    defs: list[CellDef] = field(default_factory=list)
    pending: CellDef = field(default_factory=lambda: CellDef(0))
    header_row: bool = False

    def text(self, text: str) -> None:
        self.parts.append(text)

    def paragraph(self) -> None:
        """\\par: ends the paragraph (inside a table, a line of the cell)."""
        text = safe("".join(self.parts).strip())
        self.parts.clear()
        if self.para.intbl:
            self.cell_text.append(text)
            return
        self.end_table()
        marker, self.marker = self.marker, None
        if not text:
            return
        block = rp.TextBlock(text=text, source="text", role=self.role)
        if not self.role:
            self._kind(block, marker)
        self.blocks.append(block)

    def _kind(self, block: rp.TextBlock, marker: str | None) -> None:
        role, level = self.headings.get(self.para.style, ("", 0))
        if self.para.outline is not None:
            role, level = ("heading", self.para.outline + 1) if self.para.outline < 9 else ("", 0)
        if role:
            block.role, block.level = role, min(max(level, 1), 6)
        elif marker is not None or self.para.listed:
            mark = (marker or "").strip()
            block.role, block.level = "list_item", min(self.para.ilvl, 8) + 1
            block.ordered = bool(mark) and _ORDERED.fullmatch(mark) is not None
            block.marker = mark if block.ordered else bullet_marker(mark)

    def cell(self) -> None:
        self.cell_text.append("".join(self.parts).strip())
        self.parts.clear()
        self.cells.append(safe("\n".join(t for t in self.cell_text if t)))
        self.cell_text.clear()

    def cellx(self, right: int) -> None:
        self.pending.right = right
        self.defs.append(self.pending)
        self.pending = CellDef(0)

    def trowd(self) -> None:
        self.defs, self.pending, self.header_row = [], CellDef(0), False

    def row(self) -> None:
        if self.parts or self.cell_text:  # text after the last \cell
            self.cell()
        self.budget.spend(max(len(self.cells), len(self.defs)))
        self.rows.append(Row(self.cells, list(self.defs), self.header_row))
        self.cells = []

    def end_table(self) -> None:
        if self.cells:
            self.row()
        if not self.rows:
            return
        rows, self.rows = self.rows, []
        table = build_table(rows)
        texts = [list(row.cells) for row in table.rows]
        has_text = any(any(row) for row in texts)
        if self.role:  # a table in a header, footer or note: its text
            if has_text:
                self.blocks.append(
                    rp.TextBlock(text=table_text(texts), source="text", role=self.role)
                )
            return
        self.tables.append(table)
        if has_text:
            self.blocks.append(rp.TextBlock(text=table_text(texts), source="text", role="table"))

    def finish(self) -> None:
        if self.parts:
            self.paragraph()
        self.end_table()

    def comment(self, author: str) -> None:
        """A comment (\\annotation): its paragraphs as one block, after its author's name."""
        text = "\n".join(b.text for b in self.blocks)
        self.blocks = []
        if text:
            text = f"{author}: {text}" if author else text
            self.blocks.append(rp.TextBlock(text=text, source="text", role="comment"))


def _columns(rights: set[int]) -> dict[int, int]:
    """Each cell boundary's grid column: boundaries closer than SNAP_TWIPS are one (rows of
    one table written a few twips apart)."""
    index: dict[int, int] = {}
    column, first = -1, None
    for right in sorted(rights):
        if first is None or right - first > SNAP_TWIPS:
            column, first = column + 1, right
        index[right] = column
    return index


def _placements(rows: list[Row]) -> tuple[int, list[list[tuple[int, int]]]]:
    """The grid's width and each row's cells as (first column, columns covered)."""
    usable = all(len(r.defs) == len(r.cells) for r in rows)
    index = _columns({d.right for r in rows for d in r.defs}) if usable else {}
    if not usable or len(set(index.values())) > MAX_GRID:
        width = max(len(r.cells) for r in rows)
        return width, [[(i, 1) for i in range(len(r.cells))] for r in rows]
    out: list[list[tuple[int, int]]] = []
    width = 0
    for r in rows:
        start, placed = 0, []
        for d in r.defs:  # boundaries out of order (damage): one column each
            end = max(index[d.right], start)
            placed.append((start, end - start + 1))
            start = end + 1
        out.append(placed)
        width = max(width, start)
    return width, out


def build_table(rows: list[Row]) -> rp.Table:
    """A full grid from the rows read, merged cells repeating their text."""
    width, placed = _placements(rows)
    grid = [[""] * width for _ in rows]
    origin: list[dict[int, list[int]]] = [{} for _ in rows]  # column -> [row span, col span]
    for r, row in enumerate(rows):
        last: list[int] | None = None
        for i, (col, span) in enumerate(placed[r]):
            d = row.defs[i] if i < len(row.defs) else CellDef(0)
            if d.hmerge == "next" and last is not None:
                last[1] += span
                continue
            if d.vmerge == "next" and r > 0:
                above = next((o for c, o in origin[r - 1].items() if c == col), None)
                if above is not None:
                    above[0] += 1
                    origin[r][col] = above
                    continue
            last = [1, span]
            origin[r][col] = last
            grid[r][col] = row.cells[i] if i < len(row.cells) else ""
    table = rp.Table()
    for r, cols in enumerate(origin):
        out = table.rows.add()
        for col, (rspan, cspan) in sorted(cols.items()):
            if r > 0 and origin[r - 1].get(col) is cols[col]:
                continue  # a covered cell of a vertical merge
            for rr in range(r, min(r + rspan, len(rows))):
                for cc in range(col, min(col + cspan, width)):
                    grid[rr][cc] = grid[r][col]
            if rspan > 1 or cspan > 1:
                out.spans.add(column=col, row_span=rspan, col_span=cspan)
        out.cells.extend(grid[r])
    header = 0
    for row in rows:
        if not row.header:
            break
        header += 1
    table.header_rows = header
    return table


def flow_word(flow: Flow, word: str, param: int | None) -> None:
    """Paragraph and table control words of a flow."""
    if word in ("par", "sect", "page"):
        flow.paragraph()
    elif word == "pard":
        flow.para = Para()
    elif word == "s" and param is not None:
        flow.para.style = param
    elif word == "outlinelevel" and param is not None:
        flow.para.outline = max(param, 0)
    elif word == "intbl":
        flow.para.intbl = True
    elif word == "ls":
        flow.para.listed = True
    elif word == "ilvl" and param is not None:
        flow.para.ilvl = max(param, 0)
    elif word == "cell":
        flow.cell()
    elif word == "row":
        flow.row()
    elif word == "trowd":
        flow.trowd()
    elif word == "cellx" and param is not None:
        flow.cellx(param)
    elif word == "trhdr":
        flow.header_row = True
    elif word == "ftnalt":
        flow.role = "endnote" if flow.role == "footnote" else flow.role
    elif word in ("clmgf", "clmrg", "clvmgf", "clvmrg"):
        _merge(flow.pending, word)


def _merge(pending: CellDef, word: str) -> None:
    value = "first" if word.endswith("f") else "next"
    if word.startswith("clv"):
        pending.vmerge = value
    else:
        pending.hmerge = value
