"""Parser-level tests: each format and failure case, parsed in this process with the same entry
point the parse child uses (`parse_child.parse`), checking the reading package's content."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pymupdf
import pytest

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import count_chars, parse
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.detect import detect_type
from parser_svc.parsers.doc import antiword_path
from parser_svc.parsers.password import candidates, saslprep
from parser_svc.settings import Settings
from tests import fixtures
from tests.helpers import make_pdf


class Progress:
    def __init__(self) -> None:
        self.events: list[tuple[int, int, str]] = []

    def __call__(self, done: int, total: int, stage: str) -> None:
        self.events.append((done, total, stage))


def run(data: bytes, tmp_path: Path | None = None, **options: object) -> rp.ReadingPackage:
    kind = detect_type(data)
    assert kind is not None
    opts = ParseOptions.defaults(job_id="job1", deployment="test", **options)  # type: ignore[arg-type]
    if tmp_path is not None:
        opts.assets_dir = tmp_path / "assets"
    return parse(kind, data, Progress(), opts)


def failure(data: bytes, **options: object) -> ParseFailure:
    with pytest.raises(ParseFailure) as caught:
        run(data, **options)
    return caught.value


def test_the_child_gets_every_setting_it_needs_from_its_options() -> None:
    """Settings.parse_options is the one mapping; what the worker writes on the child's stdin
    (to_json) is what the child reads back (from_json), the job's password and paths included;
    a child run by hand with `{}` gets Settings' defaults."""
    settings = Settings(
        env="t", parse_max_unzipped_mb=3, antiword="/opt/antiword", parse_page_delay_ms=7
    )
    sent = settings.parse_options(
        password="pw", job_id="j", assets_dir=Path("/tmp/a"), languages=["de"]
    )
    assert (sent.deployment, sent.max_unzipped_bytes) == ("t", 3 * 1024 * 1024)
    assert (sent.antiword, sent.page_delay_ms, sent.password) == ("/opt/antiword", 7, "pw")
    assert ParseOptions.from_json(json.loads(sent.to_json())) == sent
    assert ParseOptions.from_json({}) == ParseOptions.defaults()
    assert ParseOptions.defaults().max_pages == Settings.model_fields["parse_max_pages"].default


def test_the_parsers_defaults_are_the_settings_defaults() -> None:
    """The parsers' DEFAULT_* constants (they import nothing of the service) are what Settings'
    fields default to, field for field, ocr_page_threads resolved the same way."""
    assert ParseOptions.defaults() == Settings.model_construct().parse_options()
    overrides = {"job_id": "j", "ocr_page_threads": 3, "max_pages": 9}
    assert ParseOptions.defaults(**overrides) == Settings.model_construct().parse_options(
        **overrides
    )


# --- PDF -----------------------------------------------------------------------------------


def test_text_pdf_blocks_in_reading_order_with_progress_per_page() -> None:
    progress = Progress()
    package = parse("pdf", make_pdf(3, "chapter"), progress, ParseOptions.defaults())
    assert [p.number for p in package.pages] == [1, 2, 3]
    assert package.pages[1].text.startswith("chapter 2 of 3")
    assert "job state lives in Redis" in package.pages[1].text
    block = package.pages[0].blocks[0]
    assert block.source == "text" and block.bbox.x0 == pytest.approx(72, abs=2)
    assert (package.pages[0].width, package.pages[0].height) == (595, 842)  # A4
    assert not any(p.ocr for p in package.pages)
    assert progress.events[0] == (0, 3, "text") and progress.events[-1] == (3, 3, "text")
    assert [d for d, _, _ in progress.events] == sorted(d for d, _, _ in progress.events)


def test_image_only_pdf_is_ocred_in_english_and_chinese() -> None:
    progress = Progress()
    data = fixtures.image_only_pdf([*fixtures.OCR_LINES, fixtures.OCR_CHINESE])
    package = parse("pdf", data, progress, ParseOptions.defaults())
    page = package.pages[0]
    assert page.ocr and all(block.source == "ocr" for block in page.blocks)
    text = page.text.replace(" ", "").lower()
    assert "quarterlyrevenuegrew42percent" in text
    assert "invoicenumber7781isoverdue" in text
    assert fixtures.OCR_CHINESE in page.text
    assert all(0 < block.confidence <= 1 for block in page.blocks)
    # OCR boxes are in page points: the first line was drawn at y=120 pt (baseline).
    assert 90 < page.blocks[0].bbox.y0 < 125 and page.blocks[0].bbox.x0 < 80
    assert (0, 1, "ocr") in progress.events


def test_mixed_pdf_ocrs_only_the_scanned_page() -> None:
    package = run(fixtures.mixed_pdf())
    assert [p.ocr for p in package.pages] == [False, True, False]
    assert "Text layer page 3" in package.pages[2].text
    assert "overdue" in package.pages[1].text


def test_ocr_disabled_warns_instead_of_failing_silently() -> None:
    package = run(fixtures.image_only_pdf(), ocr=False)
    assert package.pages[0].text == ""
    assert any("needs OCR" in w for w in package.warnings)


def test_tables_and_images_of_a_pdf_page(tmp_path: Path) -> None:
    package = run(fixtures.pdf_with_table_and_image(), tmp_path)
    page = package.pages[0]
    assert [list(row.cells) for row in page.tables[0].rows] == fixtures.TABLE
    assert page.tables[0].bbox.x0 == pytest.approx(72, abs=1)
    assert len(page.images) == 1 and len(package.assets) == 1
    asset = package.assets[0]
    assert page.images[0].asset_id == asset.asset_id
    assert (asset.deployment, asset.job_id) == ("test", "job1")
    stored = (tmp_path / "assets" / asset.asset_id).read_bytes()
    assert hashlib.sha256(stored).hexdigest() == asset.sha256 and len(stored) == asset.size_bytes
    assert page.images[0].bbox.x0 == pytest.approx(72, abs=1)


def test_encrypted_pdf_needs_the_right_password() -> None:
    data = fixtures.encrypted_pdf("s3cret")
    assert failure(data).reason == "PASSWORD_REQUIRED"
    assert failure(data, password="wrong").reason == "WRONG_PASSWORD"
    package = run(data, password="s3cret")
    assert package.decrypted and "Confidential merger memo" in package.pages[0].text


def test_passwords_are_saslprep_normalised() -> None:
    assert saslprep("I\u00adX") == "IX"  # soft hyphen maps to nothing
    assert saslprep("\u2163") == "IV"  # NFKC
    assert saslprep("a\u00a0b") == "a b"  # non-ASCII space → space
    assert candidates("    ") == ["    "]
    assert candidates("\u2163") == ["IV", "\u2163"]
    # The PDF was encrypted with the normalised form; the submitted one differs.
    assert "memo" in run(fixtures.encrypted_pdf("IV"), password="\u2163").pages[0].text


def test_zero_page_pdf_is_corrupt_not_an_empty_success() -> None:
    err = failure(fixtures.zero_page_pdf())
    assert err.reason == "CORRUPT_DOCUMENT" and "no pages" in err.message


def test_truncated_pdf_is_repaired_with_a_warning() -> None:
    package = run(fixtures.truncated(make_pdf(4, "survivor"), 0.7))
    assert package.pages and "survivor 1 of 4" in package.pages[0].text
    assert any("repaired" in w for w in package.warnings)


def test_page_cap() -> None:
    err = failure(make_pdf(3), max_pages=2)
    assert err.reason == "DOCUMENT_TOO_LARGE" and "3 pages" in err.message


# --- Word ----------------------------------------------------------------------------------


def test_docx_body_tables_headers_textboxes_images(tmp_path: Path) -> None:
    package = run(fixtures.docx_full(), tmp_path)
    page = package.pages[0]
    roles = {block.text: block.role for block in page.blocks}
    assert roles["ACME Corp confidential header"] == "header"
    assert roles["Page footer text"] == "footer"
    assert roles["Annual report"] == "heading"
    assert roles["First bullet point"] == "list_item"
    assert roles["Text box callout"] == "textbox"
    assert [list(r.cells) for r in page.tables[0].rows] == [["Name", "Score"], ["Ada", "97"]]
    text = page.text
    assert text.index("header") < text.index("Annual report") < text.index("Page footer")
    assert len(page.images) == 1 and package.assets[0].mime_type == "image/png"
    assert (tmp_path / "assets" / package.assets[0].asset_id).read_bytes() == fixtures.PNG


def test_encrypted_docx() -> None:
    data = fixtures.encrypt_ooxml(fixtures.docx_full(), "pässwörd")
    assert detect_type(data) == "encrypted_ooxml"
    assert failure(data).reason == "PASSWORD_REQUIRED"
    assert failure(data, password="nope").reason == "WRONG_PASSWORD"
    package = run(data, password="pässwörd")
    assert package.content_type == "docx" and package.decrypted
    assert "northern plant" in package.pages[0].text


def test_truncated_docx_is_corrupt() -> None:
    data = fixtures.truncated(fixtures.docx_full(), 0.5)
    assert detect_type(data) == "docx"
    assert failure(data).reason == "CORRUPT_DOCUMENT"


def test_doc_read_with_antiword_or_reported_missing() -> None:
    data = fixtures.minimal_doc("Minutes of the generated meeting")
    assert detect_type(data) == "doc"
    if antiword_path() is None:
        err = failure(data)
        assert err.reason == "UNSUPPORTED_FORMAT" and "antiword" in err.message
    else:
        assert "Minutes of the generated meeting" in run(data).pages[0].text


def test_truncated_ole_files_are_corrupt() -> None:
    for data in (
        fixtures.minimal_doc("cut short"),
        fixtures.encrypt_ooxml(fixtures.docx_full(), "p"),
    ):
        cut = fixtures.truncated(data, 0.5)
        assert detect_type(cut) in ("doc", "ole", "encrypted_ooxml")
        err = failure(cut, password="p")
        assert err.reason == "CORRUPT_DOCUMENT", err


def test_doc_without_antiword_names_what_is_missing() -> None:
    err = failure(fixtures.minimal_doc("x"), antiword="/nonexistent/antiword")
    assert err.reason == "UNSUPPORTED_FORMAT" and "antiword" in err.message


# --- Excel ---------------------------------------------------------------------------------


def _cells(sheet: rp.Sheet) -> dict[tuple[int, int], tuple[str, object]]:
    out: dict[tuple[int, int], tuple[str, object]] = {}
    for row in sheet.rows:
        for cell in row.cells:
            kind = cell.WhichOneof("value")
            assert kind is not None
            out[row.number, cell.column] = (kind, getattr(cell, kind))
    return out


@pytest.mark.parametrize("date1904", [False, True])
def test_xlsx_typed_cells_and_date_systems(date1904: bool) -> None:
    data = fixtures.xlsx_typed(date1904)
    serial = fixtures.serial_of_when(data)
    # The file really stores a different serial in each system (1462 days apart) ...
    assert serial == pytest.approx(45351.5729, abs=1e-3) if not date1904 else 43889.5729
    package = run(data)
    assert package.date_system == ("1904" if date1904 else "1900")
    data_sheet, hidden = package.sheets
    cells = _cells(data_sheet)
    assert cells[1, 1] == ("string_value", "name")
    assert cells[2, 2] == ("number_value", 42.0)
    assert cells[2, 3] == ("number_value", 0.25)
    assert cells[2, 4] == ("bool_value", True)
    # ... and both read back as the same moment.
    assert cells[2, 5] == ("datetime_value", "2024-02-29T13:45:00")
    assert cells[2, 6] == ("datetime_value", "1999-12-31")
    assert cells[5, 2] == ("string_value", "sparse") and (4, 1) not in cells
    assert data_sheet.cell_count == 13
    assert (hidden.name, hidden.visibility) == ("Hidden", "hidden")
    assert count_chars(package) > 0


def test_strict_ooxml_workbook_is_a_precise_failure() -> None:
    err = failure(fixtures.strict_xlsx())
    assert err.reason == "UNSUPPORTED_FORMAT" and "Strict" in err.message


def test_encrypted_xlsx() -> None:
    data = fixtures.encrypt_ooxml(fixtures.xlsx_typed(), "tika")
    assert failure(data).reason == "PASSWORD_REQUIRED"
    assert failure(data, password="TIKA").reason == "WRONG_PASSWORD"
    package = run(data, password="tika")
    assert package.content_type == "xlsx" and package.decrypted
    assert _cells(package.sheets[0])[2, 1] == ("string_value", "widget")


def test_zip_bomb_is_refused_before_inflating() -> None:
    data = fixtures.zip_bomb_xlsx(64)
    assert len(data) < 200_000
    err = failure(data, max_unzipped_bytes=32 * 1024 * 1024)
    assert err.reason == "DOCUMENT_TOO_LARGE" and "zip bomb" in err.message


def test_cell_cap() -> None:
    err = failure(fixtures.xlsx_typed(), max_cells=5)
    assert err.reason == "DOCUMENT_TOO_LARGE" and "5 cells" in err.message


def test_workbook_that_is_not_a_zip_part_set_is_corrupt() -> None:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr("xl/workbook.xml", "<not-a-workbook/>")
    assert detect_type(data.getvalue()) == "xlsx"
    assert failure(data.getvalue()).reason == "CORRUPT_DOCUMENT"


# --- PowerPoint ----------------------------------------------------------------------------


def test_pptx_slides_text_tables_images_notes(tmp_path: Path) -> None:
    package = run(fixtures.pptx_full(), tmp_path)
    first, second = package.slides
    assert first.title == "Roadmap 2025" and first.blocks[0].role == "title"
    assert "Ship the parser service" in first.text
    rows = [list(r.cells) for r in first.tables[0].rows]
    assert rows == [["Milestone", "Date"], ["Beta", "March"]]
    assert first.notes == "Mention the hiring plan"
    assert len(first.images) == 1 and first.images[0].bbox.x0 == pytest.approx(432)
    assert (first.width, first.height) == (720, 540)
    assert second.hidden and second.title == "Backup slide"
    assert package.assets[0].asset_id == first.images[0].asset_id


def test_encrypted_pptx_without_password() -> None:
    data = fixtures.encrypt_ooxml(fixtures.pptx_full(), "pw")
    assert failure(data).reason == "PASSWORD_REQUIRED"
    assert run(data, password="pw").slides[0].title == "Roadmap 2025"


# --- Detection -----------------------------------------------------------------------------


def test_detection_by_content_not_name() -> None:
    from parser_svc.parsers.detect import describe

    assert detect_type(make_pdf(1)) == "pdf"
    assert detect_type(fixtures.docx_full()) == "docx"
    assert detect_type(fixtures.xlsx_typed()) == "xlsx"
    assert detect_type(fixtures.pptx_full()) == "pptx"
    assert detect_type(fixtures.minimal_doc("x")) == "doc"
    assert detect_type(fixtures.encrypt_ooxml(fixtures.xlsx_typed(), "p")) == "encrypted_ooxml"
    assert detect_type(fixtures.wordperfect()) is None
    assert describe(fixtures.wordperfect()) == "a WordPerfect document"
    assert detect_type(b"") is None and detect_type(bytes(range(256))) is None
    assert describe(bytes(range(256))) == "binary content of an unrecognised type"
    assert detect_type(fixtures.PNG) == "png" and describe(fixtures.PNG) == "a PNG image"
    plain_zip = io.BytesIO()
    with zipfile.ZipFile(plain_zip, "w") as archive:
        archive.writestr("notes.txt", "hi")
    assert detect_type(plain_zip.getvalue()) is None
    assert pymupdf.open(stream=fixtures.zero_page_pdf()).page_count == 0
