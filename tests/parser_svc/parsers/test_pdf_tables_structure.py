"""PDF tables as a reader sees them (parser_svc/parsers/pdf_tables.py, pdf_table_cells.py,
pdf_stream_tables.py, pdf_table_structure.py, pdf_table_pages.py): merged cells and their
spans, header rows, a table broken across pages joined, borderless tables, captions. Each PDF
is drawn here with pymupdf, its structure known by construction."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseOptions
from parser_svc.parsers.pdf import parse_pdf
from tests import fixtures

PROSE = (
    "The committee met twice during the quarter and reviewed the budget, the hiring plan and "
    "the schedule of the new building. Members agreed that the figures below are provisional."
)


def parse(data: bytes, assets: Path | None = None) -> rp.ReadingPackage:
    options = ParseOptions.defaults()
    options.assets_dir = assets
    return parse_pdf(data, lambda *_: None, options)


def rows(table: rp.Table) -> list[list[str]]:
    return [list(row.cells) for row in table.rows]


def spans(table: rp.Table) -> list[tuple[int, int, int, int]]:
    return [
        (r, s.column, s.row_span, s.col_span) for r, row in enumerate(table.rows) for s in row.spans
    ]


def _text(page: pymupdf.Page, x: float, y: float, text: str, bold: bool = False) -> None:
    page.insert_text((x, y), text, fontsize=10, fontname="hebo" if bold else "helv")


def merged_header_pdf() -> bytes:
    """Region (2 rows high) | Sales over Q1 Q2 | Costs over Q1 Q2; North 2 rows high."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 40, 540, 90), PROSE, fontsize=10)
    xs, ys = [72, 172, 242, 312, 382, 452], [100, 120, 140, 160, 180, 200]
    full = [0, 2, 4, 5]  # rows of ys drawn across the whole table
    for i, y in enumerate(ys):
        page.draw_line((xs[0] if i in full else xs[1], y), (xs[-1], y))
    for i, x in enumerate(xs):
        page.draw_line((x, ys[0] if i in (0, 1, 3, 5) else ys[1]), (x, ys[-1]))
    cells = {
        (0, 0): "Region", (0, 1): "Sales", (0, 3): "Costs",
        (1, 1): "Q1", (1, 2): "Q2", (1, 3): "Q1", (1, 4): "Q2",
        (2, 0): "North", (2, 1): "10", (2, 2): "11", (2, 3): "5", (2, 4): "6",
        (3, 1): "12", (3, 2): "13", (3, 3): "7", (3, 4): "8",
        (4, 0): "South", (4, 1): "20", (4, 2): "21", (4, 3): "9", (4, 4): "10",
    }  # fmt: skip
    for (r, c), text in cells.items():
        _text(page, xs[c] + 4, ys[r] + 14, text)
    return bytes(doc.tobytes())


def test_merged_cells_become_spans_and_a_two_level_header() -> None:
    (table,) = parse(merged_header_pdf()).pages[0].tables
    assert rows(table) == [
        ["Region", "Sales", "Sales", "Costs", "Costs"],
        ["Region", "Q1", "Q2", "Q1", "Q2"],
        ["North", "10", "11", "5", "6"],
        ["North", "12", "13", "7", "8"],
        ["South", "20", "21", "9", "10"],
    ]
    assert spans(table) == [(0, 0, 2, 1), (0, 1, 1, 2), (0, 3, 1, 2), (2, 0, 2, 1)]
    assert table.header_rows == 2
    assert not table.continues_previous


STOCK = [
    ["Item", "Quantity", "Price"],
    ["Bolts", "120", "0.40"],
    ["Nuts", "300", "0.15"],
    ["Washers", "75", "0.05"],
    ["Hinges", "12", "3.20"],
]


def test_a_borderless_group_heading_over_two_columns_is_a_merged_cell() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 60, 540, 110), PROSE, fontsize=10)
    _text(page, 250, 140, "Stock and price")  # centred over the last two columns
    for r, row in enumerate(STOCK):
        for x, cell in zip((72, 220, 320), row, strict=True):
            _text(page, x, 158 + 18 * r, cell)
    (table,) = parse(bytes(doc.tobytes())).pages[0].tables
    assert rows(table) == [["", "Stock and price", "Stock and price"], *STOCK]
    assert spans(table) == [(0, 1, 1, 2)]
    assert table.header_rows == 2


def test_a_double_rule_under_the_first_row_makes_it_the_header() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    xs, ys = [72, 172, 272, 372], [100, 120, 123, 143, 163]
    for y in ys:
        page.draw_line((xs[0], y), (xs[-1], y))
    for x in xs:
        page.draw_line((x, ys[0]), (x, ys[-1]))
    for r, y in enumerate((100, 123, 143)):
        for c, x in enumerate(xs[:-1]):
            _text(page, x + 4, y + 14, STOCK[r][c])
    (table,) = parse(bytes(doc.tobytes())).pages[0].tables
    assert rows(table) == STOCK[:3]
    assert table.header_rows == 1


def borderless_pdf(data: list[list[str]] = STOCK, caption: str = "Table 1: Stock on hand") -> bytes:
    """Prose, a caption, a table of three aligned columns with one rule under its header,
    prose again."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 60, 540, 110), PROSE, fontsize=10)
    _text(page, 72, 130, caption)
    for r, row in enumerate(data):
        for x, cell in zip((72, 220, 320), row, strict=True):
            _text(page, x, 160 + 18 * r, cell)
    page.draw_line((72, 165), (380, 165))
    page.insert_textbox(pymupdf.Rect(72, 180 + 18 * len(data), 540, 330), PROSE, fontsize=10)
    return bytes(doc.tobytes())


def test_a_borderless_table_with_a_rule_under_its_header() -> None:
    page = parse(borderless_pdf()).pages[0]
    (table,) = page.tables
    assert rows(table) == STOCK
    assert table.header_rows == 1
    assert spans(table) == []
    assert table.caption == "Table 1: Stock on hand"
    captions = [b for b in page.blocks if b.role == "caption"]
    assert [b.text for b in captions] == ["Table 1: Stock on hand"]
    # the prose around it is no table and keeps its place
    assert sum(PROSE[:40] in b.text for b in page.blocks) == 2


def test_a_borderless_row_with_one_cell_filled_stays_in_its_table() -> None:
    data = [*STOCK[:3], ["Spares", "", ""], *STOCK[3:]]
    (table,) = parse(borderless_pdf(data)).pages[0].tables
    assert rows(table) == data
    assert table.header_rows == 1


def long_table_pdf(rows_total: int = 70, per_page: int = 30, repeat: bool = True) -> bytes:
    """A ruled three-column table of `rows_total` rows over pages, its bold header repeated at
    the top of each page (`repeat`), a running header and a page number on every page."""
    doc = pymupdf.open()
    xs, height = [72, 152, 352, 452], 20
    body = [(str(i + 1), f"Item number {i + 1}", f"{(i + 1) * 7}.00") for i in range(rows_total)]
    for start in range(0, rows_total, per_page):
        page = doc.new_page(width=612, height=792)
        _text(page, 72, 40, "Quarterly inventory report")
        _text(page, 300, 770, str(page.number + 1))
        header = [("ID", "Name", "Amount")] if repeat or start == 0 else []
        lines = [*header, *body[start : start + per_page]]
        top = 60
        for r, line in enumerate(lines):
            for c, cell in enumerate(line):
                _text(page, xs[c] + 4, top + r * height + 14, cell, bold=r < len(header))
        for r in range(len(lines) + 1):
            page.draw_line((xs[0], top + r * height), (xs[-1], top + r * height))
        for x in xs:
            page.draw_line((x, top), (x, top + len(lines) * height))
    return bytes(doc.tobytes())


def test_a_table_broken_across_pages_is_joined_without_its_repeated_header() -> None:
    package = parse(long_table_pdf())
    tables = [page.tables[0] for page in package.pages]
    assert [len(page.tables) for page in package.pages] == [1, 1, 1]
    assert [t.continues_previous for t in tables] == [False, True, True]
    assert tables[0].header_rows == 1
    assert rows(tables[0])[0] == ["ID", "Name", "Amount"]
    data = [row for t in tables for row in rows(t)][1:]
    assert len(data) == 70
    assert data[0] == ["1", "Item number 1", "7.00"]
    assert data[-1] == ["70", "Item number 70", "490.00"]
    assert ["ID", "Name", "Amount"] not in data


def test_a_table_continued_without_its_header_keeps_every_row() -> None:
    tables = [page.tables[0] for page in parse(long_table_pdf(repeat=False)).pages]
    assert [t.continues_previous for t in tables] == [False, True, True]
    assert [t.header_rows for t in tables] == [1, 0, 0]
    data = [row for t in tables for row in rows(t)][1:]
    assert [row[0] for row in data] == [str(i) for i in range(1, 71)]


def test_tables_on_consecutive_pages_with_other_columns_stay_apart() -> None:
    first = pymupdf.open(stream=long_table_pdf(30, 30))
    second = pymupdf.open(stream=merged_header_pdf())
    first.insert_pdf(second)
    package = parse(bytes(first.tobytes()))
    assert [len(page.tables) for page in package.pages] == [1, 1]
    assert not package.pages[1].tables[0].continues_previous
    assert package.pages[1].tables[0].header_rows == 2


def test_a_table_with_a_header_of_its_own_on_the_next_page_is_another_table() -> None:
    """Same columns at the top of the next page, but a bold header that is not the first
    table's: a new table, kept whole, its header its own."""
    first = pymupdf.open(stream=long_table_pdf(20, 20))
    second = pymupdf.open(stream=long_table_pdf(10, 10))
    page = second[0]
    for x, old, new in ((76, "ID", "Code"), (156, "Name", "Label"), (356, "Amount", "Total")):
        page.add_redact_annot(page.search_for(old)[0])
        page.apply_redactions()
        _text(page, x, 74, new, bold=True)
    first.insert_pdf(second)
    tables = [page.tables[0] for page in parse(bytes(first.tobytes())).pages]
    assert [t.continues_previous for t in tables] == [False, False]
    assert [t.header_rows for t in tables] == [1, 1]
    assert rows(tables[1])[0] == ["Code", "Label", "Total"]


def test_a_figure_caption_below_its_image(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(72, 60, 540, 110), PROSE, fontsize=10)
    page.insert_image(pymupdf.Rect(72, 130, 200, 226), stream=fixtures.PNG)
    _text(page, 72, 244, "Figure 2: The new building seen from the south")
    _text(page, 72, 400, "Figure 3 is discussed in the next chapter, far from any image.")
    out = parse(bytes(doc.tobytes()), tmp_path).pages[0]
    (image,) = out.images
    assert image.caption == "Figure 2: The new building seen from the south"
    assert [b.text for b in out.blocks if b.role == "caption"] == [image.caption]


def test_prose_lists_and_two_columns_are_no_tables() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    for i, x in enumerate((72, 320)):
        page.insert_textbox(pymupdf.Rect(x, 60, x + 220, 400), f"{PROSE} {PROSE} " * 2, fontsize=10)
        _text(page, x, 420 + i, "Column end")
    for r, item in enumerate(("First step of the procedure", "Second step", "Third step")):
        _text(page, 72, 460 + 16 * r, f"{r + 1}.")
        _text(page, 96, 460 + 16 * r, item)
        _text(page, 72, 530 + 16 * r, "\u2022")
        _text(page, 96, 530 + 16 * r, item)
    assert list(parse(bytes(doc.tobytes())).pages[0].tables) == []


def test_a_caption_line_right_under_a_paragraph_starts_its_own_block() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    caption = "Table 3: Stock by site"
    page.insert_textbox(pymupdf.Rect(72, 60, 540, 112), f"{PROSE}\n{caption}", fontsize=10)
    xs, ys = [72, 172, 272, 372], [115, 135, 155, 175]
    for y in ys:
        page.draw_line((xs[0], y), (xs[-1], y))
    for x in xs:
        page.draw_line((x, ys[0]), (x, ys[-1]))
    for r, y in enumerate(ys[:-1]):
        for c, x in enumerate(xs[:-1]):
            _text(page, x + 4, y + 14, STOCK[r][c])
    out = parse(bytes(doc.tobytes())).pages[0]
    (table,) = out.tables
    assert table.caption == caption
    assert [b.text for b in out.blocks if b.role == "caption"] == [caption]
    (paragraph,) = [b for b in out.blocks if PROSE[:40] in b.text]
    assert " ".join(paragraph.text.split()) == PROSE


def _stream_table(page: pymupdf.Page, top: float, data: list[list[str]], rule: int = 1) -> float:
    """Borderless cells at x 63, 141, 219 from `top`, a rule under row `rule`; the bottom."""
    for r, row in enumerate(data):
        for x, cell in zip((63, 141, 219), row, strict=True):
            if cell:
                _text(page, x, top + 16 * r, cell)
    page.draw_line((60, top + 16 * (rule - 1) + 5), (290, top + 16 * (rule - 1) + 5))
    return top + 16 * len(data)


def test_a_borderless_table_beside_the_page_s_other_column_keeps_its_last_column() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_textbox(pymupdf.Rect(60, 60, 290, 120), PROSE, fontsize=10)
    _stream_table(page, 140, STOCK)
    page.insert_textbox(pymupdf.Rect(318, 60, 550, 300), PROSE + " " + PROSE, fontsize=10)
    (table,) = parse(bytes(doc.tobytes())).pages[0].tables
    assert rows(table) == STOCK


def test_a_borderless_two_row_header_spans_its_empty_cells() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    head = [["Region", "Sales", ""], ["", "Q1", "Q2"]]
    body = [["North", "10", "11"], ["South", "20", "21"], ["East", "30", "31"]]
    _stream_table(page, 140, head + body, rule=2)
    (table,) = parse(bytes(doc.tobytes())).pages[0].tables
    full = [["Region", "Sales", "Sales"], ["Region", "Q1", "Q2"]]
    assert (rows(table), spans(table), table.header_rows) == (
        full + body,
        [(0, 0, 2, 1), (0, 1, 1, 2)],
        2,
    )


def test_a_larger_heading_right_under_a_borderless_table_is_no_row_of_it() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    bottom = _stream_table(page, 140, STOCK)
    page.insert_text((60, bottom + 14), "Stock Notes", fontsize=14, fontname="hebo")
    _text(page, 400, bottom + 14, "on hold.")  # a short line of the page's other column
    page.insert_textbox(pymupdf.Rect(60, bottom + 22, 290, bottom + 90), PROSE, fontsize=10)
    blocks = parse(bytes(doc.tobytes())).pages[0]
    (table,) = blocks.tables
    assert rows(table) == STOCK
    assert any(b.text == "Stock Notes" for b in blocks.blocks)


def test_a_borderless_table_across_pages_joins_though_its_last_column_s_width_varies() -> None:
    doc = pymupdf.open()
    for page_rows in ([["9", "a", "longer"]] * 3, [["8", "b", "ok"]] * 3):
        page = doc.new_page(width=612, height=792)
        top = 640 if page.number == 0 else 80
        page.insert_textbox(pymupdf.Rect(60, 160 if top < 100 else 60, 290, 300), PROSE)
        _stream_table(page, top, [["ID", "Name", "Note"], *page_rows])
    tables = [page.tables[0] for page in parse(bytes(doc.tobytes())).pages]
    assert [t.continues_previous for t in tables] == [False, True]
    assert [len(t.rows) for t in tables] == [4, 3]


def test_borderless_tables_side_by_side_in_two_page_columns_stay_apart() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((60, 50), "A Title Across Both Columns Here", fontsize=20, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(60, 70, 290, 200), PROSE + " " + PROSE, fontsize=10)
    page.insert_textbox(pymupdf.Rect(318, 70, 550, 200), PROSE + " " + PROSE, fontsize=10)
    _stream_table(page, 230, STOCK)
    other = [
        ["Site", "Staff", "Rooms"],
        ["Leeds", "14", "9"],
        ["York", "8", "5"],
        ["Hull", "3", "2"],
    ]
    for r, row in enumerate(other):  # rows 6 points lower than the first table's
        for x, cell in zip((321, 399, 477), row, strict=True):
            _text(page, x, 236 + 16 * r, cell)
    page.draw_line((318, 241), (552, 241))
    page.insert_text((60, 720), "8 " + PROSE[:70], fontsize=9)  # a footer across the gutter
    tables = parse(bytes(doc.tobytes())).pages[0].tables
    assert sorted((rows(t), t.header_rows) for t in tables) == [(STOCK, 1), (other, 1)]


def test_a_list_beside_a_narrow_column_of_short_lines_is_no_table() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    words = ("cedar opal umber river tundra amber " * 12).split()  # lines under 30 characters
    for r in range(3):  # a paragraph over each column, in lines long enough to read as prose
        _text(page, 60, 41 + 13 * r, " ".join(words[r : r + 5]))
        _text(page, 232, 37 + 13 * r, " ".join(words[r : r + 5]))
    for n in range(4):  # numbered items, each wrapped over four short lines
        _text(page, 60, 80 + 52 * n, f"{n + 1}. " + " ".join(words[n : n + 3]))
        for k in range(1, 4):
            _text(page, 76, 80 + 52 * n + 13 * k, " ".join(words[n + k : n + k + 4]))
    for r in range(16):  # the other column's short lines, 4 points higher
        _text(page, 232, 76 + 13 * r, " ".join(words[r : r + 4]))
    assert list(parse(bytes(doc.tobytes())).pages[0].tables) == []


def test_a_borderless_table_carried_on_into_the_next_page_s_left_column_is_joined() -> None:
    doc = pymupdf.open()
    head = ["ID", "Name", "Note"]
    for number, (xs, top, body) in enumerate(
        (
            ((321, 399, 477), 660, [["1", "a", "longer"]] * 4),
            ((63, 141, 219), 80, [["2", "b", "ok"]] * 2),
        )
    ):
        page = doc.new_page(width=612, height=792)
        for r, row in enumerate([head, *body]):
            for x, cell in zip(xs, row, strict=True):
                _text(page, x, top + 16 * r, cell)
        page.draw_line((xs[0] - 3, top + 5), (xs[0] + 231, top + 5))
        prose = pymupdf.Rect(60, 60, 290, 300) if number == 0 else pymupdf.Rect(60, 140, 290, 400)
        page.insert_textbox(prose, PROSE + " " + PROSE, fontsize=10)
        page.insert_textbox(pymupdf.Rect(318, 60, 550, 300), PROSE + " " + PROSE, fontsize=10)
    tables = [page.tables[0] for page in parse(bytes(doc.tobytes())).pages]
    assert [t.continues_previous for t in tables] == [False, True]
    assert [len(t.rows) for t in tables] == [5, 2]
