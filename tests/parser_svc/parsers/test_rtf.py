"""RTF: the text a reader sees (code pages, \\u escapes), headings and levels, lists with their
markers, tables with header rows and merged cells, notes, headers and footers, pictures as
assets, metadata; and hostile files (deep nesting, a cut-off file, wrong code pages) answered
with the right reason or a warning, within bounded time and memory. Every document is written
here, so its content is known by construction."""

from __future__ import annotations

import io
import resource
import time
from pathlib import Path

import pytest
from PIL import Image

from docparse.reasons import ErrorReason
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.formats import parse_detected
from parser_svc.parsers.rtf import parse_rtf

HEAD = (
    r"{\rtf1\ansi\ansicpg1252\deff0"
    r"{\fonttbl{\f0\froman\fcharset0 Times New Roman;}{\f1\fnil\fcharset2 Symbol;}"
    r"{\f2\fswiss\fcharset204 Arial Cyr;}{\f3\fswiss\fcharset161 Arial Greek;}}"
    r"{\colortbl;\red0\green0\blue0;\red255\green0\blue0;}"
    r"{\stylesheet{\s0 Normal;}{\s1\sbasedon0 heading 1;}{\s2\sbasedon0 heading 2;}"
    r"{\s3\sbasedon2{\*\keycode \shift\ctrl h} Chapter Head;}{\s4\outlinelevel2 Deep;}{\s5 Title;}"
    r"{\*\cs10 Default Paragraph Font;}}"
    r"{\info{\title Quarterly memo}{\author Ann Lee}{\subject Budget}{\keywords q1, plan}"
    r"{\creatim\yr2024\mo3\dy1\hr9\min5}}"
    "\n"
)


def rtf(body: str, head: str = HEAD) -> bytes:
    return (head + body + "}").encode("latin-1")


def run(data: bytes, **overrides: object) -> rp.ReadingPackage:
    options = ParseOptions.defaults(job_id="job1", deployment="test", **overrides)
    return parse_rtf(data, lambda done, total, stage: None, options)


def blocks(package: rp.ReadingPackage) -> dict[str, tuple[str, int, str, bool]]:
    return {b.text: (b.role, b.level, b.marker, b.ordered) for b in package.pages[0].blocks}


def failure(data: bytes, **overrides: object) -> ParseFailure:
    with pytest.raises(ParseFailure) as caught:
        run(data, **overrides)
    return caught.value


def test_headings_from_styles_and_outline_levels_lists_and_metadata() -> None:
    body = (
        r"\pard\s5 The plan\par"
        r"\pard\s1 Scope\par"
        r"\pard\s2 Inside the fence\par"
        r"\pard\s3 Based on heading two\par"
        r"\pard\s4 Style outline level\par"
        r"\pard\outlinelevel0 Paragraph outline level\par"
        r"\pard Plain body text.\par"
        r"{\listtext\pard\plain\f1 \'b7\tab}\pard\ls1\ilvl0 Milk\par"
        r"{\listtext\pard\plain\f1 \'b7\tab}\pard\ls1\ilvl0 Bread\par"
        r"{\listtext\pard\plain 1.\tab}\pard\ls2\ilvl0 Call Ann\par"
        r"{\listtext\pard\plain a)\tab}\pard\ls2\ilvl1 Ask about May\par"
        r"{\pntext\f0 2.\tab}{\*\pn\pnlvlbody\pndec}\pard Old style item\par"
    )
    package = run(rtf(body))
    assert package.content_type == "rtf"
    assert len(package.pages) == 1
    found = blocks(package)
    assert found["The plan"] == ("title", 1, "", False)
    assert found["Scope"] == ("heading", 1, "", False)
    assert found["Inside the fence"] == ("heading", 2, "", False)
    assert found["Based on heading two"] == ("heading", 2, "", False)
    assert found["Style outline level"] == ("heading", 3, "", False)
    assert found["Paragraph outline level"] == ("heading", 1, "", False)
    assert found["Plain body text."] == ("", 0, "", False)
    assert found["Milk"] == ("list_item", 1, "•", False)
    assert found["Call Ann"] == ("list_item", 1, "1.", True)
    assert found["Ask about May"] == ("list_item", 2, "a)", True)
    assert found["Old style item"] == ("list_item", 1, "2.", True)
    meta = package.metadata
    assert (meta.title, meta.author, meta.subject) == ("Quarterly memo", "Ann Lee", "Budget")
    assert meta.extra["keywords"] == "q1, plan"
    assert meta.extra["created"] == "2024-03-01T09:05:00"
    text = package.pages[0].text
    for hidden in ("Times New Roman", "Normal", "Chapter Head", "red255", "Quarterly memo"):
        assert hidden not in text
    markdown = to_markdown(package)
    assert "# Scope" in markdown and "## Inside the fence" in markdown
    assert "- Milk\n- Bread\n1. Call Ann" in markdown


def test_code_pages_font_charsets_and_unicode_escapes() -> None:
    head = HEAD.replace(r"\ansicpg1252", r"\ansicpg1251").replace(r"\deff0", r"\deff2")
    body = (
        r"\pard\'cf\'f0\'e8\'e2\'e5\'f2, \u1052?\u1080?\u1088?!\par"  # code page 1251
        r"\pard{\f3 \'e3\'e5\'e9\'e1}\par"  # a Greek font (charset 161) in a 1251 document
        r"\pard\uc2 \u1044\'3f\'3f\u1072?? {\uc0 \u1085\u1072  ok}\par"  # \ucN fallbacks skipped
        r"\pard\uc1 smile \u-10179?\u-8704? done\par"  # a surrogate pair
        r"\pard em\emdash dash \ldblquote q\rdblquote  a\~b\par"
    )
    package = run(rtf(body, head))
    texts = [b.text for b in package.pages[0].blocks]
    assert texts == [
        "Привет, Мир!",
        "γεια",
        "Да на ok",
        "smile \U0001f600 done",
        "em\u2014dash \u201cq\u201d a\u00a0b",
    ]
    assert "\ufffd" not in package.pages[0].text
    assert not package.warnings


def test_an_unknown_code_page_or_undecodable_bytes_never_give_replacement_characters() -> None:
    head = r"{\rtf1\ansi\ansicpg99999{\fonttbl{\f0\fcharset128 MS Mincho;}}"
    package = run(rtf(r"\pard caf\'e9 \'82\'a0 \'ff\'ff\par", head))
    text = package.pages[0].text
    assert text.startswith("caf")
    assert "\ufffd" not in text
    assert any("could not be decoded" in w for w in package.warnings)


def test_tables_with_header_rows_and_merged_cells() -> None:
    body = (
        r"\pard Before\par"
        r"\trowd\trhdr\cellx2000\cellx4000\cellx6000\pard\intbl Item\cell Qty\cell Note\cell\row"
        r"\trowd\clvmgf\cellx2000\clmgf\cellx4000\clmrg\cellx6000"
        r"\pard\intbl Bolts\cell Wide\cell\cell\row"
        r"\trowd\clvmrg\cellx2000\cellx4000\cellx6000"
        r"\pard\intbl\cell 12\cell two\par lines\cell\row"
        r"\trowd\cellx2000\cellx6000\pard\intbl Nuts\cell Spans by cellx\cell\row"
        r"\trowd\cellx2012\cellx3990\cellx6008\pard\intbl Washers\cell 7\cell twips apart\cell\row"
        r"\pard After\par"
        r"\trowd\cellx100\cellx100\cellx50\pard\intbl a\cell b\cell c\cell\row\pard\par"
    )
    package = run(rtf(body))
    page = package.pages[0]
    table = page.tables[0]
    assert table.header_rows == 1
    assert [list(r.cells) for r in table.rows] == [
        ["Item", "Qty", "Note"],
        ["Bolts", "Wide", "Wide"],
        ["Bolts", "12", "two\nlines"],
        ["Nuts", "Spans by cellx", "Spans by cellx"],
        ["Washers", "7", "twips apart"],  # boundaries a few twips off the others' are theirs
    ]
    spans = [[(s.column, s.row_span, s.col_span) for s in r.spans] for r in table.rows]
    assert spans == [[], [(0, 2, 1), (1, 1, 2)], [], [(1, 1, 2)], []]
    assert [b.role for b in page.blocks] == ["", "table", "", "table"]
    # boundaries out of order (a damaged file): still a grid, every cell in it, in order
    (damaged,) = page.tables[1].rows
    assert list(dict.fromkeys(damaged.cells)) == ["a", "b", "c"]
    assert "<th>Item</th>" in to_markdown(package)


def test_notes_comments_headers_footers_fields_hidden_text_and_ignorables() -> None:
    body = (
        r"{\header\pard ACME confidential\par}{\footer\pard Page 1\par}"
        r"\pard Body{\super\chftn}{\footnote\pard{\super\chftn} A footnote.\par} text\par"
        r"\pard End{\footnote\ftnalt\pard An endnote.\par}{\v  hidden remark}\par"
        r"\pard Reviewed{\*\atnid AL}{\*\atnauthor Ann Lee}\chatn{\*\annotation{\*\atndate 1}"
        r"\pard Check this.\par}\par"
        r"{\*\generator Writer 1.0;}{\*\unknownthing hidden words}"
        r"\pard See {\field{\*\fldinst HYPERLINK \"https://example.com\"}{\fldrslt the site}}.\par"
    )
    package = run(rtf(body))
    page = package.pages[0]
    assert [(b.role, b.text) for b in page.blocks] == [
        ("header", "ACME confidential"),
        ("", "Body text"),
        ("", "End"),
        ("", "Reviewed"),
        ("", "See the site."),
        ("footnote", "A footnote."),
        ("endnote", "An endnote."),
        ("comment", "Ann Lee: Check this."),
        ("footer", "Page 1"),
    ]
    assert "hidden words" not in page.text and "Writer" not in page.text
    assert "hidden remark" not in page.text and "annotation_author" not in package.metadata.extra
    assert "example.com" not in page.text


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "navy").save(out, "PNG")
    return out.getvalue()


def test_pictures_become_assets_unless_images_are_off(tmp_path: Path) -> None:
    blob = png(30, 20)
    hexed = blob.hex()
    lines = "\n".join(hexed[i : i + 64] for i in range(0, len(hexed), 64))
    body = (
        r"\pard Figure:{\*\shppict{\pict\pngblip\picw30\pich20 " + lines + "}}"
        r"{\nonshppict{\pict\wmetafile8 0102}}\par"
        r"\pard Binary:{\pict\jpegblip\bin3 abc}\par"  # not a readable JPEG: left out
    )
    package = run(rtf(body), assets_dir=tmp_path)
    (asset,) = package.assets
    assert asset.mime_type == "image/png" and (asset.width, asset.height) == (30, 20)
    assert (tmp_path / asset.asset_id).read_bytes() == blob
    (image,) = package.pages[0].images
    assert image.asset_id == asset.asset_id
    assert [b.text for b in package.pages[0].blocks] == ["Figure:", "Binary:"]
    assert package.warnings == [  # the \nonshppict copy is not counted
        "pictures left out: 1 (not PNG or JPEG images: Windows metafiles, device-independent "
        "bitmaps, or damaged)"
    ]
    none = run(rtf(body), assets_dir=tmp_path / "none", images="none")
    assert not none.assets and not none.pages[0].images


def test_a_million_open_groups_is_corrupt_quickly_without_growing() -> None:
    data = b"{\\rtf1\\ansi " + b"{" * 1_000_000 + b"x"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    err = failure(data)
    elapsed = time.monotonic() - started
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert err.reason == ErrorReason.CORRUPT_DOCUMENT
    assert "deep" in err.message
    assert elapsed < 30  # a stall, not a speed goal: the parse takes ~1 s
    assert grown_mb < 64


def test_a_cut_off_file_keeps_the_text_before_the_cut_with_a_warning() -> None:
    whole = rtf(r"\pard First paragraph.\par{\pard\b Second one is cut here and never ends")
    cut = whole[: whole.index(b"here") + 4]
    package = run(cut)
    assert [b.text for b in package.pages[0].blocks] == [
        "First paragraph.",
        "Second one is cut here",
    ]
    assert any("cut short" in w for w in package.warnings)


def test_what_is_not_rtf_and_what_is_too_large() -> None:
    assert failure(b"PK\x03\x04 not rtf").reason == ErrorReason.CORRUPT_DOCUMENT
    outside = b"\xef\xbb\xbf {\\rtf1 Inside\\par} trailing words"
    assert run(outside).pages[0].text == "Inside"
    big = rtf(r"\pard " + "word " * 1000 + r"\par")
    assert failure(big, max_unzipped_bytes=1000).reason == ErrorReason.DOCUMENT_TOO_LARGE
    rows = r"\trowd\cellx100\cellx200\pard\intbl a\cell b\cell\row" * 20
    assert failure(rtf(rows), max_cells=10).reason == ErrorReason.DOCUMENT_TOO_LARGE


def test_an_rtf_is_sniffed_and_parsed_as_rtf() -> None:
    options = ParseOptions.defaults(job_id="job1", deployment="test")
    package = parse_detected(rtf(r"\pard Hello\par"), lambda d, t, s: None, options)
    assert package.content_type == "rtf"
    assert package.pages[0].text == "Hello"
