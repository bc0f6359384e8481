"""A reading package as chunks for retrieval: sections by heading path within a size budget.

    from docparse.chunks import to_chunks
    for chunk in to_chunks(package, max_chars=1500):
        index.add(chunk.text, {"headings": chunk.heading_path, "pages": chunk.pages})

The rules, in the order they apply:

- **Headings bound chunks.** A chunk never crosses a heading of its section's level or above:
  a heading at a level at or above the one the chunk started in starts a new chunk; a deeper
  heading (a subsection) may join it. `heading_path` is the chain of headings from the top
  down to the section the chunk starts in (its own first heading included). A heading left
  last in a chunk that fills up moves to the next one, with its text.
- **Blocks are packed in reading order** up to the budget, joined by blank lines. A block
  longer than the budget starts a chunk of its own and is cut at sentence ends, then between
  words (inside a word only when one word alone is over the budget).
- **Lists stay together**: a list that fits a chunk is not cut across two.
- **Tables go whole into a chunk of their own** (with their caption, and the heading just
  before them when both fit), as Markdown-style rows; a table over the budget is cut between
  rows, each piece repeating the caption and the header rows. A table continued across pages
  is one table.
- **Page furniture** (roles "header", "footer") never enters a chunk.

Every chunk holds to the budget: `max_chars` characters, or `max_tokens` tokens when that is
given (counted by `tokenizer`, a callable returning a text's token count, else estimated as
whitespace-separated words x 1.3). Pages are page numbers (PDF, Word), slide numbers
(presentations) or sheet numbers (workbooks, each sheet a section named by the sheet). Pure
functions: the same package and budget give the same chunks.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from docparse.chunk_budget import SEPARATOR, Budget, Tokenizer, make_budget, split_text
from docparse.chunk_units import Box, Heading, Paragraph, TableUnit, Unit, package_units
from docparse.v1 import reading_package_pb2 as rp

# The level a chunk started before any heading counts as: any heading ends it.
_NO_SECTION = 6


@dataclass(frozen=True)
class Chunk:
    """One chunk: its text, the headings above it, and the pages and boxes it took text from
    (boxes only where the format has geometry; a block cut in pieces gives each piece its
    whole box)."""

    index: int
    text: str
    heading_path: tuple[str, ...]
    pages: tuple[int, ...]
    boxes: tuple[Box, ...]

    @property
    def chars(self) -> int:
        return len(self.text)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: text, heading_path, pages, boxes ({page, x0, y0, x1, y1}), chars,
        index."""
        return {
            "text": self.text,
            "heading_path": list(self.heading_path),
            "pages": list(self.pages),
            "boxes": [box.as_dict() for box in self.boxes],
            "chars": self.chars,
            "index": self.index,
        }


@dataclass
class _Part:
    """A piece of a chunk: a heading, a block (or a piece of one), a list, a table."""

    text: str
    pages: tuple[int, ...]
    boxes: tuple[Box, ...]
    path: tuple[str, ...]
    level: int
    heading: bool = False


def _cells(cells: list[str]) -> str:
    return "| " + " | ".join(" ".join(c.replace("|", "\\|").split()) for c in cells) + " |"


def _unique(items: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(items))


class _Packer:
    """Packs parts into chunks, one section at a time."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.chunks: list[Chunk] = []
        self.parts: list[_Part] = []
        self.used = 0
        self.headings: list[tuple[int, str]] = []

    def room(self) -> int:
        if not self.parts:
            return self.budget.limit
        return self.budget.limit - self.used - self.budget.separator

    def part(self, text: str, pages: Iterable[int], boxes: Iterable[Box]) -> _Part:
        level = self.headings[-1][0] if self.headings else _NO_SECTION
        path = tuple(text for _, text in self.headings)
        return _Part(text, _unique(pages), _unique(boxes), path, level)

    def add(self, part: _Part) -> None:
        if self.parts:
            self.used += self.budget.separator
        self.used += self.budget.cost(part.text)
        self.parts.append(part)

    def flush(self, carry: bool = True) -> None:
        """Closes the chunk; with `carry`, the headings it ends with open the next one."""
        carried: list[_Part] = []
        while carry and self.parts and self.parts[-1].heading:
            carried.insert(0, self.parts.pop())
        if self.parts:
            self.chunks.append(
                Chunk(
                    index=len(self.chunks),
                    text=SEPARATOR.join(part.text for part in self.parts),
                    heading_path=self.parts[0].path,
                    pages=tuple(sorted({page for part in self.parts for page in part.pages})),
                    boxes=_unique(box for part in self.parts for box in part.boxes),
                )
            )
        self.parts, self.used = [], 0
        for part in carried:
            self.add(part)

    def heading(self, unit: Heading) -> None:
        if self.parts and unit.level <= self.parts[0].level:
            self.flush(carry=False)
        while self.headings and self.headings[-1][0] >= unit.level:
            self.headings.pop()
        self.headings.append((unit.level, unit.text))
        self.place(self.part(unit.text, [unit.page], unit.boxes), heading=True)

    def place(self, part: _Part, heading: bool = False) -> None:
        """Adds a part where it fits: this chunk, else the next; cut in pieces when it fits
        no chunk, the first piece starting a chunk (after the headings it carries)."""
        part.heading = heading
        cost = self.budget.cost(part.text)
        if cost <= self.room():
            self.add(part)
            return
        if self.parts and not all(p.heading for p in self.parts):
            self.flush()
        if cost <= self.room():
            self.add(part)
            return
        first_room = self.room() if self.parts else None
        for piece in split_text(part.text, self.budget, first_room):
            if self.budget.cost(piece) > self.room():
                self.flush(carry=False)
            self.add(dataclasses.replace(part, text=piece))

    def list_items(self, items: list[Paragraph]) -> None:
        """A list: one part where it fits a chunk, else item by item."""
        whole = self.part(
            "\n".join(item.text for item in items),
            [item.page for item in items],
            [box for item in items for box in item.boxes],
        )
        if self.budget.cost(whole.text) <= self.budget.limit:
            self.place(whole)
            return
        for item in items:
            self.place(self.part(item.text, [item.page], item.boxes))

    def table(self, unit: TableUnit) -> None:
        """A table in a chunk of its own (with the headings just before it when they fit),
        else cut between rows, each piece repeating the caption and header rows."""
        head = [unit.caption] if unit.caption.strip() else []
        if unit.header:
            head += [_cells(row) for row in unit.header]
            head.append(_cells(["---"] * len(unit.header[-1])))
        lines = [(_cells(cells), part) for cells, part in unit.rows]
        whole = "\n".join(head + [line for line, _ in lines])
        if self.parts and not all(p.heading for p in self.parts):
            self.flush()
        if self.budget.cost(whole) <= self.budget.limit or not lines:
            if self.budget.cost(whole) > self.room():
                self.flush(carry=False)
            self.place(self._table_part(unit, whole, range(len(unit.parts))))
        else:
            for text, parts in _row_pieces("\n".join(head), lines, self.budget, self.room()):
                if self.budget.cost(text) > self.room():
                    self.flush(carry=False)  # the headings before it, alone
                self.place(self._table_part(unit, text, parts))
                self.flush(carry=False)
        self.flush(carry=False)

    def _table_part(self, unit: TableUnit, text: str, parts: Iterable[int]) -> _Part:
        chosen = [unit.parts[i] for i in _unique(parts)]
        return self.part(text, [page for page, _ in chosen], [b for _, bs in chosen for b in bs])


def _row_pieces(
    head: str, lines: list[tuple[str, int]], budget: Budget, first_room: int
) -> Iterator[tuple[str, list[int]]]:
    """A table's rows in pieces within the budget (the first within `first_room` where its
    first row fits there), each starting with `head` (the caption and header rows; dropped
    when it takes more than half the budget), with the parts its rows came from. A row over
    the budget alone is cut like text."""
    newline = budget.cost("\n")
    if head and budget.cost(head) > budget.limit // 2:
        head = ""
    head_cost = budget.cost(head) + newline if head else 0
    row_budget = dataclasses.replace(budget, limit=max(1, budget.limit - head_cost))
    cap = first_room - head_cost
    rows: list[str] = []
    parts: list[int] = []
    used = 0
    for line, part in lines:
        cost = budget.cost(line)
        if rows and used + newline + cost > cap:
            yield "\n".join([head, *rows] if head else rows), parts
            rows, parts, used, cap = [], [], 0, row_budget.limit
        if cost > row_budget.limit:
            for piece in split_text(line, row_budget):
                yield (f"{head}\n{piece}" if head else piece), [part]
            cap = row_budget.limit
            continue
        used += (newline if rows else 0) + cost
        rows.append(line)
        parts.append(part)
    if rows:
        yield "\n".join([head, *rows] if head else rows), parts


def _grouped(units: Iterable[Unit]) -> Iterator[Unit | list[Paragraph]]:
    """Units with each run of list items as one list."""
    items: list[Paragraph] = []
    for unit in units:
        if isinstance(unit, Paragraph) and unit.list_level:
            items.append(unit)
            continue
        if items:
            yield items
            items = []
        yield unit
    if items:
        yield items


def to_chunks(
    package: rp.ReadingPackage,
    max_chars: int = 2000,
    *,
    max_tokens: int | None = None,
    tokenizer: Tokenizer | None = None,
) -> list[Chunk]:
    """The package's chunks for retrieval (the rules: this module's docstring). The budget is
    `max_chars` characters, or `max_tokens` tokens when given (counted by `tokenizer`, a
    callable returning a text's token count, else estimated as whitespace-separated words x
    1.3); every chunk holds to it. Raises ValueError on a budget below 1."""
    packer = _Packer(make_budget(max_chars, max_tokens, tokenizer))
    for unit in _grouped(package_units(package)):
        if isinstance(unit, list):
            packer.list_items(unit)
        elif isinstance(unit, Heading):
            packer.heading(unit)
        elif isinstance(unit, TableUnit):
            packer.table(unit)
        else:
            packer.place(packer.part(unit.text, [unit.page], unit.boxes))
    packer.flush(carry=False)
    return packer.chunks


def to_chunks_jsonl(
    package: rp.ReadingPackage,
    max_chars: int = 2000,
    *,
    max_tokens: int | None = None,
    tokenizer: Tokenizer | None = None,
) -> str:
    """The chunks (see `to_chunks`) as JSON Lines, one object a line: text, heading_path
    (heading texts from the top), pages, boxes ([{page, x0, y0, x1, y1}], in points, where the
    format has geometry), chars, index. An empty package gives an empty string."""
    chunks = to_chunks(package, max_chars, max_tokens=max_tokens, tokenizer=tokenizer)
    return "".join(json.dumps(chunk.as_dict(), ensure_ascii=False) + "\n" for chunk in chunks)
