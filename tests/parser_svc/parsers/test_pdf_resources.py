"""A page's fonts and images, scanned once per shared /Resources object
(parser_svc/parsers/pdf_resources.py), are what pymupdf lists for that page: on generated pages
that share one resources object and one that has its own, after a mupdf warning (nothing is
kept then), and on every page of the shared corpus' PDFs when present."""

from __future__ import annotations

from collections.abc import Iterator

import pymupdf
import pytest
from pymupdf import mupdf

from parser_svc.parsers.pdf_resources import ResourceScans, resources_xref
from tests.helpers import CORPUS, corpus_pdfs


@pytest.fixture(autouse=True)
def _no_warnings_left() -> Iterator[None]:
    """mupdf's warnings are process-wide: each test starts and ends without any."""
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    yield
    pymupdf.TOOLS.mupdf_warnings(reset=True)


def _png() -> bytes:
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 40, 30), False)
    pixmap.set_rect(pixmap.irect, (200, 30, 30))
    return pixmap.tobytes("png")


def _shared_resources_pdf() -> pymupdf.Document:
    """Four pages: the first three draw with one /Resources object (two fonts, an image), the
    last has its own (one font)."""
    doc = pymupdf.open()
    first = doc.new_page()
    first.insert_text((72, 72), "Helvetica", fontname="helv")
    first.insert_text((72, 100), "Times", fontname="tiro")
    first.insert_image(pymupdf.Rect(72, 120, 172, 220), stream=_png())
    shared = doc.xref_get_key(first.xref, "Resources")
    assert shared[0] == "xref", shared
    for _ in range(2):
        page = doc.new_page()
        doc.xref_set_key(page.xref, "Resources", shared[1])
        page.insert_text((72, 72), "Helvetica again", fontname="helv")
    doc.new_page().insert_text((72, 72), "Courier", fontname="cour")
    return pymupdf.open(stream=doc.tobytes(), filetype="pdf")


def _as_pymupdf_lists(doc: pymupdf.Document, scans: ResourceScans) -> None:
    for page in doc:
        assert scans.fonts(page) == page.get_fonts(full=True), page.number
        assert scans.images(page) == page.get_images(), page.number


def test_pages_that_share_resources_are_scanned_once_and_read_the_same() -> None:
    doc = _shared_resources_pdf()
    keys = [resources_xref(page) for page in doc]
    assert keys[0] == keys[1] == keys[2] != keys[3] and all(keys)
    assert len(doc[0].get_fonts()) == 2 and len(doc[0].get_images()) == 1
    scans = ResourceScans()
    _as_pymupdf_lists(doc, scans)
    assert set(scans.fonts_by) == set(scans.images_by) == {keys[0], keys[3]}


def test_nothing_is_kept_once_mupdf_has_warned() -> None:
    """A scan may warn (circular resources); the package counts mupdf's warnings, so where
    mupdf has warned each page is scanned as pymupdf would scan it."""
    doc = _shared_resources_pdf()
    mupdf.fz_warn("a warning of this document")
    scans = ResourceScans()
    _as_pymupdf_lists(doc, scans)
    assert scans.fonts_by == {} and scans.images_by == {}


def test_a_page_with_direct_resources_has_no_key() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "text", fontname="helv")
    resources = doc.xref_object(int(doc.xref_get_key(page.xref, "Resources")[1].split()[0]))
    doc.xref_set_key(page.xref, "Resources", resources)  # the dictionary itself, inline
    reopened = pymupdf.open(stream=doc.tobytes(), filetype="pdf")
    assert resources_xref(reopened[0]) == 0
    scans = ResourceScans()
    _as_pymupdf_lists(reopened, scans)
    assert scans.fonts_by == {}


@pytest.mark.corpus
@pytest.mark.skipif(
    not (CORPUS / "text_pdf").is_dir(),
    reason=f"the shared corpus is not at {CORPUS} (it is present in CI)",
)
def test_every_corpus_pdf_page_lists_the_same() -> None:
    pages = kept = 0
    for path, doc, count in corpus_pdfs():
        pymupdf.TOOLS.mupdf_warnings(reset=True)  # as each parse starts
        scans = ResourceScans()
        for index in range(count):
            try:
                page = doc[index]
                expected = (page.get_fonts(full=True), page.get_images())
            except Exception:  # a page that cannot be scanned either way
                continue
            assert (scans.fonts(page), scans.images(page)) == expected, (path.name, page.number)
            pages += 1
        kept += len(scans.fonts_by)
    assert pages > 200 and kept > 10, (pages, kept)
