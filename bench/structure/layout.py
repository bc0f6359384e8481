"""A page writer on reportlab's canvas that records the truth as it draws (bench.structure.truth).

Text flows down 1-3 columns; a paragraph, a list item and a table row never split across columns,
so each stays whole by construction. Every drawing call is kept per page with the stream it
belongs to (a column, the page furniture, the full width), and `save` writes each page in the
chosen order: `natural` (header, the columns in reading order, footnotes, footer) or
`interleaved` (the footer first, then the columns' lines alternately: the content stream's order
is not the reading order)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reportlab.lib.pagesizes import letter
from reportlab.pdfbase.pdfmetrics import stringWidth
from reportlab.pdfgen.canvas import Canvas

from bench.structure.truth import TableSpec, Truth

PAGE_W, PAGE_H = letter
MARGIN = 60.0
GAP = 24.0
BODY_TOP = PAGE_H - 80
BODY_BOTTOM = 70.0
FONT, BOLD = "Helvetica", "Helvetica-Bold"
SIZE, LEADING = 10.0, 13.0
HEADING_SIZE = {1: 20.0, 2: 15.0, 3: 12.5, 4: 11.0}
ROW_H = 16.0
FURNITURE, FULL = -1, 99  # streams besides the columns 0..n-1


@dataclass
class Op:
    stream: int
    kind: str  # text | line | rect
    args: tuple[Any, ...]


@dataclass
class Page:
    ops: list[Op] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def wrap(text: str, font: str, size: float, width: float) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in text.split():
        trial = f"{line} {word}".strip()
        if line and stringWidth(trial, font, size) > width:
            lines.append(line)
            line = word
        else:
            line = trial
    return [*lines, line] if line else lines


class Writer:
    def __init__(
        self, name: str, kind: str, columns: int = 1, order: str = "natural",
        header: str = "", footer: str = "Page {page}",
    ) -> None:  # fmt: skip
        self.truth = Truth(name, kind)
        self.columns, self.order, self.header, self.footer = columns, order, header, footer
        self.pages: list[Page] = []
        self.column, self.y, self.top, self.bottom = 0, BODY_TOP, BODY_TOP, BODY_BOTTOM
        self.new_page()

    # -- the flow
    @property
    def width(self) -> float:
        return float((PAGE_W - 2 * MARGIN - (self.columns - 1) * GAP) / self.columns)

    @property
    def x0(self) -> float:
        return MARGIN + self.column * (self.width + GAP)

    def new_page(self) -> None:
        self.pages.append(Page())
        self.column, self.y, self.top, self.bottom = 0, BODY_TOP, BODY_TOP, BODY_BOTTOM

    def next_column(self) -> None:
        if self.column + 1 < self.columns:
            self.column += 1
            self.y = self.top
        else:
            self.new_page()

    def room(self, height: float) -> None:
        if self.y - height < self.bottom and self.y < self.top:
            self.next_column()

    def draw(self, kind: str, *args: Any, stream: int | None = None) -> None:
        self.pages[-1].ops.append(Op(self.column if stream is None else stream, kind, args))

    def lines(self, text: str, font: str, size: float, leading: float, indent: float = 0) -> None:
        for line in wrap(text, font, size, self.width - indent):
            self.y -= leading
            self.draw("text", self.x0 + indent, self.y, line, font, size)

    # -- what a document holds
    def banner(self, text: str, level: int = 1) -> None:
        """A heading across all columns at the top of the page; the columns start below it."""
        size = HEADING_SIZE[level]
        self.y -= size * 1.3
        self.draw("text", MARGIN, self.y, text, BOLD, size, stream=FULL)
        self.y -= 14
        self.top = self.y
        self.truth.headings.append({"text": text, "level": level})

    def heading(self, text: str, level: int) -> None:
        size = HEADING_SIZE[level]
        height = len(wrap(text, BOLD, size, self.width)) * size * 1.25 + 3 * LEADING
        self.room(height + size)
        if self.y < self.top:
            self.y -= size * 0.7
        self.lines(text, BOLD, size, size * 1.25)
        self.y -= 5
        self.truth.headings.append({"text": text, "level": level})

    def paragraph(self, text: str, ordered: bool = True) -> None:
        self.room(len(wrap(text, FONT, SIZE, self.width)) * LEADING)
        self.lines(text, FONT, SIZE, LEADING)
        self.y -= 7
        self.truth.paragraphs.append({"text": text, "ordered": ordered})

    def list_item(self, text: str, level: int, marker: str, ordered: bool) -> None:
        indent = 18.0 * (level - 1)
        self.room(len(wrap(text, FONT, SIZE, self.width - indent - 16)) * LEADING)
        self.draw("text", self.x0 + indent, self.y - LEADING, marker, FONT, SIZE)
        self.lines(text, FONT, SIZE, LEADING, indent + 16)
        self.y -= 4
        item = {"text": text, "level": level, "marker": marker, "ordered": ordered}
        self.truth.list_items.append(item)

    def footnote(self, text: str) -> None:
        """A note at the foot of this page (above the footer), in small type."""
        page = self.pages[-1]
        if self.y - 12 < self.bottom + 11:
            return
        page.notes.append(text)
        self.bottom += 11
        self.truth.paragraphs.append({"text": text, "ordered": False})

    def sidebar(self, title: str, texts: list[str]) -> None:
        """A shaded box in the flow: a bold label, then paragraphs (not in the reading order)."""
        inner = self.width - 16
        height = 22 + sum(len(wrap(t, FONT, SIZE, inner)) * LEADING + 6 for t in texts)
        self.room(height + 8)
        self.y -= 6
        self.draw("rect", self.x0, self.y - height, self.width, height)
        self.y -= 16
        self.draw("text", self.x0 + 8, self.y, title, BOLD, SIZE)
        self.truth.labels.append(title)
        for text in texts:
            self.lines(text, FONT, SIZE, LEADING, 8)
            self.y -= 6
            self.truth.paragraphs.append({"text": text, "ordered": False})
        self.y -= 14

    def table(self, spec: TableSpec) -> None:
        widths = [self.width / spec.cols] * spec.cols
        self.room((spec.header_rows + min(3, spec.rows - spec.header_rows)) * ROW_H)
        self.y -= 4
        for row in range(spec.rows):
            if row > spec.header_rows and self.y - ROW_H < self.bottom:
                self._close(spec, widths)  # a long table goes on, its header rows repeated
                self.next_column()
                self.y -= 4
                for again in range(spec.header_rows):
                    self._table_row(spec, again, widths)
            self._table_row(spec, row, widths)
        self._close(spec, widths)
        self.y -= 12
        rows = spec.html_rows()
        self.truth.tables.append({"header_rows": spec.header_rows, "rows": rows})

    def _close(self, spec: TableSpec, widths: list[float]) -> None:
        if spec.ruled:
            self.draw("line", self.x0, self.y, self.x0 + sum(widths), self.y)

    def _table_row(self, spec: TableSpec, row: int, widths: list[float]) -> None:
        grid = spec.covered()
        top, self.y = self.y, self.y - ROW_H
        xs = [self.x0 + sum(widths[:c]) for c in range(spec.cols + 1)]
        for col in range(spec.cols):
            cell = grid.get((row, col))
            if cell is not None and cell.row == row and cell.col == col:
                self.draw("text", xs[col] + 3, top - 11.5, cell.text, FONT, 8.5)
            if spec.ruled and (row == 0 or cell is None or cell.row == row):
                self.draw("line", xs[col], top, xs[col + 1], top)
            if spec.ruled and (col == 0 or cell is None or cell.col == col):
                self.draw("line", xs[col], top, xs[col], self.y)
        if spec.ruled:
            self.draw("line", xs[-1], top, xs[-1], self.y)
        elif row == spec.header_rows - 1:
            self.draw("line", xs[0], self.y, xs[-1], self.y)

    # -- the file
    def save(self, out: Path) -> Truth:
        canvas = Canvas(str(out / f"{self.truth.name}.pdf"), pagesize=letter)
        canvas.setTitle(self.truth.name.replace("_", " "))
        total = len(self.pages)
        for number, page in enumerate(self.pages, 1):
            furniture = self._furniture(page, number, total)
            for op in self._ordered(page.ops + furniture):
                _paint(canvas, op)
            canvas.showPage()
        canvas.save()
        self.truth.pages = total
        self.truth.save(out / f"{self.truth.name}.json")
        return self.truth

    def _furniture(self, page: Page, number: int, total: int) -> list[Op]:
        ops = []
        y = BODY_BOTTOM - 2
        for note in reversed(page.notes):
            y += 11
            ops.append(Op(FULL, "text", (MARGIN, y - 9, note, FONT, 8.0)))
        if page.notes:
            ops.append(Op(FULL, "line", (MARGIN, y + 4, MARGIN + 120, y + 4)))
        for text, y in ((self.header, PAGE_H - 45), (self.footer, 38.0)):
            if text:
                line = text.format(page=number, pages=total)
                ops.append(Op(FURNITURE, "text", (MARGIN, y, line, FONT, 8.5)))
                self.truth.furniture.append(line)
        return ops

    def _ordered(self, ops: list[Op]) -> list[Op]:
        furniture = sorted(
            (op for op in ops if op.stream == FURNITURE), key=lambda op: -float(op.args[1])
        )
        if self.order != "interleaved":  # the header, the page in drawing order, the footer
            head = [op for op in furniture if op.args[1] > PAGE_H / 2]
            rest = [op for op in ops if op.stream != FURNITURE]
            return head + rest + [op for op in furniture if op not in head]
        streams = [[op for op in ops if op.stream == s] for s in range(self.columns)]
        alternate = [op for group in itertools.zip_longest(*streams) for op in group if op]
        full = [op for op in ops if op.stream == FULL]
        return furniture[::-1] + alternate + full  # the footer first


def _paint(canvas: Canvas, op: Op) -> None:
    if op.kind == "text":
        x, y, text, font, size = op.args
        canvas.setFont(font, size)
        canvas.drawString(x, y, text)
    elif op.kind == "line":
        canvas.setLineWidth(0.6)
        canvas.line(*op.args)
    else:
        canvas.setFillGray(0.92)
        canvas.rect(*op.args, stroke=0, fill=1)
        canvas.setFillGray(0)
