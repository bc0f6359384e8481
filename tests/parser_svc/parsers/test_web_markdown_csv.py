"""Markdown documents and CSV/TSV tables: the structure a reader sees (headings, nested lists,
tables, code, quotes) and the values a spreadsheet user would check (delimiter, header, typed
numbers and dates, quoted fields), and tables larger than the cell limit refused."""

from __future__ import annotations

import pytest

from docparse.reasons import ErrorReason
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.delimited import parse_csv
from parser_svc.parsers.detect import detect_type
from parser_svc.parsers.markdown_doc import parse_markdown

MARKDOWN = """---
title: "Release guide"
author: Ann Lee
---
# Installing

Run the **installer** and read [the notes](https://example.org/notes).
Then restart.

## Steps

3. Download
4. Unpack
   - check the *checksum*
   - keep the archive

     It is needed for repairs.
- Done

> Back up first.
> > Really.

| Option | Default |
|--------|--------:|
| `--fast` | off |
| `--jobs` | 4 |

```sh
make install
# not a heading
```

<div><p>Raw <b>HTML</b> block</p><script>alert(1)</script></div>
"""


def run(data: bytes, **overrides: object) -> rp.ReadingPackage:
    kind = detect_type(data)
    assert kind is not None
    options = ParseOptions.defaults(job_id="job1", deployment="test", **overrides)
    return parse(kind, data, lambda done, total, stage: None, options)


def values(sheet: rp.Sheet) -> list[list[tuple[int, str, object]]]:
    out: list[list[tuple[int, str, object]]] = []
    for row in sheet.rows:
        cells: list[tuple[int, str, object]] = []
        for cell in row.cells:
            kind = cell.WhichOneof("value") or ""
            cells.append((cell.column, kind, getattr(cell, kind)))
        out.append(cells)
    return out


# --- Markdown ---------------------------------------------------------------------------------


def test_markdown_structure_from_the_markup() -> None:
    package = run(MARKDOWN.encode())
    assert package.content_type == "markdown"
    assert (package.metadata.title, package.metadata.author) == ("Release guide", "Ann Lee")
    page = package.pages[0]
    assert [(b.role, b.text, b.level, b.marker, b.ordered) for b in page.blocks] == [
        ("heading", "Installing", 1, "", False),
        (
            "",
            "Run the installer and read the notes (https://example.org/notes). Then restart.",
            0,
            "",
            False,
        ),
        ("heading", "Steps", 2, "", False),
        ("list_item", "Download", 1, "3.", True),
        ("list_item", "Unpack", 1, "4.", True),
        ("list_item", "check the checksum", 2, "◦", False),
        ("list_item", "keep the archive\nIt is needed for repairs.", 2, "◦", False),
        ("list_item", "Done", 1, "•", False),
        ("quote", "Back up first.", 0, "", False),
        ("quote", "Really.", 0, "", False),
        ("table", "Option\tDefault\n--fast\toff\n--jobs\t4", 0, "", False),
        ("code", "make install\n# not a heading", 0, "", False),
        ("", "Raw HTML block", 0, "", False),
    ]
    (table,) = page.tables
    assert table.header_rows == 1
    assert [list(row.cells) for row in table.rows] == [
        ["Option", "Default"],
        ["--fast", "off"],
        ["--jobs", "4"],
    ]
    markdown = to_markdown(package)
    assert "## Steps" in markdown and "| --fast | off |" in markdown


def test_markdown_title_from_the_first_heading_without_front_matter() -> None:
    package = parse_markdown(
        "# Größe\n\nText".encode("cp1252"), lambda *a: None, ParseOptions.defaults()
    )
    assert package.metadata.title == "Größe"
    assert package.pages[0].text == "Größe\n\nText"


def test_markdown_nesting_past_the_limit_is_read_as_text_not_dropped() -> None:
    deep = "> " * 200 + "quoted words\n\nafter"
    package = parse_markdown(deep.encode(), lambda *a: None, ParseOptions.defaults())
    assert "quoted words" in package.pages[0].text and "after" in package.pages[0].text
    assert "plain text" in package.warnings[0]
    shallow = parse_markdown(b"> > > quoted", lambda *a: None, ParseOptions.defaults())
    assert [(b.role, b.text) for b in shallow.pages[0].blocks] == [("quote", "quoted")]


# --- CSV / TSV --------------------------------------------------------------------------------


def test_semicolon_cp1252_csv_with_header_decimal_commas_and_dates() -> None:
    data = (
        "Order;Date;Amount;Customer\r\n"
        "1001;2024-03-01;12,50;Müller GmbH\r\n"
        '1002;2024-03-02 14:30;7;"Smith; Jones"\r\n'
        "1003;2024-03-05;100,00;Œuvre Café\r\n"
    ).encode("cp1252")
    package = run(data)
    assert package.content_type == "csv"
    (sheet,) = package.sheets
    assert sheet.name == "Sheet1" and sheet.cell_count == 16
    assert values(sheet) == [
        [
            (1, "string_value", "Order"),
            (2, "string_value", "Date"),
            (3, "string_value", "Amount"),
            (4, "string_value", "Customer"),
        ],
        [
            (1, "number_value", 1001.0),
            (2, "datetime_value", "2024-03-01"),
            (3, "number_value", 12.5),
            (4, "string_value", "Müller GmbH"),
        ],
        [
            (1, "number_value", 1002.0),
            (2, "datetime_value", "2024-03-02T14:30:00"),
            (3, "number_value", 7.0),
            (4, "string_value", "Smith; Jones"),
        ],
        [
            (1, "number_value", 1003.0),
            (2, "datetime_value", "2024-03-05"),
            (3, "number_value", 100.0),
            (4, "string_value", "Œuvre Café"),
        ],
    ]
    extra = package.metadata.extra
    assert (extra["delimiter"], extra["header_row"]) == ("semicolon", "true")


def test_csv_with_bom_quoted_newlines_ragged_rows_and_identifier_columns() -> None:
    data = (
        b"\xef\xbb\xbfid,name,zip,note\n"
        b'1,Ann,01234,"line one\nline two"\n2,Bob,98765,"say ""hi"""\n3,Cy\n'
    )
    sheet = run(data).sheets[0]
    assert [row.number for row in sheet.rows] == [1, 2, 3, 4]
    assert values(sheet)[1:] == [
        [
            (1, "number_value", 1.0),
            (2, "string_value", "Ann"),
            (3, "string_value", "01234"),
            (4, "string_value", "line one\nline two"),
        ],
        [
            (1, "number_value", 2.0),
            (2, "string_value", "Bob"),
            (3, "string_value", "98765"),
            (4, "string_value", 'say "hi"'),
        ],
        [(1, "number_value", 3.0), (2, "string_value", "Cy")],
    ]


@pytest.mark.parametrize(("delimiter", "name"), [("\t", "tab"), ("|", "pipe"), (",", "comma")])
def test_delimiters_are_sniffed(delimiter: str, name: str) -> None:
    rows = [
        ["city", "population", "founded"],
        ["Lyon", "522250", "-43"],
        ["Graz", "291072", "1128"],
    ]
    data = "\n".join(delimiter.join(row) for row in rows).encode()
    package = parse_csv(data, lambda *a: None, ParseOptions.defaults())
    assert package.metadata.extra["delimiter"] == name
    assert values(package.sheets[0])[2] == [
        (1, "string_value", "Graz"),
        (2, "number_value", 291072.0),
        (3, "number_value", 1128.0),
    ]


def test_excel_unicode_text_export_utf16_tab_separated() -> None:
    name, city = "Светлана", "Москва"
    data = f"Name\tStadt\tBetrag\nJürgen\tKöln\t12,5\n{name}\t{city}\t7\n".encode("utf-16")
    package = run(data)
    assert package.content_type == "csv"
    assert package.metadata.extra["delimiter"] == "tab"
    assert values(package.sheets[0])[1:] == [
        [(1, "string_value", "Jürgen"), (2, "string_value", "Köln"), (3, "number_value", 12.5)],
        [(1, "string_value", name), (2, "string_value", city), (3, "number_value", 7.0)],
    ]


def test_a_first_row_of_values_is_no_header() -> None:
    package = parse_csv(b"1,2.5\n3,4\n", lambda *a: None, ParseOptions.defaults())
    assert package.metadata.extra["header_row"] == "false"
    assert values(package.sheets[0])[0] == [(1, "number_value", 1.0), (2, "number_value", 2.5)]


def test_a_mixed_column_stays_text() -> None:
    sheet = parse_csv(b"code,qty\nA1,3\n12,n/a\n", lambda *a: None, ParseOptions.defaults()).sheets[
        0
    ]
    assert values(sheet)[2] == [(1, "string_value", "12"), (2, "string_value", "n/a")]


def test_csv_over_the_cell_limit_is_too_large() -> None:
    data = b"a,b,c,d\n" + b"1,2,3,4\n" * 1000
    with pytest.raises(ParseFailure) as failure:
        parse_csv(data, lambda *a: None, ParseOptions.defaults(max_cells=2000))
    assert failure.value.reason == ErrorReason.DOCUMENT_TOO_LARGE
    assert "2000" in failure.value.message


def test_long_markdown_parsed_in_pieces_reads_like_the_whole() -> None:
    section = (
        "## Step {n}\n\nSee the [docs][manual] and `code`.\n\n"
        "```text\nfirst line\n\nColumn zero after a blank line\n```\n\n"
        "<pre>\nraw\n\nZero column inside pre\n</pre>\n\n"
        "1. one\n2. two\n\n   still two\n\n"
    )
    text = "".join(section.format(n=n) for n in range(1200)) + "\n[manual]: https://example.org/m\n"
    assert len(text) > 3 * 64 * 1024
    package = parse_markdown(text.encode(), lambda *a: None, ParseOptions.defaults())
    page = package.pages[0]
    code = [b.text for b in page.blocks if b.role == "code"]
    fenced, pre = "first line\n\nColumn zero after a blank line", "raw\n\nZero column inside pre"
    assert code == [fenced, pre] * 1200
    paragraphs = [b.text for b in page.blocks if b.role == ""]
    assert paragraphs.count("See the docs (https://example.org/m) and code.") == 1200
    items = [(b.text, b.marker) for b in page.blocks if b.role == "list_item"]
    assert items == [("one", "1."), ("two\nstill two", "2.")] * 1200
    assert [b.text for b in page.blocks if b.role == "heading"][-1] == "Step 1199"


def test_a_value_far_to_the_right_costs_one_cell() -> None:
    data = b"name,count\n" + b"," * 3_000_000 + b"far\n"
    sheet = parse_csv(data, lambda *a: None, ParseOptions.defaults()).sheets[0]
    assert values(sheet)[-1] == [(3_000_001, "string_value", "far")]
    assert sheet.cell_count == 3
