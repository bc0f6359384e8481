"""OpenDocument spreadsheets (ODS) and presentations (ODP): typed cells, merged ranges, hidden
sheets, the million-row padding that must cost nothing and repeated values refused before they
are expanded; slides with their titles, lists, tables, images, notes, comments and visibility.
Packages are written by hand (opendocument_files)."""

from __future__ import annotations

import resource
import time
from pathlib import Path

from docparse.reasons import ErrorReason
from docparse.render_markdown import to_markdown
from parser_svc.parsers.odf_sheet import parse_ods
from parser_svc.parsers.odf_slides import parse_odp
from tests.parser_svc.parsers.opendocument_files import (
    LIST_STYLES,
    cell,
    failure,
    frame,
    items,
    nothing,
    odf,
    options,
    p,
    png,
)

# --- ODS ------------------------------------------------------------------------------------


HIDDEN_TABLE = (
    '<style:style style:name="ta2" style:family="table">'
    '<style:table-properties table:display="false"/></style:style>'
)


def test_ods_typed_cells_merges_hidden_sheets_and_progress() -> None:
    body = (
        '<table:table table:name="Stock"><table:table-column table:number-columns-repeated="5"/>'
        "<table:table-row>"
        + cell("string", "", "Item")
        + cell("string", "", "Qty")
        + cell("string", "", "Checked", 'table:number-columns-spanned="2"')
        + "<table:covered-table-cell/>"
        + "</table:table-row><table:table-row>"
        + cell("string", "", "Bolts")
        + cell("float", 'office:value="120.5"', "120.50")
        + cell("date", 'office:date-value="2024-03-01"', "01/03/24")
        + cell("date", 'office:date-value="2024-03-01T12:30:00"', "01/03/24 12:30")
        + cell("boolean", 'office:boolean-value="true"', "TRUE")
        + "</table:table-row><table:table-row>"
        + cell("percentage", 'office:value="0.25"', "25%")
        + cell("currency", 'office:value="9.99" office:currency="EUR"', "9,99 €")
        + cell("time", 'office:time-value="PT12H30M05S"', "12:30:05")
        + '<table:table-cell office:value-type="float" office:value="0" calcext:value-type="error">'
        + p("#DIV/0!")
        + "</table:table-cell>"
        + "<table:table-cell>"
        + p("untyped")
        + "<office:annotation><dc:creator>Kim</dc:creator>"
        + p("a comment")
        + "</office:annotation></table:table-cell>"
        + "</table:table-row></table:table>"
        + '<table:table table:name="Secret" table:style-name="ta2"><table:table-row>'
        + cell("float", 'office:value="7"', "7")
        + "</table:table-row></table:table>"
    )
    meta = "<dc:title>Inventory</dc:title><meta:initial-creator>Kim</meta:initial-creator>"
    seen: list[tuple[int, int]] = []
    package = parse_ods(
        odf("ods", body, HIDDEN_TABLE, meta=meta),
        lambda done, total, stage: seen.append((done, total)),
        options(),
    )
    assert package.content_type == "ods" and not package.pages
    stock, secret = package.sheets
    assert (stock.name, stock.visibility, secret.name, secret.visibility) == (
        "Stock",
        "visible",
        "Secret",
        "hidden",
    )
    values = {
        (row.number, c.column): getattr(c, c.WhichOneof("value") or "string_value")
        for row in stock.rows
        for c in row.cells
    }
    assert values == {
        (1, 1): "Item",
        (1, 2): "Qty",
        (1, 3): "Checked",
        (2, 1): "Bolts",
        (2, 2): 120.5,
        (2, 3): "2024-03-01",
        (2, 4): "2024-03-01T12:30:00",
        (2, 5): True,
        (3, 1): 0.25,
        (3, 2): 9.99,
        (3, 3): "12:30:05",
        (3, 4): "#DIV/0!",
        (3, 5): "untyped",
    }
    assert stock.rows[2].cells[3].WhichOneof("value") == "error_value"
    assert stock.rows[2].cells[2].WhichOneof("value") == "datetime_value"
    assert stock.cell_count == 13 and list(stock.merged_ranges) == ["C1:D1"]
    assert package.metadata.title == "Inventory" and package.metadata.author == "Kim"
    assert seen[0] == (0, 2) and seen[-1] == (2, 2)
    assert "Checked" in to_markdown(package)


def test_ods_padding_a_million_rows_long_costs_nothing() -> None:
    body = (
        '<table:table table:name="S"><table:table-row>'
        + cell("float", 'office:value="1"', "1")
        + '<table:table-cell table:number-columns-repeated="16383"/></table:table-row>'
        + '<table:table-row table:number-rows-repeated="1048575">'
        + '<table:table-cell table:number-columns-repeated="16384"/></table:table-row>'
        + "<table:table-row>"
        + cell("string", 'table:number-columns-repeated="3"', "tail")
        + "</table:table-row></table:table>"
    )
    started = time.monotonic()
    package = parse_ods(odf("ods", body), nothing, options())
    assert time.monotonic() - started < 30  # expanding would take hours
    (sheet,) = package.sheets
    assert [r.number for r in sheet.rows] == [1, 1048577]
    assert [c.column for c in sheet.rows[1].cells] == [1, 2, 3]
    assert sheet.cell_count == 4


def test_ods_repeated_values_over_the_cell_limit_are_refused_before_expanding() -> None:
    body = (
        '<table:table table:name="S"><table:table-row table:number-rows-repeated="1000000">'
        + cell("float", 'office:value="1" table:number-columns-repeated="1000"', "1")
        + "</table:table-row></table:table>"
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    err = failure(parse_ods, odf("ods", body), max_cells=100_000)
    assert err.reason == ErrorReason.DOCUMENT_TOO_LARGE
    assert time.monotonic() - started < 30  # expanding would take hours
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 64


def test_ods_without_sheets_or_with_bad_xml_is_corrupt() -> None:
    assert failure(parse_ods, odf("ods", "")).reason == ErrorReason.CORRUPT_DOCUMENT
    broken = odf("ods", '<table:table table:name="S"><table:table-row>')
    assert failure(parse_ods, broken).reason == ErrorReason.CORRUPT_DOCUMENT


# --- ODP ------------------------------------------------------------------------------------

SLIDE_STYLES = (
    '<office:automatic-styles><style:page-layout style:name="PM1">'
    '<style:page-layout-properties fo:page-width="28cm" fo:page-height="15.75cm"/>'
    "</style:page-layout></office:automatic-styles><office:master-styles>"
    '<style:master-page style:name="Default" style:page-layout-name="PM1"/>'
    "</office:master-styles>"
)
HIDDEN_PAGE = (
    '<style:style style:name="dp2" style:family="drawing-page">'
    '<style:drawing-page-properties presentation:visibility="hidden"/></style:style>'
)


def test_odp_slides_titles_lists_tables_images_notes_and_comments(tmp_path: Path) -> None:
    box = "<draw:text-box>{}</draw:text-box>"
    table = (
        "<table:table><table:table-row><table:table-cell>"
        + p("Q1")
        + "</table:table-cell><table:table-cell>"
        + p("Q2")
        + "</table:table-cell></table:table-row><table:table-row><table:table-cell>"
        + p("10")
        + "</table:table-cell><table:table-cell>"
        + p("12")
        + "</table:table-cell></table:table-row></table:table>"
    )
    body = (
        '<draw:page draw:name="s1" draw:master-page-name="Default">'
        + frame(
            "outline",
            2,
            5,
            box.format(
                '<text:list text:style-name="B">'
                + items("Growth", "<text:list>" + items("EU first") + "</text:list>")
                + "</text:list>"
            ),
        )
        + frame("title", 2, 1, box.format(p("Why now")))
        + frame("subtitle", 2, 3, box.format(p("Q1 review")))
        + frame("", 15, 5, '<draw:image xlink:href="Pictures/logo.png"/>')
        + "<draw:g>"
        + '<draw:custom-shape svg:x="2cm" svg:y="12cm" svg:width="5cm" svg:height="1cm">'
        + p("Grouped shape")
        + "</draw:custom-shape></draw:g>"
        + "<presentation:notes><draw:page-thumbnail/>"
        + frame("notes", 1, 1, box.format(p("Open with the churn story")))
        + "</presentation:notes>"
        + "<officeooo:annotation><dc:creator>Kim</dc:creator>"
        + p("Numbers?")
        + "</officeooo:annotation></draw:page>"
        + '<draw:page draw:name="s2" draw:style-name="dp2">'
        + frame("title", 1, 1, box.format(p("Appendix")))
        + frame("table", 1, 4, table)
        + "</draw:page>"
    )
    logo = png(16, 16)
    data = odf(
        "odp", body, LIST_STYLES + HIDDEN_PAGE, SLIDE_STYLES, files={"Pictures/logo.png": logo}
    )
    seen: list[tuple[int, int]] = []
    package = parse_odp(data, lambda d, t, s: seen.append((d, t)), options(assets_dir=tmp_path))
    assert package.content_type == "odp" and seen[-1] == (2, 2)
    first, second = package.slides
    assert round(first.width) == 794 and round(first.height) == 446
    assert first.title == "Why now" and not first.hidden
    assert [(b.role, b.level, b.text, b.marker) for b in first.blocks] == [
        ("title", 1, "Why now", ""),
        ("heading", 2, "Q1 review", ""),
        ("list_item", 1, "Growth", "•"),
        ("list_item", 2, "EU first", "◦"),
        ("", 0, "Grouped shape", ""),
    ]
    assert round(first.blocks[0].bbox.y0) == 28
    (image,) = first.images
    assert image.asset_id == package.assets[0].asset_id and round(image.bbox.x0) == 425
    assert first.notes == "Open with the churn story"
    assert [(c.author, c.text) for c in first.comments] == [("Kim", "Numbers?")]
    assert second.hidden and second.title == "Appendix"
    (grid,) = second.tables
    assert [list(r.cells) for r in grid.rows] == [["Q1", "Q2"], ["10", "12"]]
    assert "Q1\tQ2\n10\t12" in second.text
    markdown = to_markdown(package)
    assert "# Why now" in markdown and "| Q1 | Q2 |" in markdown


def test_odp_slide_limit() -> None:
    pages = "".join(
        f'<draw:page draw:name="s{i}">{frame("title", 1, 1, "")}</draw:page>' for i in range(5)
    )
    err = failure(parse_odp, odf("odp", pages), max_pages=3)
    assert err.reason == ErrorReason.DOCUMENT_TOO_LARGE
