"""What a generated document holds, recorded while it is drawn: the truth the scorer compares a
Markdown rendering against. Written beside each PDF as `<name>.json`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Cell:
    """A table cell where it starts in the grid, with its spans (an HTML td)."""

    text: str
    row: int
    col: int
    row_span: int = 1
    col_span: int = 1


@dataclass
class TableSpec:
    rows: int
    cols: int
    cells: list[Cell]
    header_rows: int = 1
    ruled: bool = True

    def html_rows(self) -> list[list[dict[str, Any]]]:
        """The rows as HTML would hold them: each cell in the row it starts in."""
        out: list[list[dict[str, Any]]] = [[] for _ in range(self.rows)]
        for cell in sorted(self.cells, key=lambda c: (c.row, c.col)):
            out[cell.row].append(
                {"text": cell.text, "row_span": cell.row_span, "col_span": cell.col_span}
            )
        return out

    def covered(self) -> dict[tuple[int, int], Cell]:
        """Every grid position and the cell covering it."""
        grid: dict[tuple[int, int], Cell] = {}
        for cell in self.cells:
            for r in range(cell.row, cell.row + cell.row_span):
                for c in range(cell.col, cell.col + cell.col_span):
                    grid[(r, c)] = cell
        return grid


@dataclass
class Truth:
    """`ordered` False: found whole is scored, the reading order is not (footnotes, sidebars:
    their place in the reading order is a matter of taste)."""

    name: str
    kind: str = ""
    pages: int = 0
    paragraphs: list[dict[str, Any]] = field(default_factory=list)  # text, ordered
    headings: list[dict[str, Any]] = field(default_factory=list)  # text, level (1-6)
    list_items: list[dict[str, Any]] = field(default_factory=list)  # text, level, marker, ordered
    tables: list[dict[str, Any]] = field(default_factory=list)  # header_rows, rows (HTML-like)
    furniture: list[str] = field(default_factory=list)  # one entry per line drawn
    # Labels a reader may take for a heading or not (a sidebar's title): neither required nor
    # counted against a Markdown that makes them headings.
    labels: list[str] = field(default_factory=list)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> Truth:
        return cls(**json.loads(path.read_text()))
