"""HTML pages and plain text files, and the character sets every text format is read in: what a
reader of the page would check (headings and their levels, list items with depth and marker,
table cells with their spans, the words in the right script), and hostile pages refused with
their reason before they cost what they declare. Every document is written here."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from docparse.reasons import ErrorReason
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.detect import detect_type
from parser_svc.parsers.html_page import MAX_ELEMENTS, parse_html
from parser_svc.parsers.plain_text import parse_text
from parser_svc.parsers.text_charset import declared_charset, decode_text
from tests.fixtures import PNG

RUSSIAN = "Съешь же ещё этих мягких французских булок, да выпей чаю."
JAPANESE = "東京都の天気は晴れです。明日は雨が降るでしょう。"
GERMAN = "Größere Übermaße: Straße, Äpfel und Öl für schöne Grüße."


def run(data: bytes, assets: Path | None = None, **overrides: object) -> rp.ReadingPackage:
    kind = detect_type(data)
    assert kind is not None
    options = ParseOptions.defaults(job_id="job1", deployment="test", **overrides)
    options.assets_dir = assets
    return parse(kind, data, lambda done, total, stage: None, options)


def blocks(package: rp.ReadingPackage) -> list[tuple[str, str, int, str, bool]]:
    return [(b.role, b.text, b.level, b.marker, b.ordered) for b in package.pages[0].blocks]


def html(body: str, head: str = "", charset: str = "utf-8") -> bytes:
    return f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>".encode(charset)


def no_replacement(package: rp.ReadingPackage) -> None:
    assert all("\ufffd" not in page.text for page in package.pages)


# --- HTML structure ---------------------------------------------------------------------------


def test_html_headings_paragraphs_links_and_metadata() -> None:
    page = html(
        "<h1>Water   notice</h1><p>Supply stops on <b>Monday</b>; see "
        '<a href="https://water.example.org/notice">the notice</a> or <a href="#map">the map</a>.'
        "<br>Bring containers.</p><h3>Affected streets</h3><div><p>Mill Lane</p></div>",
        head='<meta charset="utf-8"><title>Water notice — Ward 4</title>'
        '<meta name="author" content="City Water Board">'
        '<meta name="description" content="Planned interruption">',
    )
    package = run(page)
    assert package.content_type == "html"
    assert package.metadata.title == "Water notice — Ward 4"
    assert package.metadata.author == "City Water Board"
    assert package.metadata.subject == "Planned interruption"
    assert blocks(package) == [
        ("heading", "Water notice", 1, "", False),
        (
            "",
            "Supply stops on Monday; see the notice (https://water.example.org/notice) or "
            "the map.\nBring containers.",
            0,
            "",
            False,
        ),
        ("heading", "Affected streets", 3, "", False),
        ("", "Mill Lane", 0, "", False),
    ]
    markdown = to_markdown(package)
    assert "# Water notice\n" in markdown and "### Affected streets" in markdown


def test_html_lists_nest_with_markers_start_type_value_and_reversed() -> None:
    page = html(
        "<ul><li>Tools<ul><li>Hammer</li><li>Saw<ul><li>Blade</li></ul></li></ul></li>"
        "<li>Paint</li></ul>"
        '<ol start="4"><li>Fourth</li><li>Fifth</li></ol>'
        '<ol type="a"><li>alpha</li><li value="5">echo</li></ol>'
        '<ol type="I"><li>one</li><li>two</li></ol>'
        "<ol reversed><li>three</li><li>two</li><li>one</li></ol>"
    )
    assert [b for b in blocks(run(page)) if b[0] == "list_item"] == [
        ("list_item", "Tools", 1, "•", False),
        ("list_item", "Hammer", 2, "◦", False),
        ("list_item", "Saw", 2, "◦", False),
        ("list_item", "Blade", 3, "▪", False),
        ("list_item", "Paint", 1, "•", False),
        ("list_item", "Fourth", 1, "4.", True),
        ("list_item", "Fifth", 1, "5.", True),
        ("list_item", "alpha", 1, "a.", True),
        ("list_item", "echo", 1, "e.", True),
        ("list_item", "one", 1, "I.", True),
        ("list_item", "two", 1, "II.", True),
        ("list_item", "three", 1, "3.", True),
        ("list_item", "two", 1, "2.", True),
        ("list_item", "one", 1, "1.", True),
    ]


def test_html_table_header_rows_spans_caption_and_nested_table() -> None:
    page = html(
        "<table><caption>Table 1: Rates</caption>"
        '<thead><tr><th rowspan="2">Zone</th><th colspan="2">Price</th></tr>'
        "<tr><th>Day</th><th>Night</th></tr></thead>"
        "<tbody><tr><td>North</td><td>0.30</td><td>0.12</td></tr>"
        "<tr><td>South</td><td colspan=2><table><tr><td>flat</td><td>0.25</td></tr>"
        "<tr><td>cap</td><td>40</td></tr></table></td></tr></tbody></table>"
    )
    package = run(page)
    (table,) = package.pages[0].tables
    assert table.header_rows == 2
    assert table.caption == "Table 1: Rates"
    assert [list(row.cells) for row in table.rows] == [
        ["Zone", "Price", "Price"],
        ["Zone", "Day", "Night"],
        ["North", "0.30", "0.12"],
        ["South", "flat | 0.25\ncap | 40", "flat | 0.25\ncap | 40"],
    ]
    assert [(s.column, s.row_span, s.col_span) for s in table.rows[0].spans] == [
        (0, 2, 1),
        (1, 1, 2),
    ]
    assert [(s.column, s.row_span, s.col_span) for s in table.rows[3].spans] == [(1, 1, 2)]
    assert [b.role for b in package.pages[0].blocks] == ["caption", "table"]
    assert 'rowspan="2"' in to_markdown(package)


def test_html_th_rows_are_header_rows_and_layout_tables_are_read_as_content() -> None:
    data_table = html(
        "<table><tr><th>Name</th><th>Age</th></tr><tr><td>Ann</td><td>41</td></tr></table>"
    )
    assert run(data_table).pages[0].tables[0].header_rows == 1
    layout = html(
        "<table><tr><td><h2>Menu</h2><ul><li>Home</li></ul></td>"
        "<td><p>Body text</p></td></tr></table>"
    )
    package = run(layout)
    assert not package.pages[0].tables
    assert [b[:3] for b in blocks(package)] == [
        ("heading", "Menu", 2),
        ("list_item", "Home", 1),
        ("", "Body text", 0),
    ]


def test_html_cells_keep_their_lists_and_headings_inside_the_table() -> None:
    page = html(
        "<table><tr><th>Part</th><th>Steps</th></tr><tr><td><h4>Pump</h4></td>"
        "<td><ol><li>Drain</li><li>Open</li></ol></td></tr></table><p>After</p>"
    )
    package = run(page)
    assert [list(row.cells) for row in package.pages[0].tables[0].rows] == [
        ["Part", "Steps"],
        ["Pump", "1. Drain\n2. Open"],
    ]
    assert [b.role for b in package.pages[0].blocks] == ["table", ""]


def test_html_page_navigation_and_footer_are_furniture() -> None:
    page = html(
        '<nav><ul><li><a href="/">Home</a></li><li>Contact</li></ul></nav>'
        "<main><h1>Opening hours</h1><p>Daily 9-17.</p></main>"
        "<article><p>Story</p><footer><p>By Ann</p></footer></article>"
        "<footer><p>© 2026 Town Library</p></footer>"
    )
    package = run(page)
    roles = [(b.role, b.text) for b in package.pages[0].blocks]
    assert roles == [
        ("header", "Home"),
        ("header", "Contact"),
        ("heading", "Opening hours"),
        ("", "Daily 9-17."),
        ("", "Story"),
        ("", "By Ann"),
        ("footer", "© 2026 Town Library"),
    ]
    markdown = to_markdown(package)
    assert "Town Library" not in markdown and "Contact" not in markdown
    assert "Town Library" in to_markdown(package, furniture=True)


def test_html_pre_is_verbatim_and_blockquote_is_a_quote() -> None:
    page = html(
        "<pre>\nfor x in range(3):\n    print(x)\n</pre>"
        "<blockquote><p>To be, or not.</p></blockquote>"
    )
    assert blocks(run(page)) == [
        ("code", "for x in range(3):\n    print(x)", 0, "", False),
        ("quote", "To be, or not.", 0, "", False),
    ]


def test_html_drops_scripts_styles_templates_and_hidden_content() -> None:
    page = html(
        "<p>Visible</p><script>document.write('script text')</script><style>p{}</style>"
        "<noscript>Enable JavaScript</noscript><template><p>template text</p></template>"
        '<div hidden>hidden attribute</div><p style="color:red; display : none">display none</p>'
        '<span style="visibility:hidden">invisible</span><p>After <!-- a comment -->all</p>'
        "<p><ruby>東京<rp>(</rp><rt>とうきょう</rt><rp>)</rp></ruby>駅</p>",
        head="<style>body{}</style><script>var head = 1</script>",
    )
    package = run(page)
    assert package.pages[0].text == "Visible\n\nAfter all\n\n東京駅"


def test_html_data_uri_images_are_assets_and_others_alt_text(tmp_path: Path) -> None:
    uri = "data:image/png;base64," + base64.b64encode(PNG).decode()
    page = html(
        f'<figure><img src="{uri}" alt="Red square"><figcaption>Figure 1: Colour</figcaption>'
        '</figure><p>Logo: <img src="https://cdn.example.org/logo.png" alt="ACME logo"></p>'
    )
    package = run(page, tmp_path)
    (image,) = package.pages[0].images
    assert (image.width, image.height, image.mime_type) == (64, 48, "image/png")
    assert image.caption == "Figure 1: Colour"
    assert (tmp_path / image.asset_id).read_bytes() == PNG
    assert "Logo: ACME logo" in package.pages[0].text
    assert not run(page, tmp_path, images="none").pages[0].images


def test_html_data_uri_larger_than_the_asset_limit_is_not_decoded(tmp_path: Path) -> None:
    big = "data:image/png;base64," + "A" * 4_000_000
    package = run(
        html(f'<p><img src="{big}" alt="huge chart"></p>'), tmp_path, max_asset_bytes=1_000_000
    )
    assert not package.pages[0].images and not package.assets
    assert package.pages[0].text == "huge chart"


# --- HTML: hostile pages ----------------------------------------------------------------------


def test_html_with_more_elements_than_the_limit_is_refused_before_parsing() -> None:
    page = b"<html><body>" + b"<i>x</i>" * (MAX_ELEMENTS + 10) + b"</body></html>"
    with pytest.raises(ParseFailure) as failure:
        run(page)
    assert failure.value.reason == ErrorReason.DOCUMENT_TOO_LARGE


def test_html_deep_nesting_is_read_or_refused_never_cut_short() -> None:
    def nested(depth: int) -> bytes:
        return (
            b"<html><body>" + b"<div>" * depth + b"deep text" + b"</div>" * depth + b"<p>after</p>"
        )

    package = run(nested(2000))
    assert package.pages[0].text == "deep text\n\nafter"
    # Past the parser's nesting limit the rest of the page would be lost: refused instead.
    with pytest.raises(ParseFailure) as failure:
        run(nested(50_000))
    assert failure.value.reason == ErrorReason.DOCUMENT_TOO_LARGE


def test_html_table_spans_cannot_inflate_the_grid() -> None:
    # Each cell declares 65534 rows x 1000 columns (clamped to the table's 3000 rows): 3e6 grid
    # cells for the first one alone, over the page's budget; refused on the declared extent.
    cell = '<td rowspan="65534" colspan="1000">x</td>'
    rows = "".join(f"<tr>{cell}</tr>" for _ in range(3000))
    with pytest.raises(ParseFailure) as failure:
        run(html(f"<table>{rows}</table>"))
    assert failure.value.reason == ErrorReason.DOCUMENT_TOO_LARGE
    assert "cells" in failure.value.message


# --- character sets ---------------------------------------------------------------------------


def test_html_meta_charset_cp1251_russian() -> None:
    page = html(
        f"<p>{RUSSIAN}</p>",
        head='<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">',
        charset="cp1251",
    )
    package = run(page)
    assert package.pages[0].text == RUSSIAN
    assert package.metadata.extra["charset"] == "cp1251"
    short = html("<p>Привет, мир</p>", head='<meta charset="koi8-r">', charset="koi8_r")
    assert run(short).pages[0].text == "Привет, мир"


def test_a_declared_charset_decides_where_detection_cannot() -> None:
    words = "Привет, мир".encode("koi8_r")  # too few letters to tell KOI8-R by statistics
    assert declared_charset(b'<html><head><meta charset="KOI8-R">') == "koi8-r"
    assert decode_text(words, "page", declared="koi8-r").text == "Привет, мир"
    # ISO-8859-15 and windows-1252 read the same bytes but for a few: the declaration decides.
    euro = "Preis: 5 € (Straße)".encode("iso8859_15")
    assert decode_text(euro, "page", declared="iso8859-15").text == "Preis: 5 € (Straße)"


def test_html_shift_jis_without_a_declaration_is_detected() -> None:
    package = run(html(f"<h1>天気予報</h1><p>{JAPANESE}</p>", charset="shift_jis"))
    assert [b.text for b in package.pages[0].blocks] == ["天気予報", JAPANESE]
    no_replacement(package)


def test_html_declaring_latin1_but_saved_as_utf8_reads_as_utf8() -> None:
    page = html(f"<p>{GERMAN}</p>", head='<meta charset="iso-8859-1">')
    assert run(page).pages[0].text == GERMAN


def test_text_utf16_with_bom() -> None:
    data = f"{GERMAN}\n\n{RUSSIAN}\n".encode("utf-16")
    package = run(data)
    assert package.content_type == "text"
    assert [b.text for b in package.pages[0].blocks] == [GERMAN, RUSSIAN]
    assert package.metadata.extra["charset"] == "utf-16-le"


def test_text_latin1_german_and_cp1251_russian_and_utf8_without_bom() -> None:
    long_german = " ".join([GERMAN] * 4)
    assert (
        parse_text(long_german.encode("latin-1"), lambda *a: None, ParseOptions.defaults())
        .pages[0]
        .text
        == long_german
    )
    assert (
        parse_text(RUSSIAN.encode("cp1251"), lambda *a: None, ParseOptions.defaults()).pages[0].text
        == RUSSIAN
    )
    assert (
        parse_text(JAPANESE.encode(), lambda *a: None, ParseOptions.defaults()).pages[0].text
        == JAPANESE
    )


def test_binary_content_is_unsupported_not_text() -> None:
    noise = bytes(range(256)) * 64
    for parser in (parse_text, parse_html):
        with pytest.raises(ParseFailure) as failure:
            parser(noise, lambda *a: None, ParseOptions.defaults())
        assert failure.value.reason == ErrorReason.UNSUPPORTED_FORMAT


def test_a_broken_utf8_bom_file_is_corrupt() -> None:
    with pytest.raises(ParseFailure) as failure:
        parse_text(b"\xef\xbb\xbfok then \xff\xfe broken", lambda *a: None, ParseOptions.defaults())
    assert failure.value.reason == ErrorReason.CORRUPT_DOCUMENT


# --- plain text ---------------------------------------------------------------------------------


def test_text_paragraphs_split_on_blank_lines_and_pages_on_form_feeds() -> None:
    data = b"Release 2.4\r\nShipped today.\r\n\r\n \r\nThanks to all.\fPage two line\n\f"
    pages: list[tuple[int, int]] = []
    package = parse_text(
        data, lambda done, total, stage: pages.append((done, total)), ParseOptions.defaults()
    )
    assert [[b.text for b in page.blocks] for page in package.pages] == [
        ["Release 2.4\nShipped today.", "Thanks to all."],
        ["Page two line"],
    ]
    assert [page.number for page in package.pages] == [1, 2]
    assert pages[-1] == (2, 2)
    assert "<!-- page 2 -->" in to_markdown(package)


def test_text_with_more_form_feed_pages_than_the_limit_is_too_large() -> None:
    with pytest.raises(ParseFailure) as failure:
        parse_text(b"page\f" * 20, lambda *a: None, ParseOptions.defaults(max_pages=10))
    assert failure.value.reason == ErrorReason.DOCUMENT_TOO_LARGE
