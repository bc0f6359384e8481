"""OpenDocument text (ODT): what a reader sees (the title, headings and levels, lists with their
markers and counters, tables with header rows and merged cells, notes, comments, text boxes,
images as assets, metadata), and hostile packages (zip bombs, cut-off zips, bad XML, entity
bombs, encrypted files, a wrong mimetype) answered with the right reason in bounded time; and
every OpenDocument kind sniffed and parsed. Packages are written by hand (opendocument_files)."""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path

import pytest

from docparse.reasons import ErrorReason
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseFailure
from parser_svc.parsers.formats import parse_detected
from parser_svc.parsers.odf_sheet import parse_ods
from parser_svc.parsers.odf_text import parse_odt
from tests.parser_svc.parsers.opendocument_files import (
    A4_STYLES,
    KINDS,
    LIST_STYLES,
    NS,
    cell,
    encrypt_parts,
    encrypt_whole,
    failure,
    frame,
    items,
    nothing,
    odf,
    options,
    p,
    png,
)


def odt(data: bytes, **overrides: object) -> rp.ReadingPackage:
    return parse_odt(data, nothing, options(**overrides))


# --- ODT ------------------------------------------------------------------------------------


def test_odt_headings_title_lists_inline_text_and_metadata() -> None:
    body = (
        '<text:sequence-decls><text:sequence-decl text:name="Figure"/></text:sequence-decls>'
        + p("Board minutes", "P1")
        + '<text:h text:outline-level="1">Attendees</text:h>'
        + p('Ann<text:s text:c="3"/>Bob<text:tab/>Carla<text:line-break/>(by phone)')
        + '<text:h text:outline-level="2">Decisions</text:h>'
        + '<text:h text:outline-level="8">Very deep</text:h>'
        + '<text:list text:style-name="N"><text:list-item>'
        + p("Approve budget")
        + "<text:list>"
        + items("Marketing", "Travel")
        + "<text:list-item>"
        + p("Meals")
        + "<text:list>"
        + items("Lunch")
        + "</text:list></text:list-item></text:list></text:list-item>"
        + "<text:list-item>"
        + p("Hire staff")
        + '<text:list text:style-name="N">'  # its own style: it counts under its item
        + items("Engineer")
        + "</text:list></text:list-item></text:list>"
        + p("Interlude")
        + '<text:list text:style-name="N" text:continue-numbering="true">'
        + items("Continued")
        + "</text:list>"
        + '<text:list text:style-name="N">'
        + items("Restarted")
        + '<text:list-item text:start-value="7">'
        + p("Seventh")
        + p("second line")
        + "</text:list-item></text:list>"
        + '<text:list text:style-name="B">'
        + items("Coffee")
        + "<text:list-item><text:list>"
        + items("Decaf")
        + "</text:list></text:list-item></text:list>"
    )
    meta = (
        "<dc:title>Minutes</dc:title><meta:initial-creator>Ann Lee</meta:initial-creator>"
        "<dc:creator>Bob Roe</dc:creator><dc:subject>Board</dc:subject>"
        "<meta:keyword>board</meta:keyword><meta:keyword>2024</meta:keyword>"
        "<meta:creation-date>2024-03-01T09:00:00</meta:creation-date>"
    )
    package = odt(odf("odt", body, LIST_STYLES, A4_STYLES, meta))
    assert package.content_type == "odt"
    (page,) = package.pages
    assert round(page.width) == 595 and round(page.height) == 842
    found = {b.text: (b.role, b.level, b.marker, b.ordered) for b in page.blocks}
    assert found["Board minutes"] == ("title", 1, "", False)
    assert found["Attendees"] == ("heading", 1, "", False)
    assert found["Ann   Bob\tCarla\n(by phone)"] == ("", 0, "", False)
    assert found["Decisions"] == ("heading", 2, "", False)
    assert found["Very deep"] == ("heading", 6, "", False)
    assert found["Approve budget"] == ("list_item", 1, "1.", True)
    assert found["Marketing"] == ("list_item", 2, "1.1.", True)
    assert found["Travel"] == ("list_item", 2, "1.2.", True)
    assert found["Lunch"] == ("list_item", 3, "(i)", True)
    assert found["Hire staff"] == ("list_item", 1, "2.", True)
    assert found["Engineer"] == ("list_item", 2, "2.1.", True)
    assert found["Continued"] == ("list_item", 1, "3.", True)
    assert found["Restarted"] == ("list_item", 1, "1.", True)
    assert found["Seventh\nsecond line"] == ("list_item", 1, "7.", True)
    assert found["Coffee"] == ("list_item", 1, "•", False)
    assert found["Decaf"] == ("list_item", 2, "◦", False)
    meta_out = package.metadata
    assert (meta_out.title, meta_out.author, meta_out.subject) == ("Minutes", "Ann Lee", "Board")
    assert meta_out.extra["keywords"] == "board, 2024"
    assert meta_out.extra["last_modified_by"] == "Bob Roe"
    assert meta_out.extra["created"] == "2024-03-01T09:00:00"
    markdown = to_markdown(package)
    assert "# Attendees" in markdown and "## Decisions" in markdown
    assert "1. Approve budget\n  1. Marketing\n  1. Travel" in markdown
    assert "Figure" not in page.text


def test_odt_tables_header_rows_spans_and_repeats() -> None:
    cell = "<table:table-cell>{}</table:table-cell>"
    body = (
        p("Before")
        + '<table:table table:name="Costs"><table:table-column table:number-columns-repeated="3"/>'
        "<table:table-header-rows><table:table-row>"
        + cell.format(p("Item"))
        + '<table:table-cell table:number-columns-spanned="2">'
        + p("Cost")
        + "</table:table-cell><table:covered-table-cell/></table:table-row>"
        "</table:table-header-rows>"
        '<table:table-row><table:table-cell table:number-rows-spanned="2">'
        + p("Ads")
        + "</table:table-cell>"
        + cell.format(p("10"))
        + cell.format(p("EUR"))
        + "</table:table-row><table:table-row><table:covered-table-cell/>"
        + cell.format(p("20") + p("net"))
        + cell.format(p("USD"))
        + '</table:table-row><table:table-row table:number-rows-repeated="2">'
        + '<table:table-cell table:number-columns-repeated="3">'
        + p("x")
        + "</table:table-cell></table:table-row>"
        + '<table:table-row table:number-rows-repeated="5000"><table:table-cell '
        + 'table:number-columns-repeated="1000"/></table:table-row></table:table>'
        + p("After")
    )
    package = odt(odf("odt", body))
    page = package.pages[0]
    (table,) = page.tables
    assert table.header_rows == 1
    assert [list(r.cells) for r in table.rows] == [
        ["Item", "Cost", "Cost"],
        ["Ads", "10", "EUR"],
        ["Ads", "20\nnet", "USD"],
        ["x", "x", "x"],
        ["x", "x", "x"],
    ]  # the padding (5000 empty rows of 1000 empty cells) left out
    spans = [[(s.column, s.row_span, s.col_span) for s in r.spans] for r in table.rows]
    assert spans[:3] == [[(1, 1, 2)], [(0, 2, 1)], []]
    assert [b.role for b in page.blocks] == ["", "table", ""]
    assert '<th colspan="2">Cost</th>' in to_markdown(package)


def test_odt_notes_comments_headers_footers_text_boxes_and_images(tmp_path: Path) -> None:
    picture = png(40, 30)
    body = p(
        "Revenue grew"
        '<text:note text:note-class="footnote"><text:note-citation>1</text:note-citation>'
        "<text:note-body>" + p("Unaudited.") + "</text:note-body></text:note>"
        " this year"
        '<text:note text:note-class="endnote"><text:note-citation>i</text:note-citation>'
        "<text:note-body>" + p("See annex.") + "</text:note-body></text:note>."
        "<office:annotation><dc:creator>Eve</dc:creator>"
        + p("Check the figure")
        + "</office:annotation>"
    ) + p(
        'Chart: <draw:frame draw:name="img1" svg:width="4cm" svg:height="3cm">'
        '<draw:image xlink:href="Pictures/chart.png"/></draw:frame>'
        '<draw:frame svg:width="4cm" svg:height="3cm"><draw:text-box>'
        + p("Boxed aside")
        + "</draw:text-box></draw:frame>"
        '<draw:frame><draw:image xlink:href="../outside.png"/></draw:frame>'
    )
    masters = (
        '<office:master-styles><style:master-page style:name="Standard">'
        "<style:header>" + p("ACME annual report") + "</style:header>"
        '<style:header-left style:display="false">' + p("Not shown") + "</style:header-left>"
        "<style:footer>" + p("Page <text:page-number>1</text:page-number>") + "</style:footer>"
        "</style:master-page></office:master-styles>"
    )
    files = {"Pictures/chart.png": picture, "ObjectReplacements/Object 1": b"not an image"}
    body += p('<draw:frame><draw:image xlink:href="./ObjectReplacements/Object 1"/></draw:frame>')
    data = odf("odt", body, styles=masters, files=files)
    package = odt(data, assets_dir=tmp_path)
    page = package.pages[0]
    assert [(b.role, b.text) for b in page.blocks] == [
        ("header", "ACME annual report"),
        ("", "Revenue grew this year."),
        ("", "Chart:"),
        ("textbox", "Boxed aside"),
        ("footnote", "Unaudited."),
        ("endnote", "See annex."),
        ("comment", "Eve: Check the figure"),
        ("footer", "Page 1"),
    ]
    (image,) = page.images
    (asset,) = package.assets
    assert image.asset_id == asset.asset_id and (image.width, image.height) == (40, 30)
    assert (tmp_path / asset.asset_id).read_bytes() == picture
    off = odt(data, assets_dir=tmp_path / "off", images="none")
    assert not off.assets and not off.pages[0].images


def test_odt_hostile_packages_get_the_right_reason() -> None:
    good = odf("odt", p("Hello"))
    # a zip bomb: a member declared far past the limit is refused before inflating
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), KINDS["odt"][0], zipfile.ZIP_STORED)
        archive.writestr("content.xml", b"<a>" + b" " * (8 << 20) + b"</a>")
    err = failure(parse_odt, bomb.getvalue(), max_unzipped_bytes=1 << 20)
    assert err.reason == ErrorReason.DOCUMENT_TOO_LARGE
    assert failure(parse_odt, good[: len(good) // 2]).reason == ErrorReason.CORRUPT_DOCUMENT
    no_content = io.BytesIO()
    with zipfile.ZipFile(no_content, "w") as archive:
        archive.writestr("mimetype", KINDS["odt"][0])
    assert failure(parse_odt, no_content.getvalue()).reason == ErrorReason.CORRUPT_DOCUMENT
    broken = odf("odt", "<text:p>unclosed")
    assert failure(parse_odt, broken).reason == ErrorReason.CORRUPT_DOCUMENT
    wrong = odf("odt", p("x"), mimetype=KINDS["ods"][0])
    assert failure(parse_odt, wrong).reason == ErrorReason.UNSUPPORTED_FORMAT


def manifest_edited(data: bytes, old: bytes, new: bytes) -> bytes:
    """`data` with `old` replaced by `new` in its META-INF/manifest.xml."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as archive:
        for info in source.infolist():
            member = source.read(info)
            if info.filename == "META-INF/manifest.xml":
                assert old in member
                member = member.replace(old, new)
            archive.writestr(info, member)
    return out.getvalue()


def test_password_protected_parts_open_with_the_password_only() -> None:
    plain = odf("odt", p("Salary review") + p("Confidential"), meta="<dc:title>Pay</dc:title>")
    locked = encrypt_parts(plain, "s3cret")
    assert failure(parse_odt, locked).reason == ErrorReason.PASSWORD_REQUIRED
    assert failure(parse_odt, locked, password="guess").reason == ErrorReason.WRONG_PASSWORD
    package = odt(locked, password="s3cret")
    assert package.decrypted and package.metadata.title == "Pay"
    assert package.pages[0].text == "Salary review\n\nConfidential"
    assert not odt(plain).decrypted
    old = encrypt_parts(plain, "s3cret", rounds=1024, blowfish=True)  # OpenOffice.org 2
    assert failure(parse_odt, old, password="guess").reason == ErrorReason.WRONG_PASSWORD
    assert odt(old, password="s3cret").pages[0].text == "Salary review\n\nConfidential"


def test_whole_package_encryption_of_recent_libreoffice() -> None:
    plain = odf(
        "ods",
        '<table:table table:name="Pay"><table:table-row>'
        + cell("float", 'office:value="42"', "42")
        + "</table:table-row></table:table>",
    )
    locked = encrypt_whole(plain, "pässword")
    assert failure(parse_ods, locked).reason == ErrorReason.PASSWORD_REQUIRED
    assert failure(parse_ods, locked, password="nope").reason == ErrorReason.WRONG_PASSWORD
    package = parse_ods(locked, nothing, options(password="pässword"))
    assert package.decrypted and package.sheets[0].rows[0].cells[0].number_value == 42


def test_encryption_costs_and_sizes_a_file_asks_for_are_bounded() -> None:
    plain = odf("odt", p("x" * 200_000))
    rounds = manifest_edited(
        encrypt_parts(plain, "pw"), b'iteration-count="1000"', b'iteration-count="999999999"'
    )
    started = time.monotonic()
    err = failure(parse_odt, rounds, password="pw")
    assert err.reason == ErrorReason.UNSUPPORTED_FORMAT and "PBKDF2" in err.message
    memory = manifest_edited(
        encrypt_whole(plain, "pw"), b'argon2-memory="64"', b'argon2-memory="67108864"'
    )
    err = failure(parse_odt, memory, password="pw")
    assert err.reason == ErrorReason.UNSUPPORTED_FORMAT and "Argon2id" in err.message
    assert time.monotonic() - started < 30  # a stall, not a speed goal
    # the ciphertext is small; what it inflates to is held to the package limit
    err = failure(parse_odt, encrypt_parts(plain, "pw"), password="pw", max_unzipped_bytes=100_000)
    assert err.reason == ErrorReason.DOCUMENT_TOO_LARGE


def test_odt_entity_bomb_is_not_expanded() -> None:
    laughs = "".join(
        f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10 if i else "lol"}">' for i in range(9)
    )
    content = (
        f'<?xml version="1.0"?><!DOCTYPE d [{laughs}]><office:document-content {NS}>'
        "<office:body><office:text><text:p>a&l8;b</text:p></office:text></office:body>"
        "</office:document-content>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), KINDS["odt"][0])
        archive.writestr("content.xml", content)
    started = time.monotonic()
    try:
        text = odt(out.getvalue()).pages[0].text
    except ParseFailure as err:
        assert err.reason == ErrorReason.CORRUPT_DOCUMENT
        text = ""
    assert "lollol" not in text
    assert time.monotonic() - started < 30  # a stall, not a speed goal


@pytest.mark.parametrize("kind", ["odt", "ods", "odp"])
def test_opendocument_files_are_sniffed_and_parsed(kind: str) -> None:
    body = {
        "odt": p("Hello"),
        "ods": '<table:table table:name="S"><table:table-row>'
        + cell("string", "", "Hello")
        + "</table:table-row></table:table>",
        "odp": '<draw:page draw:name="s1">'
        + frame("title", 1, 1, "<draw:text-box>" + p("Hello") + "</draw:text-box>")
        + "</draw:page>",
    }[kind]
    package = parse_detected(odf(kind, body), nothing, options())
    assert package.content_type == kind
    assert "Hello" in to_markdown(package)
