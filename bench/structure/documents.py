"""The four reference documents, structure known by construction: a two-column article with a
running header and a page footer; a report with three tables (ruled with a two-level merged
header and a row span, borderless with a rule under its header only, 70 ruled rows across pages
with the header repeated); a procedure with three heading levels and nested bulleted and
numbered lists; a newsletter whose two columns are drawn line by line alternately, the footer
first."""

from __future__ import annotations

import random
from pathlib import Path

from bench.structure.layout import Writer
from bench.structure.truth import Cell, TableSpec, Truth

VOCABULARY = (
    "river stone harbor signal ledger copper meadow lantern orbit quarry timber beacon canyon "
    "harvest valley engine market garden thunder crystal summit anchor falcon prairie mirror "
    "compass glacier furnace island journal kettle ladder marble needle ocean pepper quiver "
    "ribbon saddle tunnel velvet willow yonder zephyr amber basalt cedar delta ember fjord "
    "granite hollow indigo jasper kelp lagoon mosaic nectar opal pewter quartz rustic sierra "
    "tundra umber vapor walnut"
)
WORDS = tuple(VOCABULARY.split())
# Markers the standard fonts' WinAnsi encoding can draw (a white bullet, U+25E6, it cannot).
BULLETS = ("•", "–", "-")  # noqa: RUF001 (the en dash is a bullet here)


class Text:
    """Seeded words: sentences, paragraphs and titles that do not repeat in one document."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def words(self, count: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(count))

    def sentence(self) -> str:
        text = self.words(self.rng.randint(7, 15))
        return text[0].upper() + text[1:] + "."

    def paragraph(self, sentences: tuple[int, int] = (2, 4)) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(*sentences)))

    def title(self, count: int = 3) -> str:
        return " ".join(w.capitalize() for w in self.words(count).split())

    def cell(self) -> str:
        if self.rng.random() < 0.5:
            return self.rng.choice(WORDS)
        return str(self.rng.randint(10, 9999))


def ordinal_marker(level: int, index: int) -> str:
    return f"{index}." if level == 1 else f"{chr(ord('a') + index - 1)})"


def article(out: Path, seed: int = 1) -> Truth:
    text = Text(seed)
    doc = Writer("article", "article", 2, header="The Northern Review · Spring Issue")
    doc.banner(text.title(4), 1)
    for _ in range(5):
        doc.heading(text.title(3), 2)
        for _ in range(text.rng.randint(3, 5)):
            doc.paragraph(text.paragraph())
    return doc.save(out)


def grid_table(text: Text, rows: int, cols: int, ruled: bool) -> TableSpec:
    header = [Cell(text.title(1), 0, c) for c in range(cols)]
    body = [Cell(text.cell(), r, c) for r in range(1, rows) for c in range(cols)]
    return TableSpec(rows, cols, header + body, 1, ruled)


def merged_table(text: Text) -> TableSpec:
    cells = [
        Cell("Region", 0, 0, row_span=2), Cell("Sales", 0, 1, col_span=2),
        Cell("Costs", 0, 3, col_span=2), Cell("Q1", 1, 1), Cell("Q2", 1, 2), Cell("Q1", 1, 3),
        Cell("Q2", 1, 4), Cell("North", 2, 0, row_span=2),
    ]  # fmt: skip
    for name, row in (("South", 4), ("East", 5), ("West", 6)):
        cells.append(Cell(name, row, 0))
    cells += [Cell(str(text.rng.randint(100, 999)), r, c) for r in range(2, 7) for c in range(1, 5)]
    return TableSpec(7, 5, cells, header_rows=2, ruled=True)


def report(out: Path, seed: int = 2, long_rows: int = 70) -> Truth:
    text = Text(seed)
    doc = Writer("report", "report", 1, "natural", "Annual Operations Report", "{page} / {pages}")
    doc.heading(text.title(4), 1)
    doc.paragraph(text.paragraph())
    doc.heading("Results by region", 2)
    doc.paragraph(text.paragraph())
    doc.table(merged_table(text))
    doc.heading("Stations", 2)
    doc.paragraph(text.paragraph())
    doc.table(grid_table(text, 7, 4, ruled=False))
    doc.heading("Daily readings", 2)
    doc.paragraph(text.paragraph())
    doc.table(grid_table(text, long_rows + 1, 5, ruled=True))
    doc.paragraph(text.paragraph())
    return doc.save(out)


def nested_list(doc: Writer, text: Text, ordered: bool, depth: int) -> None:
    for index in range(1, text.rng.randint(3, 4) + 1):
        marker = ordinal_marker(1, index) if ordered else BULLETS[0]
        doc.list_item(text.sentence(), 1, marker, ordered)
        if depth > 1 and index == 2:
            for sub in range(1, 3):
                marker = ordinal_marker(2, sub) if ordered else BULLETS[1]
                doc.list_item(text.sentence(), 2, marker, ordered)
                if depth > 2 and sub == 1:
                    doc.list_item(text.sentence(), 3, BULLETS[2], False)


def procedure(out: Path, seed: int = 3) -> Truth:
    text = Text(seed)
    doc = Writer("procedure", "procedure", 1, header="", footer="Procedure P-7 · page {page}")
    doc.heading(text.title(4), 1)
    doc.paragraph(text.paragraph())
    for section in range(1, 4):
        doc.heading(f"{section}. {text.title(2)}", 2)
        doc.paragraph(text.paragraph())
        for sub in range(1, 3):
            doc.heading(f"{section}.{sub} {text.title(3)}", 3)
            doc.paragraph(text.paragraph((1, 2)))
            nested_list(doc, text, ordered=(section + sub) % 2 == 0, depth=1 + sub)
    return doc.save(out)


def newsletter(out: Path, seed: int = 4) -> Truth:
    text = Text(seed)
    doc = Writer("newsletter", "newsletter", 2, "interleaved", footer="Harbor Notes, page {page}")
    doc.banner(text.title(3), 1)
    for _ in range(6):
        doc.heading(text.title(3), 2)
        for _ in range(text.rng.randint(3, 4)):
            doc.paragraph(text.paragraph())
    return doc.save(out)


FOUR = (article, report, procedure, newsletter)
