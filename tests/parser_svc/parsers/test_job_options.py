"""A job's parse options in the parser: page ranges (only the pages asked are read, the package
says which and how many the document has, a page past the end fails naming the page count),
image modes (none / referenced / all), OCR mode (off on a scan, force on a text page) and the
OCR resolution."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseFailure, ParseOptions, page_ranges
from tests.fixtures.images import image_pdf
from tests.fixtures.scans import scan
from tests.helpers import make_pdf


def run(
    data: bytes, tmp_path: Path | None = None, **options: object
) -> tuple[rp.ReadingPackage, list[tuple[int, int]]]:
    """The package and every (done, total) progress report."""
    reports: list[tuple[int, int]] = []
    opts = ParseOptions.defaults(job_id="j", deployment="test", assets_dir=tmp_path, **options)
    package = parse("pdf", data, lambda done, total, _s: reports.append((done, total)), opts)
    return package, reports


@pytest.mark.parametrize(
    ("spec", "normal"),
    [
        ("", ""),
        ("1-5,10,20-", "1-5,10,20-"),
        (" 3, 1-2 ,5- ", "1-3,5-"),
        ("7,7,6-8", "6-8"),
        ("2-4,1-", "1-"),
        ("10-,3", "3,10-"),
    ],
)
def test_a_page_list_is_normalised(spec: str, normal: str) -> None:
    assert page_ranges.normalised(spec) == normal


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("1-x", "not a page or a range"),
        ("0-3", "numbered from 1"),
        ("5-2", "ends before it starts"),
        ("-3", "not a page or a range"),
        ("1,,2", "not a page or a range"),
        (",".join(["1"] * 65), "limit is 64"),
    ],
)
def test_a_bad_page_list_says_what_is_wrong(spec: str, says: str) -> None:
    with pytest.raises(page_ranges.PageRangeError, match=says):
        page_ranges.parse(spec)


def thousand_pages() -> bytes:
    """A 1,000-page PDF whose first five pages say their number (the others copy page 6)."""
    doc = pymupdf.open()
    for number in range(1, 7):
        doc.new_page().insert_text((72, 72), f"page {number} of 1000")
    for _ in range(994):
        doc.fullcopy_page(5)
    data: bytes = doc.tobytes()
    return data


def test_pages_1_to_5_of_a_1000_page_pdf_read_only_those_pages() -> None:
    package, reports = run(thousand_pages(), pages="1-5")
    assert [page.number for page in package.pages] == [1, 2, 3, 4, 5]
    assert "page 5 of 1000" in package.pages[4].text
    assert package.document_page_count == 1000 and package.page_selection == "1-5"
    # Progress counts the pages read: never more than 5.
    assert reports and max(total for _done, total in reports) == 5
    assert max(done for done, _total in reports) == 5


def test_several_ranges_come_in_document_order_each_page_once() -> None:
    package, reports = run(make_pdf(30), pages="20-,3,2-4,10")
    assert [page.number for page in package.pages] == [2, 3, 4, 10, *range(20, 31)]
    assert reports[-1] == (15, 15)


def test_without_pages_the_package_holds_every_page_and_says_the_count() -> None:
    package, _ = run(make_pdf(3))
    assert [page.number for page in package.pages] == [1, 2, 3]
    assert package.page_selection == "" and package.document_page_count == 3


@pytest.mark.parametrize("spec", ["2-4", "4", "4-"])
def test_a_page_past_the_end_fails_naming_the_page_count(spec: str) -> None:
    with pytest.raises(ParseFailure) as caught:
        run(make_pdf(3), pages=spec)
    assert caught.value.reason == ErrorReason.PAGE_RANGE_PAST_END
    assert "the document has 3 pages" in caught.value.message


def test_an_open_range_ends_at_the_last_page() -> None:
    package, _ = run(make_pdf(3), pages="2-")
    assert [page.number for page in package.pages] == [2, 3]


def _images(package: rp.ReadingPackage) -> list[rp.ImageRef]:
    return [image for page in package.pages for image in page.images]


def test_images_none_lists_and_stores_no_image(tmp_path: Path) -> None:
    package, _ = run(image_pdf(), tmp_path, images="none")
    assert _images(package) == [] and list(package.assets) == []
    assert not any(tmp_path.iterdir()) if tmp_path.exists() else True
    assert "JPEG photograph" in package.pages[0].text


def test_images_referenced_lists_every_image_and_stores_the_jpeg_as_it_is(
    tmp_path: Path,
) -> None:
    data = image_pdf()
    package, _ = run(data, tmp_path, images="referenced")
    jpeg, raw = _images(package)
    assert jpeg.mime_type == "image/jpeg" and jpeg.asset_id
    assert (jpeg.width, jpeg.height) == (400, 300)
    doc = pymupdf.open(stream=data)
    stream = doc.xref_stream_raw(doc[0].get_images()[0][0])
    assert (tmp_path / jpeg.asset_id).read_bytes() == stream  # the stream, not re-encoded
    assert raw.asset_id == "" and (raw.width, raw.height) == (400, 300)
    assert raw.bbox.x1 > raw.bbox.x0
    assert [asset.mime_type for asset in package.assets] == ["image/jpeg"]


def test_images_referenced_stores_a_small_image_whatever_its_encoding(tmp_path: Path) -> None:
    package, _ = run(image_pdf(200, 150), tmp_path, images="referenced")
    assert [image.mime_type for image in _images(package)] == ["image/jpeg", "image/png"]
    assert all(image.asset_id for image in _images(package))


def test_images_referenced_is_the_default(tmp_path: Path) -> None:
    package, _ = run(image_pdf(), tmp_path)
    assert [bool(image.asset_id) for image in _images(package)] == [True, False]


def test_images_all_stores_every_image(tmp_path: Path) -> None:
    package, _ = run(image_pdf(), tmp_path, images="all")
    assert [image.mime_type for image in _images(package)] == ["image/jpeg", "image/png"]
    assert all((tmp_path / image.asset_id).is_file() for image in _images(package))
    assert len(package.assets) == 2


def test_ocr_off_leaves_a_scan_unread_and_says_so() -> None:
    page = scan("en", dpi=200, seed=5)
    package, _ = run(page.pdf, ocr_mode="off")
    assert not package.pages[0].ocr and package.pages[0].text == ""
    assert any("page 1 needs OCR" in w and "ocr_mode off" in w for w in package.warnings)


def test_ocr_auto_reads_the_same_scan() -> None:
    page = scan("en", dpi=200, seed=5)
    package, _ = run(page.pdf)
    assert package.pages[0].ocr and len(package.pages[0].text) > 50


def test_ocr_force_reads_a_text_page_by_ocr() -> None:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 100), "Forced reading of a text layer", fontsize=24)
    package, _ = run(doc.tobytes(), ocr_mode="force")
    assert package.pages[0].ocr
    assert "Forced" in package.pages[0].text
    auto, _ = run(doc.tobytes())
    assert not auto.pages[0].ocr


def _coordinates(package: rp.ReadingPackage) -> list[float]:
    boxes = [block.bbox for block in package.pages[0].blocks]
    return [value for b in boxes for value in (b.x0, b.y0, b.x1, b.y1)]


@pytest.mark.slow  # OCR of a page, twice
def test_the_ocr_resolution_is_the_one_asked() -> None:
    """OCR boxes are in the rendered image's pixels: at 72 dpi a pixel is a point, so every
    box lands on whole points; at 300 dpi they fall between."""
    page = scan("en", dpi=300, seed=6)
    low, _ = run(page.pdf, ocr_dpi=72)
    high, _ = run(page.pdf, ocr_dpi=300)
    assert low.pages[0].ocr and high.pages[0].ocr
    assert all(value == int(value) for value in _coordinates(low))
    assert any(value != int(value) for value in _coordinates(high))
