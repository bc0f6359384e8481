"""A PDF's OCR pages read on several threads (parser_svc/parsers/pdf_ocr.py) give the package a
sequential parse gives: same pages in the same order, same text and blocks, same warnings;
progress counts pages done in order; no thread outlives the parse."""

from __future__ import annotations

import threading

import pymupdf
import pytest

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions
from tests.fixtures.scans import cer, scan, unmapped_font_pdf

LANGUAGES = ("en", "de", "fr", "ru", "es")


def mixed_document() -> tuple[bytes, dict[int, tuple[str, str]]]:
    """Scans in several languages, a text page and a page whose font has no Unicode map:
    {page number: (language, truth)} for the scans."""
    doc = pymupdf.open()
    truths: dict[int, tuple[str, str]] = {}
    for i, language in enumerate(LANGUAGES):
        page = scan(language, 200, seed=40 + i)
        doc.insert_pdf(pymupdf.open(stream=page.pdf, filetype="pdf"))
        truths[doc.page_count] = (language, page.truth)
        if i == 1:
            text = doc.new_page()
            text.insert_text((72, 72), "A page with a text layer between the scans.")
        if i == 2:
            garbage = unmapped_font_pdf("Readable only by OCR, this page has no Unicode map.")
            doc.insert_pdf(pymupdf.open(stream=garbage, filetype="pdf"))
    return doc.tobytes(), truths


def run(data: bytes, threads: int) -> tuple[rp.ReadingPackage, list[tuple[int, str]]]:
    events: list[tuple[int, str]] = []
    options = ParseOptions.defaults(job_id="t", deployment="test", ocr_page_threads=threads)
    package = parse("pdf", data, lambda done, _total, stage: events.append((done, stage)), options)
    return package, events


@pytest.mark.slow  # OCR of a long scan, twice
def test_threads_read_a_long_scan_into_the_same_package_as_one_thread() -> None:
    data, truths = mixed_document()
    before = threading.active_count()
    one, one_events = run(data, 1)
    two, two_events = run(data, 2)
    assert threading.active_count() == before  # the readers stopped with the parse

    total = len(LANGUAGES) + 2
    assert [p.number for p in two.pages] == list(range(1, total + 1))
    for number, (language, truth) in truths.items():
        page = two.pages[number - 1]
        assert page.ocr and cer(truth, page.text, language) <= 0.03, (number, page.text)
    text_page = two.pages[2]
    assert text_page.text == "A page with a text layer between the scans." and not text_page.ocr
    assert two.pages[4].ocr and "Unicode" in two.pages[4].text
    # The same package as one thread: the OCR lines, their boxes and the warnings.
    assert two.SerializeToString(deterministic=True) == one.SerializeToString(deterministic=True)
    assert any("read by OCR" in w and "(5)" in w for w in two.warnings)

    for events in (one_events, two_events):
        done = [d for d, _stage in events]
        assert done == sorted(done) and done[-1] == total  # pages counted in order, all of them
        assert {stage for _d, stage in events} == {"text", "ocr"}
