"""Scores a Markdown rendering against a document's truth, per property:

- paragraphs whole: a truth paragraph's words appear contiguous in one Markdown block;
- order: of the pairs of truth paragraphs (those in the reading order), the fraction that come
  in the right order (a paragraph not found whole is placed by its first eight words; one not
  found at all puts every pair it is in out of order);
- headings: rendered as a Markdown heading with the same words; levels: and the same level;
  headings not in truth: Markdown headings that are none of the document's (page markers, a
  paragraph set as a heading; a sidebar's title may be one or not), a count;
- lists: rendered as a list item with the same words; list levels: and the same nesting depth;
- tables: TEDS (bench.structure.teds) against the Markdown or HTML table that shares the most
  cell texts with it (0 when there is none); a table split in two scores its larger half;
- furniture: running header and footer lines left in the Markdown (a line that is one, or
  holds one of three words or more), up to the times each was drawn.

Counts add up over documents (`Score.__add__`); `values()` gives the ratios."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from bench.structure.markdown_blocks import Block, blocks, norm
from bench.structure.teds import ParsedTable, teds
from bench.structure.truth import Truth

PROPERTIES = (
    "paragraphs whole", "paragraph order", "headings", "heading levels", "headings not in truth",
    "list items", "list levels", "tables TEDS", "furniture lines",
)  # fmt: skip


@dataclass
class Score:
    paragraphs: list[int] = field(default_factory=lambda: [0, 0])  # found, total
    order: list[int] = field(default_factory=lambda: [0, 0])  # pairs right, pairs
    # found, with the right level, total (and for headings: Markdown headings matching none)
    headings: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    items: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    tables: list[float] = field(default_factory=list)  # TEDS per truth table
    furniture: int = 0

    def __add__(self, other: Score) -> Score:
        total = Score()
        for name in ("paragraphs", "order", "headings", "items"):
            mine, theirs = getattr(self, name), getattr(other, name)
            setattr(total, name, [a + b for a, b in zip(mine, theirs, strict=True)])
        total.tables = self.tables + other.tables
        total.furniture = self.furniture + other.furniture
        return total

    def values(self) -> dict[str, float | None]:
        def ratio(part: float, whole: float) -> float | None:
            return part / whole if whole else None

        return dict(zip(PROPERTIES, (
            ratio(*self.paragraphs), ratio(*self.order),
            ratio(self.headings[0], self.headings[2]), ratio(self.headings[1], self.headings[2]),
            float(self.headings[3]),
            ratio(self.items[0], self.items[2]), ratio(self.items[1], self.items[2]),
            ratio(sum(self.tables), len(self.tables)), float(self.furniture),
        ), strict=True))  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _paragraphs(found: list[Block], truth: Truth, score: Score) -> None:
    texts = [f" {norm(b.text)} " for b in found if b.kind != "table"]
    whole = " ".join(texts)
    positions: list[int] = []
    for paragraph in truth.paragraphs:
        words = norm(paragraph["text"])
        hit = any(f" {words} " in text for text in texts)
        score.paragraphs[0] += hit
        score.paragraphs[1] += 1
        if paragraph["ordered"]:
            at = whole.find(f" {words} ")
            if at < 0:
                at = whole.find(" " + " ".join(words.split()[:8]) + " ")
            positions.append(at)
    pairs = [(a, b) for i, a in enumerate(positions) for b in positions[i + 1 :]]
    score.order[0] += sum(1 for a, b in pairs if 0 <= a < b)
    score.order[1] += len(pairs)


def _matched(found: list[Block], kind: str, wanted: list[dict[str, Any]], loose: bool) -> list[int]:
    """[found, with the right level, total, blocks left over]: each block matches one truth
    entry at most."""
    pool = [b for b in found if b.kind == kind]
    hits = levels = 0
    for entry in wanted:
        words = norm(entry["text"])
        for block in pool:
            text = norm(block.text)
            extra = text.removesuffix(words) if loose and text.endswith(" " + words) else None
            if text == words or (extra is not None and len(extra.split()) <= 2):
                hits += 1
                levels += block.level == entry["level"]
                pool.remove(block)
                break
    return [hits, levels, len(wanted), len(pool)]


def _cell_words(table: ParsedTable) -> Counter[str]:
    return Counter(norm(text) for row in table.rows for text, _, _ in row if norm(text))


def _tables(found: list[Block], truth: Truth, score: Score) -> None:
    pool = [b.table for b in found if b.table is not None and b.table.rows]
    for wanted in truth.tables:
        rows = [[(c["text"], c["row_span"], c["col_span"]) for c in row] for row in wanted["rows"]]
        target = ParsedTable(rows, wanted["header_rows"])
        words = _cell_words(target)
        best = max(pool, key=lambda t: sum((_cell_words(t) & words).values()), default=None)
        if best is None or not (_cell_words(best) & words):
            score.tables.append(0.0)
            continue
        pool.remove(best)
        same = best.rows == target.rows and best.header_rows == target.header_rows
        score.tables.append(1.0 if same else teds(best, target))


def _furniture(markdown: str, truth: Truth) -> int:
    drawn = Counter(norm(line) for line in truth.furniture)
    left: Counter[str] = Counter()
    for line in markdown.splitlines():
        if line.lstrip().startswith("<!--"):
            continue  # a comment (the renderer's page marks) is not text a reader sees
        text = f" {norm(line)} "
        for furniture in drawn:
            long = len(furniture.split()) >= 3
            if text.strip() == furniture or (long and f" {furniture} " in text):
                left[furniture] += 1
    return sum(min(count, drawn[name]) for name, count in left.items())


def score(markdown: str, truth: Truth) -> Score:
    found = blocks(markdown)
    result = Score()
    _paragraphs(found, truth, result)
    labels = {norm(label) for label in truth.labels}
    optional = [b for b in found if b.kind == "heading" and norm(b.text) in labels]
    headings = [b for b in found if b not in optional]
    result.headings = _matched(headings, "heading", truth.headings, loose=False)
    result.items = _matched(found, "item", truth.list_items, loose=True)
    _tables(found, truth, result)
    result.furniture = _furniture(markdown, truth)
    return result
