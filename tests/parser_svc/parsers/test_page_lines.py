"""A text page's line summaries and segments (parser_svc/parsers/pdf_lines.py) are the same
from the native module (native/page_lines.c) as from pymupdf's extractDICT and extractWORDS, the
path of a machine without a compiler: on generated pages with what changes a span or a word
(sizes, bold fonts and bold names, superscripts, right-to-left script, text running off the
page, rotated lines), on the drawing zoo, and on every page of the shared corpus when present
(its maths book has zero-width glyphs). Then the structure they feed: a page's blocks."""

from __future__ import annotations

from collections.abc import Iterator

import pymupdf
import pytest

from parser_svc.parsers import pdf_pass
from parser_svc.parsers.native import build
from parser_svc.parsers.pdf_blocks import page_blocks
from parser_svc.parsers.pdf_lines import (
    dict_lines,
    page_lines,
    page_segments,
    size_key,
    word_segments,
)
from parser_svc.parsers.pdf_pass import text_and_rules
from parser_svc.parsers.pdf_stream_tables import GAP_EMS
from tests.fixtures.drawings import drawing_zoo_pdf
from tests.helpers import CORPUS, corpus_pdfs


@pytest.fixture(autouse=True)
def _native_when_it_can_be() -> None:
    """Where the module can be built it must be loaded: else both sides are the fallback."""
    if not pdf_pass.native():
        try:
            build.build()
        except RuntimeError as err:
            pytest.skip(f"parser_svc.parsers.native cannot be built here ({err})")
        pytest.fail("parser_svc.parsers.native can be built here but is not: run make setup")


def _styled_pdf() -> bytes:
    doc = pymupdf.open()  # type: ignore[no-untyped-call]
    page = doc.new_page(width=400, height=300)  # type: ignore[no-untyped-call]
    page.insert_text((20, 30), "Heading in bold", fontname="hebo", fontsize=16)
    page.insert_text((20, 50), "Body text at eleven points", fontname="helv", fontsize=11)
    page.insert_text((20, 70), "mixed ", fontname="helv", fontsize=11)
    page.insert_text((52, 70), "bold words", fontname="hebo", fontsize=11)
    page.insert_text((110, 70), " and plain", fontname="helv", fontsize=11)
    page.insert_text((300, 90), "this line runs far off the right edge", fontsize=11)
    page.insert_text((380, 200), "rotated text", fontsize=10, rotate=90)
    page.insert_text((20, 110), "x", fontsize=11)
    page.insert_text((26, 104), "2", fontsize=6)  # a superscript on the line of "x"
    page.insert_text((20, 130), "cells    far    apart    here", fontsize=9)
    page.insert_htmlbox(
        pymupdf.Rect(20, 150, 360, 260),
        "<p>Latin then שלום עולם then more, E = mc<sup>2</sup>, <b>bold</b> and "
        "<i>italic</i></p><ul><li>one item</li><li>two items</li></ul>",
    )
    data: bytes = doc.tobytes()
    return data


def _pages() -> Iterator[tuple[str, pymupdf.Page]]:
    for name, data in (("styled", _styled_pdf()), ("zoo", drawing_zoo_pdf())):
        doc = pymupdf.open(stream=data)  # type: ignore[no-untyped-call]
        for index in range(doc.page_count):
            yield f"{name}-{index}", doc[index]


def _same(page: pymupdf.Page) -> int:
    """Asserts both ways agree on `page`; the number of lines read."""
    textpage = text_and_rules(page).textpage
    lines = page_lines(textpage)
    assert lines == dict_lines(textpage.extractDICT())  # the fallback's way
    assert page_segments(textpage, GAP_EMS) == word_segments(textpage.extractWORDS(), GAP_EMS)
    return sum(len(block) for block in lines)


def test_generated_pages_read_the_same_both_ways() -> None:
    assert sum(_same(page) for _, page in _pages()) > 20


def test_what_a_line_summary_says() -> None:
    """What the structure pass reads off the styled page, checked against what was drawn."""
    doc = pymupdf.open(stream=_styled_pdf())  # type: ignore[no-untyped-call]
    lines = [line for block in page_lines(text_and_rules(doc[0]).textpage) for line in block]
    by_text = {line[4]: line for line in lines}
    heading, body = by_text["Heading in bold"], by_text["Body text at eleven points"]
    assert (heading[5], heading[6]) == (16.0, True) and (body[5], body[6]) == (11.0, False)
    assert body[7] == len("Bodytextatelevenpoints")  # spaces are not counted
    mixed = by_text["mixed bold words and plain"]
    assert (mixed[6], mixed[7]) == (False, 22)  # 9 of 22 characters bold: not a bold line
    off_page = next(line for line in lines if line[4].startswith("this line"))
    # What the page shows: the characters that overlap it (the last one only in part).
    drawn = "this line runs far off the right edge"
    assert drawn.startswith(off_page[4]) and len(off_page[4]) < len(drawn) - 5
    assert 400 < off_page[2] < 400 + 11
    superscript = next(line for line in lines if "E = mc2" in line[4])
    assert superscript[5] == 12.0  # the size of most of the line's characters, not the 2's
    hebrew = next(line for line in lines if "שלום" in line[4])
    assert "Latin" in hebrew[4]


def test_segments_cut_where_words_are_far_apart() -> None:
    doc = pymupdf.open(stream=_styled_pdf())  # type: ignore[no-untyped-call]
    texts = [seg[4] for seg in page_segments(text_and_rules(doc[0]).textpage, GAP_EMS)]
    assert [t for t in texts if t in {"cells", "far", "apart", "here"}] == [
        "cells",
        "far",
        "apart",
        "here",
    ]
    assert "Body text at eleven points" in texts


def test_sizes_round_halves_up() -> None:
    assert [size_key(s) for s in (9.95, 10.04, 10.05, 11.96)] == [10.0, 10.0, 10.1, 12.0]


def test_the_blocks_are_the_same_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = pymupdf.open(stream=_styled_pdf())  # type: ignore[no-untyped-call]
    textpage = text_and_rules(doc[0]).textpage
    native = page_blocks(textpage)
    monkeypatch.setattr(pdf_pass, "_native", None)
    assert [(b.text, b.marker, b.x0, b.y1) for b in native] == [
        (b.text, b.marker, b.x0, b.y1) for b in page_blocks(textpage)
    ]
    assert [b.marker for b in native if b.marker] == ["•", "•"]


@pytest.mark.corpus
@pytest.mark.skipif(
    not (CORPUS / "text_pdf").is_dir(),
    reason=f"the shared corpus is not at {CORPUS} (it is present in CI)",
)
def test_every_corpus_pdf_page_reads_the_same() -> None:
    lines = pages = 0
    for _, doc, count in corpus_pdfs():
        for index in range(count):
            try:
                page = doc[index]
                text_and_rules(page)
            except Exception:  # a page that cannot be read either way
                continue
            lines += _same(page)
            pages += 1
    assert pages > 200 and lines > 5000, (pages, lines)
