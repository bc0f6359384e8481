"""A PDF's structure in its reading package (parser_svc/parsers/pdf_structure.py, pdf_blocks.py,
pdf_reading_order.py, pdf_headings.py), on PDFs drawn here whose structure is known by
construction: headings and their levels, the title, list items with their markers and nesting,
running headers and page numbers marked as page furniture, and columns read in order whatever
order the content stream draws them in."""

from __future__ import annotations

import pymupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseOptions
from parser_svc.parsers.pdf import parse_pdf

BODY = "Read every step before you start, and keep the parts together."


def _parse(data: bytes) -> rp.ReadingPackage:
    return parse_pdf(data, lambda *_: None, ParseOptions.defaults())


def _blocks(package: rp.ReadingPackage) -> list[rp.TextBlock]:
    return [block for page in package.pages for block in page.blocks]


def _procedure_pdf() -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    y = 72.0

    def put(text: str, size: float = 10, font: str = "helv", x: float = 72) -> None:
        nonlocal y
        page.insert_text((x, y), text, fontsize=size, fontname=font)
        y += size * 1.6

    put("Installing the Widget", 22, "hebo")
    put("1. Preparation", 16, "hebo")
    put(BODY)
    put("1.1 Tools", 13, "hebo")
    put("- A screwdriver with a long handle")
    put("- Phillips head", x=90)
    put("- Flat head", x=90)
    put("- A spirit level")
    put("1.1.1 Order of work", 11, "hebo")
    put("1. Open the box")
    put("a) Remove the foam", x=90)
    put("2. Mount the bracket")
    put("2. Installation", 16, "hebo")
    put("Mount the widget on the wall and check that it is level.")
    data: bytes = doc.tobytes()
    return data


def test_headings_lists_and_title_of_a_procedure() -> None:
    blocks = _blocks(_parse(_procedure_pdf()))
    got = [(b.text, b.role, b.level, b.marker, b.ordered) for b in blocks]
    assert got == [
        ("Installing the Widget", "title", 1, "", False),
        ("1. Preparation", "heading", 2, "", False),
        (BODY, "", 0, "", False),
        ("1.1 Tools", "heading", 3, "", False),
        ("- A screwdriver with a long handle", "list_item", 1, "-", False),
        ("- Phillips head", "list_item", 2, "-", False),
        ("- Flat head", "list_item", 2, "-", False),
        ("- A spirit level", "list_item", 1, "-", False),
        ("1.1.1 Order of work", "heading", 4, "", False),
        ("1. Open the box", "list_item", 1, "1.", True),
        ("a) Remove the foam", "list_item", 2, "a)", True),
        ("2. Mount the bracket", "list_item", 1, "2.", True),
        ("2. Installation", "heading", 2, "", False),
        ("Mount the widget on the wall and check that it is level.", "", 0, "", False),
    ]


def _column_text(column: int, page: int) -> str:
    return " ".join(f"Column {column} sentence {k} of page {page} runs on." for k in range(24))


def _article_pdf(pages: int = 3) -> bytes:
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page()
        page.insert_text((72, 40), "Journal of Examples, Volume 3", fontsize=8)
        page.insert_text((292, 815), str(number), fontsize=8)
        for column in range(2):
            box = pymupdf.Rect(72 + column * 235, 80, 282 + column * 235, 760)
            page.insert_textbox(box, _column_text(column, number), fontsize=10)
        if number == 1:  # a title across both columns, drawn after them
            page.insert_text((72, 66), "A Title Wider Than One Column Of The Page", fontsize=18)
    data: bytes = doc.tobytes()
    return data


def test_two_columns_in_order_with_running_header_and_page_numbers_as_furniture() -> None:
    package = _parse(_article_pdf())
    for page in package.pages:
        roles = [(b.role, b.text) for b in page.blocks if b.role]
        title = [("title", "A Title Wider Than One Column Of The Page")] if page.number == 1 else []
        assert roles == [
            ("header", "Journal of Examples, Volume 3"),
            *title,
            ("footer", str(page.number)),
        ]
        body = [" ".join(b.text.split()) for b in page.blocks if not b.role]
        # Column 0 entirely before column 1, each whole and untouched.
        assert body == [_column_text(0, page.number), _column_text(1, page.number)]
        assert page.text.index("Column 0 sentence 23") < page.text.index("Column 1 sentence 0")


def test_columns_drawn_line_by_line_alternately_with_the_footer_first() -> None:
    doc = pymupdf.open()
    for number in (1, 2):
        page = doc.new_page()
        page.insert_text((280, 815), f"Page {number}", fontsize=8)  # drawn first
        for i in range(20):
            page.insert_text((72, 100 + 14 * i), f"Left line {i} of the first column text")
            page.insert_text((320, 100 + 14 * i), f"Right line {i} of the second column")
    package = _parse(doc.tobytes())
    for read in package.pages:
        # Each column one paragraph, whole: mupdf gives a block per line drawn this way.
        assert [b.text for b in read.blocks if not b.role] == [
            "\n".join(f"Left line {i} of the first column text" for i in range(20)),
            "\n".join(f"Right line {i} of the second column" for i in range(20)),
        ]
        assert [(b.role, b.text) for b in read.blocks if b.role] == [
            ("footer", f"Page {read.number}")
        ]
        assert read.blocks[-1].role == "footer"


def test_the_outline_names_headings_the_fonts_do_not_show() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Overview", fontsize=10)
    page.insert_text((72, 100), BODY, fontsize=10)
    page.insert_text((72, 128), "Details of the method", fontsize=10)
    page.insert_text((72, 156), BODY.replace("Read", "Check"), fontsize=10)
    doc.set_toc([[1, "Overview", 1], [2, "Details of the method", 1]])
    blocks = _blocks(_parse(doc.tobytes()))
    got = [(b.text, b.role, b.level) for b in blocks]
    assert got == [
        ("Overview", "heading", 1),
        (BODY, "", 0),
        ("Details of the method", "heading", 2),
        (BODY.replace("Read", "Check"), "", 0),
    ]


def test_a_table_of_short_cells_is_read_row_by_row_not_as_columns() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    for row in range(8):
        for column in range(3):
            page.insert_text((72 + 170 * column, 100 + 16 * row), f"r{row}c{column}", fontsize=10)
    blocks = _blocks(_parse(doc.tobytes()))
    lines = [line for b in blocks for line in b.text.split("\n")]
    assert lines == [f"r{r}c{c}" for r in range(8) for c in range(3)]
    assert not any(b.role for b in blocks)


def test_a_one_page_document_s_small_running_head_is_furniture() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 40), "Technical Bulletin 12", fontsize=8)
    page.insert_text((72, 100), BODY, fontsize=10)
    page.insert_text((72, 114), "- a list item whose text runs on to a second line", fontsize=10)
    page.insert_text((82, 128), "under its hanging indent", fontsize=10)
    page.insert_text((72, 142), "Closing words of the bulletin, after the list.", fontsize=10)
    page.insert_text((72, 790), "1 A footnote is no page furniture.", fontsize=8)
    page.insert_text((72, 810), "Harbor Notes, page 1", fontsize=8)
    blocks = _blocks(_parse(doc.tobytes()))
    assert [(b.role, b.text) for b in blocks] == [
        ("header", "Technical Bulletin 12"),
        ("", BODY),
        (
            "list_item",
            "- a list item whose text runs on to a second line\nunder its hanging indent",
        ),
        ("", "Closing words of the bulletin, after the list."),
        ("footnote", "1 A footnote is no page furniture."),
        ("footer", "Harbor Notes, page 1"),
    ]


def test_footnotes_are_marked_with_their_mark_and_set_apart() -> None:
    """Notes in small type under the text, set one under the other (one block as mupdf groups
    them): a block a note, role "footnote", its mark the marker; small type that starts with a
    number but stands beside body text, or body text that starts with one, is none."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 100), BODY, fontsize=10)
    page.insert_text((72, 114), "12 apostles stood in a row, said the body text.", fontsize=10)
    page.insert_text((400, 130), "3 small words in the margin", fontsize=7)
    page.insert_text((72, 160), "Closing words of the bulletin, after the note marks.", fontsize=10)
    page.insert_text((72, 740), "1 The first note, which runs on to", fontsize=8)
    page.insert_text((72, 750), "a second line.", fontsize=8)
    page.insert_text((72, 760), "* The second note, marked with a star.", fontsize=8)
    page.insert_text((72, 770), "2 The third note.", fontsize=8)
    blocks = _blocks(_parse(doc.tobytes()))
    notes = [(b.marker, " ".join(b.text.split())) for b in blocks if b.role == "footnote"]
    assert notes == [
        ("1", "1 The first note, which runs on to a second line."),
        ("*", "* The second note, marked with a star."),
        ("2", "2 The third note."),
    ]
    assert all(b.role == "" for b in blocks if b.text.startswith(("12 apostles", "3 small")))


def test_a_large_heading_wrapped_on_three_lines_in_a_narrow_column() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    y = 100.0
    for text, size, font in [
        ("Furnace Ember Pewter", 24, "hebo"),
        ("1 Mirror Fjord", 20, "hebo"),
        ("Granite", 20, "hebo"),
        ("Meadow", 20, "hebo"),
        ("Body text of the section runs", 10, "helv"),
        ("on in the narrow column, well", 10, "helv"),
        ("below its wrapped heading.", 10, "helv"),
    ]:
        page.insert_text((72, y), text, fontsize=size, fontname=font)
        y += size * 1.25
    y += 30
    for text in ("A large pull quote that", "wraps on three lines and", "ends in a period."):
        page.insert_text((72, y), text, fontsize=14)
        y += 18
    blocks = _blocks(_parse(doc.tobytes()))
    got = [(b.text.split("\n")[0], b.role, b.level) for b in blocks]
    assert got == [
        ("Furnace Ember Pewter", "title", 1),
        ("1 Mirror Fjord", "heading", 2),
        ("Body text of the section runs", "", 0),
        ("A large pull quote that", "", 0),
    ]
