"""A seeded random family built like the four reference documents, so that a held-out set "built
the same way" exists: 1-3 columns, the content stream in reading order or interleaved, 1-4
heading levels (numbered or not), nested bulleted and numbered lists, tables with and without
rules (merged header cells sometimes), sidebars, footnotes, running headers and footers."""

from __future__ import annotations

from pathlib import Path

from bench.structure.documents import BULLETS, Text, grid_table, ordinal_marker
from bench.structure.layout import Writer
from bench.structure.truth import Cell, TableSpec, Truth

HEADERS = ("Field Survey Quarterly", "Technical Bulletin 12", "Internal Memo · Draft", "")
FOOTERS = ("Page {page}", "{page}", "Page {page} of {pages}", "— {page} —", "")


def spanned_table(text: Text, cols: int, ruled: bool) -> TableSpec:
    """A two-level header: the first column spans both header rows, the rest pair up."""
    cells = [Cell(text.title(1), 0, 0, row_span=2)]
    col = 1
    while col < cols:
        span = min(2, cols - col)
        cells.append(Cell(text.title(1), 0, col, col_span=span))
        cells += [Cell(text.title(1), 1, c) for c in range(col, col + span)]
        col += span
    rows = text.rng.randint(4, 8)
    cells += [Cell(text.cell(), r, c) for r in range(2, rows) for c in range(cols)]
    return TableSpec(rows, cols, cells, header_rows=2, ruled=ruled)


def a_list(doc: Writer, text: Text, depth: int) -> None:
    ordered = text.rng.random() < 0.5
    counters = [0, 0, 0]
    level = 1
    for _ in range(text.rng.randint(3, 7)):
        counters[level - 1] += 1
        for deeper in range(level, 3):
            counters[deeper] = 0
        index = counters[level - 1]
        marker = ordinal_marker(level, index) if ordered and level < 3 else BULLETS[level - 1]
        doc.list_item(text.sentence(), level, marker, ordered and level < 3)
        if level < depth and text.rng.random() < 0.4:
            level += 1
        elif level > 1 and text.rng.random() < 0.4:
            level -= 1


def section(doc: Writer, text: Text, level: int, depth: int, numbers: list[int] | None) -> None:
    rng = text.rng
    title = text.title(rng.randint(2, 4))
    if numbers is not None:
        numbers[level - 1] += 1
        for deeper in range(level, len(numbers)):
            numbers[deeper] = 0
        title = ".".join(str(n) for n in numbers[:level]) + " " + title
    doc.heading(title, level)
    for _ in range(rng.randint(1, 3)):
        doc.paragraph(text.paragraph())
        roll = rng.random()
        if roll < 0.2:
            a_list(doc, text, rng.randint(1, 3))
        elif roll < 0.32 and doc.columns < 3:
            cols = rng.randint(3, 5 if doc.columns == 1 else 3)
            spec = spanned_table(text, cols, rng.random() < 0.5)
            if rng.random() < 0.6:
                spec = grid_table(text, rng.randint(4, 12), cols, rng.random() < 0.5)
            doc.table(spec)
        elif roll < 0.38:
            doc.sidebar(text.title(2), [text.paragraph((1, 2))])
        elif roll < 0.46:
            doc.footnote(f"{rng.randint(1, 9)} {text.sentence()}")
    if level < depth:
        for _ in range(rng.randint(1, 2)):
            section(doc, text, level + 1, depth, numbers)


def random_document(out: Path, seed: int) -> Truth:
    text = Text(seed)
    rng = text.rng
    columns = rng.choice((1, 1, 2, 2, 3))
    order = "interleaved" if columns > 1 and rng.random() < 0.35 else "natural"
    header, footer = rng.choice(HEADERS), rng.choice(FOOTERS)
    doc = Writer(f"family_{seed}", "family", columns, order, header, footer)
    depth = rng.randint(1, 4)
    numbers = [0, 0, 0, 0] if rng.random() < 0.5 else None
    if columns > 1:
        doc.banner(text.title(4), 1)
        start = 2 if depth > 1 else 1
    else:
        start = 1
    for _ in range(rng.randint(2, 4)):
        section(doc, text, start, max(depth, start), numbers)
    return doc.save(out)
