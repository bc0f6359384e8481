"""Structure from the Office formats' own markup: headings and levels, lists with their markers
and numbers, merged table cells, header rows and captions (DOCX, PPTX), merged ranges (XLSX,
XLS). Every document is written here, so its structure is known by construction."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions
from parser_svc.parsers.detect import detect_type
from tests import fixtures

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"


def run(data: bytes, assets: Path | None = None) -> rp.ReadingPackage:
    kind = detect_type(data)
    assert kind is not None
    options = ParseOptions.defaults(job_id="job1", deployment="test")
    options.assets_dir = assets
    return parse(kind, data, lambda done, total, stage: None, options)


def blocks(package: rp.ReadingPackage) -> dict[str, tuple[str, int, str, bool]]:
    page = package.pages[0]
    return {b.text: (b.role, b.level, b.marker, b.ordered) for b in page.blocks}


def saved(document: Any) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# --- Word: headings ------------------------------------------------------------------------


def test_docx_heading_levels_from_styles_based_on_styles_and_outline_levels() -> None:
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import parse_xml

    document = docx.Document()
    document.add_heading("The plan", level=0)
    document.add_heading("Scope", level=1)
    document.add_heading("Inside the fence", level=2)
    document.add_heading("Ninth level", level=9)
    custom = document.styles.add_style("Chapter Head", WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = document.styles["Heading 2"]
    document.add_paragraph("Based on heading two", style="Chapter Head")
    outlined = document.styles.add_style("Outlined", WD_STYLE_TYPE.PARAGRAPH)
    outlined.element.get_or_add_pPr().append(parse_xml(f'<w:outlineLvl xmlns:w="{W}" w:val="0"/>'))
    document.add_paragraph("Style outline level zero", style="Outlined")
    direct = document.add_paragraph("Paragraph outline level three")
    direct._p.get_or_add_pPr().append(parse_xml(f'<w:outlineLvl xmlns:w="{W}" w:val="3"/>'))
    document.add_paragraph("Plain body text.")
    found = blocks(run(saved(document)))
    assert found["The plan"] == ("title", 1, "", False)
    assert found["Scope"] == ("heading", 1, "", False)
    assert found["Inside the fence"] == ("heading", 2, "", False)
    assert found["Ninth level"] == ("heading", 6, "", False)
    assert found["Based on heading two"] == ("heading", 2, "", False)
    assert found["Style outline level zero"] == ("heading", 1, "", False)
    assert found["Paragraph outline level three"] == ("heading", 4, "", False)
    assert found["Plain body text."] == ("", 0, "", False)


def test_docx_style_inheritance_cycles_and_long_chains_do_not_break_the_parse() -> None:
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import parse_xml

    document = docx.Document()
    styles = document.styles
    first = styles.add_style("Loop A", WD_STYLE_TYPE.PARAGRAPH)
    second = styles.add_style("Loop B", WD_STYLE_TYPE.PARAGRAPH)
    first.base_style, second.base_style = second, first
    chain = "".join(
        f'<w:style w:type="paragraph" w:styleId="C{i}"><w:name w:val="Chain {i}"/>'
        f'<w:basedOn w:val="{f"C{i - 1}" if i else "Heading3"}"/></w:style>'
        for i in range(1500)  # deeper than Python's recursion limit
    )
    for style in parse_xml(f'<w:styles xmlns:w="{W}">{chain}</w:styles>'):
        styles.element.append(style)
    document.add_paragraph("In a loop of styles", style="Loop A")
    document.add_paragraph("Near the chain's start", style="Chain 3")
    document.add_paragraph("At the end of a long chain", style="Chain 1499")
    found = blocks(run(saved(document)))
    assert found["In a loop of styles"] == ("", 0, "", False)
    assert found["Near the chain's start"] == ("heading", 3, "", False)
    assert found["At the end of a long chain"][0] in ("", "heading")


# --- Word: lists ---------------------------------------------------------------------------

NUMBERING = f"""<w:numbering xmlns:w="{W}">
<w:abstractNum w:abstractNumId="90">
  <w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>
  <w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/>
    <w:lvlText w:val="%2)"/></w:lvl>
  <w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="lowerRoman"/>
    <w:lvlText w:val="%1.%3"/></w:lvl>
</w:abstractNum>
<w:abstractNum w:abstractNumId="91">
  <w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/><w:lvlText w:val="\uf0b7"/></w:lvl>
  <w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/><w:lvlText w:val="\uf0a7"/></w:lvl>
</w:abstractNum>
<w:num w:numId="70"><w:abstractNumId w:val="90"/></w:num>
<w:num w:numId="71"><w:abstractNumId w:val="90"/></w:num>
<w:num w:numId="72"><w:abstractNumId w:val="90"/>
  <w:lvlOverride w:ilvl="0"><w:startOverride w:val="5"/></w:lvlOverride></w:num>
<w:num w:numId="73"><w:abstractNumId w:val="91"/></w:num>
</w:numbering>"""


def _numbered(document: Any, text: str, num_id: int, ilvl: int) -> None:
    from docx.oxml import parse_xml

    paragraph = document.add_paragraph(text)
    paragraph._p.get_or_add_pPr().append(
        parse_xml(
            f'<w:numPr xmlns:w="{W}"><w:ilvl w:val="{ilvl}"/><w:numId w:val="{num_id}"/></w:numPr>'
        )
    )


def test_docx_lists_carry_level_marker_and_the_number_counted_within_the_list() -> None:
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    numbering = document.part.numbering_part
    numbering._element = parse_xml(NUMBERING.encode())
    for text, num_id, ilvl in [
        ("Unpack the box", 70, 0),
        ("Check the parts", 70, 0),
        ("Count the screws", 70, 1),
        ("Count the bolts", 70, 1),
        ("Screw sizes", 70, 2),
        ("Assemble the frame", 70, 0),
        ("Sub-step after a new top item", 70, 1),
        ("A second list starts over", 71, 0),
        ("Restarted list, second item", 71, 0),
        ("Starts at five", 72, 0),
        ("Power cable", 73, 0),
        ("Spare fuse", 73, 1),
    ]:
        _numbered(document, text, num_id, ilvl)
    document.add_paragraph("Default bullet style", style="List Bullet")
    document.add_paragraph("Second-level bullet style", style="List Bullet 2")
    document.add_paragraph("Not in a list.")
    found = blocks(run(saved(document)))
    assert found["Unpack the box"] == ("list_item", 1, "1.", True)
    assert found["Check the parts"] == ("list_item", 1, "2.", True)
    assert found["Count the screws"] == ("list_item", 2, "a)", True)
    assert found["Count the bolts"] == ("list_item", 2, "b)", True)
    assert found["Screw sizes"] == ("list_item", 3, "2.i", True)
    assert found["Assemble the frame"] == ("list_item", 1, "3.", True)
    assert found["Sub-step after a new top item"] == ("list_item", 2, "a)", True)
    assert found["A second list starts over"] == ("list_item", 1, "1.", True)
    assert found["Restarted list, second item"] == ("list_item", 1, "2.", True)
    assert found["Starts at five"] == ("list_item", 1, "5.", True)
    assert found["Power cable"] == ("list_item", 1, "•", False)
    assert found["Spare fuse"] == ("list_item", 2, "▪", False)
    assert found["Default bullet style"] == ("list_item", 1, "•", False)
    assert found["Second-level bullet style"][:2] == ("list_item", 2)
    assert found["Not in a list."] == ("", 0, "", False)


# --- Word: tables and captions -------------------------------------------------------------


def test_docx_table_spans_header_rows_and_captions() -> None:
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    document.add_paragraph("Table 1: Results by region", style="Caption")
    table = document.add_table(rows=4, cols=3)
    grid = [["Region", "Sales", ""], ["", "Q1", "Q2"], ["North", "10", "12"], ["", "11", "13"]]
    for r, row in enumerate(grid):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    table.cell(0, 1).merge(table.cell(0, 2)).text = "Sales"  # two columns
    table.cell(0, 0).merge(table.cell(1, 0)).text = "Region"  # two rows
    table.cell(2, 0).merge(table.cell(3, 0)).text = "North"
    for tr in table._tbl.tr_lst[:2]:
        tr.get_or_add_trPr().append(parse_xml(f'<w:tblHeader xmlns:w="{W}"/>'))
    document.add_paragraph("Body between the tables.")
    second = document.add_table(rows=1, cols=2)
    second.cell(0, 0).text, second.cell(0, 1).text = "a", "b"
    document.add_paragraph("Table 2: Below its table", style="Caption")
    page = run(saved(document)).pages[0]
    first, other = page.tables
    assert [list(row.cells) for row in first.rows] == [
        ["Region", "Sales", "Sales"],
        ["Region", "Q1", "Q2"],
        ["North", "10", "12"],
        ["North", "11", "13"],
    ]
    spans = [[(s.column, s.row_span, s.col_span) for s in row.spans] for row in first.rows]
    assert spans == [[(0, 2, 1), (1, 1, 2)], [], [(0, 2, 1)], []]
    assert first.header_rows == 2
    assert first.caption == "Table 1: Results by region"
    assert other.caption == "Table 2: Below its table" and other.header_rows == 0
    assert blocks(run(saved(document)))["Table 1: Results by region"][0] == "caption"


def test_docx_row_that_skips_grid_columns_stays_a_full_grid() -> None:
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    table = document.add_table(rows=2, cols=4)
    for r in range(2):
        for c in range(4):
            table.cell(r, c).text = f"{r}{c}"
    table.cell(1, 2).merge(table.cell(1, 3)).text = "wide"
    row = table._tbl.tr_lst[1]
    row.remove(row.tc_lst[0])  # the row starts at the second grid column
    row.insert(0, parse_xml(f'<w:trPr xmlns:w="{W}"><w:gridBefore w:val="1"/></w:trPr>'))
    (out,) = run(saved(document)).pages[0].tables
    assert [list(r.cells) for r in out.rows] == [
        ["00", "01", "02", "03"],
        ["", "11", "wide", "wide"],
    ]
    assert [(s.column, s.col_span) for s in out.rows[1].spans] == [(2, 2)]


def test_docx_figure_caption_goes_to_the_image(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_picture(io.BytesIO(fixtures.PNG))
    document.add_paragraph("Figure 1: The red square", style="Caption")
    document.add_paragraph("A paragraph that is no caption.")
    page = run(saved(document), tmp_path).pages[0]
    assert [image.caption for image in page.images] == ["Figure 1: The red square"]


# --- PowerPoint ----------------------------------------------------------------------------


def _bullet(paragraph: Any, tag: str, **attributes: str) -> None:
    from lxml import etree  # type: ignore[import-untyped]

    ppr = paragraph._p.get_or_add_pPr()
    etree.SubElement(ppr, f"{{{A}}}{tag}", attributes)


def slide_blocks(slide: rp.Slide) -> list[tuple[str, str, int, str, bool]]:
    return [(b.text, b.role, b.level, b.marker, b.ordered) for b in slide.blocks]


def test_pptx_titles_bullet_levels_and_counted_auto_numbers() -> None:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    cover = deck.slides.add_slide(deck.slide_layouts[0])
    cover.shapes.title.text = "Quarterly review"
    cover.placeholders[1].text = "Finance team"
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Agenda"
    frame = slide.placeholders[1].text_frame
    frame.text = "Revenue"
    for text, level in [("By region", 1), ("By product", 2), ("No bullet here", 0)]:
        paragraph = frame.add_paragraph()
        paragraph.text, paragraph.level = text, level
    _bullet(frame.paragraphs[-1], "buNone")
    box = slide.shapes.add_textbox(Inches(1), Inches(6), Inches(6), Inches(1)).text_frame
    box.text = "Plain text in a box"
    for text, tag, attributes in [
        ("Call the bank", "buAutoNum", {"type": "alphaLcParenR", "startAt": "3"}),
        ("Sign the lease", "buAutoNum", {"type": "alphaLcParenR", "startAt": "3"}),
        ("A dash item", "buChar", {"char": "\u2013"}),
        ("Numbered anew", "buAutoNum", {"type": "romanUcPeriod"}),
    ]:
        paragraph = box.add_paragraph()
        paragraph.text = text
        _bullet(paragraph, tag, **attributes)
    section = deck.slides.add_slide(deck.slide_layouts[2])  # its layout's body says buNone
    section.shapes.title.text = "Part two"
    section.placeholders[1].text = "What the second part covers"
    first, second, third = run(saved(deck)).slides
    assert sorted(slide_blocks(third)) == [
        ("Part two", "title", 1, "", False),
        ("What the second part covers", "", 0, "", False),
    ]
    assert slide_blocks(first) == [
        ("Quarterly review", "title", 1, "", False),
        ("Finance team", "heading", 2, "", False),
    ]
    assert first.title == "Quarterly review" and second.title == "Agenda"
    assert slide_blocks(second) == [
        ("Agenda", "title", 1, "", False),
        ("Revenue", "list_item", 1, "•", False),
        ("By region", "list_item", 2, "•", False),
        ("By product", "list_item", 3, "•", False),
        ("No bullet here", "", 0, "", False),
        ("Plain text in a box", "", 0, "", False),
        ("Call the bank", "list_item", 1, "c)", True),
        ("Sign the lease", "list_item", 1, "d)", True),
        ("A dash item", "list_item", 1, "\u2013", False),
        ("Numbered anew", "list_item", 1, "I.", True),
    ]
    assert "By region" in second.text


def test_pptx_table_merged_cells_and_header_row_flag() -> None:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    shapes = [
        slide.shapes.add_table(3, 3, Inches(1), Inches(1), Inches(6), Inches(2)).table,
        slide.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(6), Inches(1)).table,
    ]
    merged, plain = shapes
    for r in range(3):
        for c in range(3):
            merged.cell(r, c).text = f"r{r}c{c}"
    merged.cell(1, 0).merge(merged.cell(2, 1))  # moves the covered cells' text into r1c0
    merged.cell(0, 1).merge(merged.cell(0, 2))
    merged.cell(1, 0).text, merged.cell(0, 1).text = "r1c0", "r0c1"
    plain.first_row = False
    for r in range(2):
        for c in range(2):
            plain.cell(r, c).text = f"p{r}{c}"
    first, second = run(saved(deck)).slides[0].tables
    assert [list(row.cells) for row in first.rows] == [
        ["r0c0", "r0c1", "r0c1"],
        ["r1c0", "r1c0", "r1c2"],
        ["r1c0", "r1c0", "r2c2"],
    ]
    spans = [[(s.column, s.row_span, s.col_span) for s in row.spans] for row in first.rows]
    assert spans == [[(1, 1, 2)], [(0, 2, 2)], []]
    assert first.header_rows == 1
    assert second.header_rows == 0 and not any(row.spans for row in second.rows)


# --- Workbooks -----------------------------------------------------------------------------


def test_xlsx_merged_ranges_per_sheet() -> None:
    import openpyxl  # type: ignore[import-untyped]

    book = openpyxl.Workbook()
    report = book.active
    report.title = "Report"
    report["A1"] = "Quarterly sales"
    report.merge_cells("A1:D1")
    report["A2"], report["B2"] = "Region", "Q1"
    report.merge_cells("A2:A4")
    report.merge_cells("AA100:AB200")
    flat = book.create_sheet("Flat")
    flat["A1"] = "no merges here"
    package = run(saved(book))
    sheets = {sheet.name: list(sheet.merged_ranges) for sheet in package.sheets}
    assert sheets == {"Report": ["A1:D1", "A2:A4", "AA100:AB200"], "Flat": []}
    assert package.sheets[0].rows[0].cells[0].string_value == "Quarterly sales"


def _merged_xls(ranges: list[tuple[int, int, int, int]]) -> bytes:
    """A BIFF8-style workbook stream: one worksheet, a chart sheet before it (left out, as xlrd
    leaves it out), a label in A1 and a MERGEDCELLS record."""
    biff = fixtures._biff
    bof_globals = biff(0x0809, struct.pack("<HHHH", 0x0600, 0x0005, 0x0DBB, 0x07CC))
    eof = biff(0x000A, b"")

    def boundsheet(offset: int, kind: int, name: bytes) -> bytes:
        return biff(0x0085, struct.pack("<iBB", offset, 0, kind) + bytes([len(name), 0]) + name)

    chart_at = len(bof_globals) + 2 * len(boundsheet(0, 0, b"Chart")) + len(eof)
    chart = biff(0x0809, struct.pack("<HHHH", 0x0600, 0x0020, 0x0DBB, 0x07CC))
    chart += biff(0x00E5, struct.pack("<HHHHH", 1, 0, 9, 0, 9)) + eof
    sheet_at = chart_at + len(chart)
    stream = bof_globals + boundsheet(chart_at, 2, b"Chart") + boundsheet(sheet_at, 0, b"Sheet")
    stream += eof + chart
    stream += biff(0x0809, struct.pack("<HHHH", 0x0600, 0x0010, 0x0DBB, 0x07CC))
    stream += biff(0x0200, struct.pack("<IIHHH", 0, 1, 0, 1, 0))
    stream += biff(0x0204, struct.pack("<HHHHB", 0, 0, 0, 5, 0) + b"Title")
    body = struct.pack("<H", len(ranges)) + b"".join(struct.pack("<HHHH", *r) for r in ranges)
    stream += biff(0x00E5, body) + eof
    return fixtures._cfb({"Workbook": stream.ljust(4096, b"\0")})


def test_xls_merged_ranges_from_the_mergedcells_records() -> None:
    from parser_svc.parsers.xls_merges import worksheet_merges

    data = _merged_xls([(0, 0, 0, 3), (1, 4, 0, 0), (9, 10, 26, 27)])
    package = run(data)
    assert [sheet.name for sheet in package.sheets] == ["Sheet"]
    assert list(package.sheets[0].merged_ranges) == ["A1:D1", "A2:A5", "AA10:AB11"]
    assert package.sheets[0].rows[0].cells[0].string_value == "Title"
    assert worksheet_merges(b"\x09\x08\x02") == []  # a truncated stream: nothing, no error


def test_list_markers_in_each_numbering_format() -> None:
    from parser_svc.parsers.list_markers import autonum_marker, format_number

    assert [format_number(n, "lowerRoman") for n in (1, 4, 9, 14, 40, 1994)] == [
        "i",
        "iv",
        "ix",
        "xiv",
        "xl",
        "mcmxciv",
    ]
    assert [format_number(n, "upperLetter") for n in (1, 26, 27, 28)] == ["A", "Z", "AA", "BB"]
    assert format_number(7, "decimalZero") == "07" and format_number(7, "ordinalText") == "7"
    assert format_number(10**9, "lowerLetter") == str(10**9)  # no billion-letter marker
    assert autonum_marker(3, "arabicParenBoth") == "(3)"
    assert autonum_marker(2, "romanLcParenR") == "ii)"
    assert autonum_marker(5, "unknownScheme") == "5."
