"""Content sniffing of the formats told by magic numbers, containers and the look of text:
what a user sends, named by its bytes whatever the file is called."""

from __future__ import annotations

import io
import zipfile

import pytest

from parser_svc.parsers.detect import SUPPORTED, describe, detect_type, sniff

EMAIL = (
    b"Return-Path: <ann@example.org>\r\nFrom: Ann Lee <ann@example.org>\r\nTo: bo@example.com\r\n"
    b"Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\n  continued\r\n"
    b"Date: Mon, 1 Jan 2024 10:00:00 +0000\r\n"
    b"MIME-Version: 1.0\r\n\r\nHello Bo,\r\n"
)


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members:
            archive.writestr(name, data)
    return out.getvalue()


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (b"<!DOCTYPE html>\n<html><body><h1>Hi</h1></body></html>", "html"),
        (b"\xef\xbb\xbf  <!-- saved page -->\n<HTML lang=en><p>x</HTML>", "html"),
        (
            b'<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
            b"<body/></html>",
            "html",
        ),
        (EMAIL, "eml"),
        (b"From ann@example.org Mon Jan  1 10:00:00 2024\n" + EMAIL.replace(b"\r\n", b"\n"), "eml"),
        (b"name,qty,price\nwidget,3,4.50\ngadget,1,2\n", "csv"),
        (b"name\tqty\nwidget\t3\n", "csv"),
        ("Name;Menge\n\u00c4pfel;3\n".encode("cp1252"), "csv"),
        (b'id,note\n1,"two\nlines"\n2,plain\n', "csv"),
        (b"# Release notes\n\n- faster\n- smaller\n", "markdown"),
        (b"| a | b |\n|---|---|\n| 1 | 2 |\n", "markdown"),
        (b"Intro\n\n```sh\nmake run\n```\n", "markdown"),
        (b"hello world", "text"),
        (b"Hello, world. This is fine, ok.\nAnother line, with a comma.\nA third, too.\n", "text"),
        ("\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440".encode("cp1251"), "text"),
        ("hello there".encode("utf-16"), "text"),
        ("hello there".encode("utf-16-le"), "text"),
        (b"<html><body><p>a\x00b</p></body></html>", "html"),  # a stray NUL is still text
        (b"\x89PNG\r\n\x1a\n" + bytes(24), "png"),
        (b"\xff\xd8\xff\xe0" + bytes(24), "jpeg"),
        (b"GIF89a" + bytes(24), "gif"),
        (b"II*\x00" + bytes(24), "tiff"),
        (b"MM\x00*" + bytes(24), "tiff"),
        (b"BM" + bytes(12) + (40).to_bytes(4, "little") + bytes(30), "bmp"),
        (b"RIFF\x10\x00\x00\x00WEBPVP8 " + bytes(16), "webp"),
        (b"{\\rtf1\\ansi Hello}", "rtf"),
        (_zip([("mimetype", b"application/vnd.oasis.opendocument.text")]), "odt"),
        (_zip([("mimetype", b"application/vnd.oasis.opendocument.spreadsheet")]), "ods"),
        (_zip([("mimetype", b"application/vnd.oasis.opendocument.presentation")]), "odp"),
        (_zip([("mimetype", b"application/epub+zip"), ("META-INF/container.xml", b"")]), "epub"),
    ],
)
def test_each_format_is_told_by_its_bytes(content: bytes, kind: str) -> None:
    assert detect_type(content) == kind
    assert kind in SUPPORTED


@pytest.mark.parametrize(
    ("content", "label"),
    [
        (bytes(range(256)) * 4, "binary content of an unrecognised type"),
        (b"\x00\x01" * 40, "binary content"),  # zeros like UTF-16's, but control characters
        (b"7z\xbc\xaf\x27\x1c" + bytes(26), "a 7-Zip archive"),
        (b"%!PS-Adobe-3.0\n%%Pages: 1\n", "a PostScript document"),
        (b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>', "an SVG image"),
        (b'<?xml version="1.0"?>\n<order><item/></order>', "an XML document"),
        (b"  \n\t\n", "content of blank text only"),
        (_zip([("mimetype", b"application/vnd.oasis.opendocument.graphics")]), "an OpenDocument"),
        (b"BM" + bytes(40), "binary content"),  # "BM" without a DIB header is not a bitmap
    ],
)
def test_what_is_not_parsed_is_named(content: bytes, label: str) -> None:
    assert detect_type(content) is None
    assert describe(content).startswith(label)


def test_a_stray_nul_is_dropped_not_read_as_utf16() -> None:
    from parser_svc.parsers import ParseOptions
    from parser_svc.parsers.html_page import parse_html
    from parser_svc.parsers.plain_text import parse_text

    options, quiet = ParseOptions.defaults(), lambda *_: None
    page = parse_html(b"<html><body><p>a\x00b</p><p>c</p></body></html>", quiet, options)
    assert page.pages[0].text == "ab\n\nc"
    assert parse_text(b"hello\x00 world", quiet, options).pages[0].text == "hello world"


def test_sniffing_reads_a_bounded_window() -> None:
    """A 50 MB text upload is judged by its first 64 KiB: a table there is a table, whatever
    follows; the record cut by the window does not count."""
    rows = b"".join(b"%d,item %d,%d.5\n" % (i, i, i) for i in range(5000))
    assert len(rows) > 64 * 1024
    assert sniff(rows + b"x" * 50_000_000).kind == "csv"
