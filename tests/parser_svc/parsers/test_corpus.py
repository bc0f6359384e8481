"""Every file of the shared real-world corpus (../shared/corpus, described by NOTES.tsv) through a
running stack. Each ends SUCCEEDED with the text its notes lead one to expect, or FAILED with
the reason that fits its description; nothing SUCCEEDED is empty unless the document is.
Encrypted files run twice: without a password (PASSWORD_REQUIRED) and with the one the notes
give. Prints a table: file → state/reason → pages → chars → OCR'd pages → seconds."""

from __future__ import annotations

import csv
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from docparse.client import Client
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers.doc import antiword_path
from tests.conftest import OCR_PRELOAD_ALL, make_stack
from tests.helpers import stub, wait_terminal

CORPUS = Path(__file__).resolve().parents[4] / "shared" / "corpus"
pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(
        not (CORPUS / "NOTES.tsv").is_file(),
        reason=f"the shared corpus is not at {CORPUS} (it is present in CI)",
    ),
]

Check = Callable[[rp.ReadingPackage], None]


@dataclass
class Case:
    category: str
    name: str
    notes: str
    password: str = ""
    # Expected reason when FAILED ("" = SUCCEEDED).
    reason: str = ""
    check: Check | None = None


def _text(package: rp.ReadingPackage) -> str:
    parts = [p.text for p in package.pages] + [s.text + "\n" + s.notes for s in package.slides]
    for sheet in package.sheets:
        for row in sheet.rows:
            parts.extend(c.string_value for c in row.cells if c.HasField("string_value"))
    return "\n".join(parts)


def has(*needles: str) -> Check:
    def check(package: rp.ReadingPackage) -> None:
        text = " ".join(_text(package).split()).lower()
        for needle in needles:
            assert needle.lower() in text, f"{needle!r} not in {text[:300]!r}"

    return check


def both(*checks: Check) -> Check:
    def check(package: rp.ReadingPackage) -> None:
        for c in checks:
            c(package)

    return check


def pages(n: int) -> Check:
    def check(package: rp.ReadingPackage) -> None:
        assert len(package.pages) == n

    return check


def ocr_pages(package: rp.ReadingPackage) -> None:
    assert package.pages and all(p.ocr for p in package.pages)


def repaired(package: rp.ReadingPackage) -> None:
    assert any("repaired" in w for w in package.warnings), package.warnings


def warned(word: str) -> Check:
    def check(package: rp.ReadingPackage) -> None:
        assert any(word in w for w in package.warnings), package.warnings

    return check


def sheets(n: int, cells: int = 0) -> Check:
    def check(package: rp.ReadingPackage) -> None:
        assert len(package.sheets) == n
        if cells:
            assert sum(s.cell_count for s in package.sheets) == cells

    return check


def images(package: rp.ReadingPackage) -> None:
    assert package.assets and package.pages[0].images


def empty_tables(n: int) -> Check:
    def check(package: rp.ReadingPackage) -> None:
        assert len(package.pages[0].tables) == n

    return check


def roles(*wanted: str) -> Check:
    def check(package: rp.ReadingPackage) -> None:
        found = {b.role for p in package.pages for b in p.blocks}
        assert set(wanted) <= found, found

    return check


def comments(package: rp.ReadingPackage) -> None:
    assert any(s.comments for s in package.slides)


# What each file's notes lead one to expect. Files the table does not name get their
# category's rule; a file named here but absent from the corpus is reported.
EXPECTED: dict[str, tuple[str, Check | None]] = {
    # text_pdf: the page counts of NOTES.tsv and words of each document.
    "GeoTopo-komprimiert.pdf": ("", has("Geometrie und Topologie")),
    "tracemonkey.pdf": ("", has("Trace-based Just-in-Time Type Specialization")),
    "multicolumn.pdf": ("", has("Two-Column Document")),
    "testPDF.pdf": ("", has("Apache Tika")),
    # scanned_pdf: OCR must find the text the notes describe.
    "testOCR.pdf": ("", both(ocr_pages, has("Happy New Year 2003"))),
    "issue7200.pdf": ("", both(ocr_pages, has("Lorem ipsum dolor sit amet"))),
    "testPDF_jpeg2000.pdf": ("", both(ocr_pages, has("Terms and conditions", "Loan"))),
    "images_1bit_grayscale.pdf": ("", both(ocr_pages, has("Image Mask", "FlateDecode"))),
    # encrypted_pdf (with the password of the notes; without one: PASSWORD_REQUIRED).
    "testPDF_protected.pdf": ("", pages(41)),
    "libreoffice-writer-password.pdf": ("", has("Lorem ipsum dolor sit amet")),
    "issue3371.pdf": ("", both(pages(1), has("This is quite a simple example"))),
    "testPassword4Spaces.pdf": ("", has("Just some text")),
    "testPDF_no_extract_no_accessibility_owner_user.pdf": (
        "",
        both(has("Hello World"), warned("permissions forbid")),
    ),
    # corrupt_pdf: "raises" / "0 pages" → CORRUPT_DOCUMENT; repaired with text → a warning.
    "poppler-742-0-fuzzed.pdf": ("CORRUPT_DOCUMENT", None),
    "poppler-67295-0.pdf": ("CORRUPT_DOCUMENT", None),
    "GHOSTSCRIPT-698804-1-fuzzed.pdf": ("CORRUPT_DOCUMENT", None),
    "bug1020226.pdf": ("CORRUPT_DOCUMENT", None),
    # "repaired; 1 page, no text": a damaged file that yields nothing is not a success.
    "PDFBOX-3148-2-fuzzed.pdf": ("CORRUPT_DOCUMENT", None),
    "poppler-90-0-fuzzed.pdf": ("", both(pages(16), repaired)),
    "xref_command_missing.pdf": ("", both(repaired, has("Reduced test-case"))),
    "testPDF_bad_page_303226.pdf": ("", both(pages(19), repaired, has("Drug Enforcement"))),
    # doc
    "test.doc": ("", has("test")),
    "testWORD_various.doc": ("", has("Bold italic underline", "Row 1 Col 1")),
    "testComment.doc": ("", has("Here is some text")),
    "testWORD_protected_passtika.doc": ("", has("This is an encrypted Word 2007 File")),
    # docx
    "testWORD_various.docx": (
        "",
        both(
            has("Here is a list", "This is a footnote"),
            roles("header", "footer", "table", "textbox", "footnote", "list_item"),
        ),
    ),
    "tbl-having-tables.docx": ("", empty_tables(3)),
    "hdr-header-footer.docx": ("", both(has("Header for section-1"), roles("header", "footer"))),
    "having-images.docx": ("", images),
    "testWORD_protected_passtika.docx": ("", has("This is an encrypted Word 2007 File")),
    # xlsx
    "styles_1M.xlsx": ("", sheets(1, 1_000_000)),
    "CVLKRA-KYC_Download_File_Structure_V3.1.xlsx": ("", both(sheets(30), has("UPDATE FLAG"))),
    "testEXCEL.xlsx": ("", both(sheets(3), has("Numbers and their Squares"))),
    "testEXCEL-formats.xlsx": ("", has("Scientific")),
    "testEXCEL_protected_passtika.xlsx": ("", has("This is an Encrypted Excel spreadsheet")),
    # xls
    "testEXCEL.xls": ("", both(sheets(3), has("Numbers and their Squares"))),
    "jxl.xls": ("", both(sheets(2), has("Pi"))),
    "testEXCEL_protected_passtika.xls": ("", has("This is an Encrypted Excel spreadsheet")),
    # pptx (NOTES.tsv says 2 slides for testPPT_various; the file has 1)
    "testPPT_various.pptx": ("", has("Here is a numbered list")),
    "testComment.pptx": ("", both(has("Here is some text"), comments)),
    "testPPT_protected_passtika.pptx": ("", has("This is an encrypted PowerPoint 2007 slide")),
}


def _password(notes: str) -> str:
    match = re.search(r'(?:user )?password (?:is [^"]*)?"([^"]*)"', notes)
    return match.group(1) if match else ""


def _cases() -> list[Case]:
    cases = []
    if not (CORPUS / "NOTES.tsv").is_file():
        return cases
    with (CORPUS / "NOTES.tsv").open(newline="") as notes_file:
        rows = list(csv.DictReader(notes_file, delimiter="\t"))
    listed = {row["file_name"] for row in rows}
    for path in sorted(CORPUS.glob("*/*")):
        if path.name not in listed:
            rows.append(
                {"category": path.parent.name, "file_name": path.name, "what_it_exercises": ""}
            )
    no_antiword = antiword_path() is None
    for row in rows:
        category, name, notes = row["category"], row["file_name"], row["what_it_exercises"]
        reason, check = EXPECTED.get(name, ("", None))
        if check is None and not reason:
            count = re.match(r"(\d+) pages?\b", notes)
            check = pages(int(count.group(1))) if count and category.endswith("pdf") else None
        password = _password(notes) if "owner-password only" not in notes else ""
        if category == "encrypted_pdf" and "owner-password only" not in notes:
            assert password or "four spaces" in notes, f"no password in the notes of {name}"
            password = password or "    "
        if password:
            cases.append(Case(category, name, notes, "", "PASSWORD_REQUIRED"))
        if category == "doc" and no_antiword and not reason:
            reason, check = "UNSUPPORTED_FORMAT", None
        cases.append(Case(category, name, notes, password, reason, check))
    return cases


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = make_stack(
        tmp_path_factory.mktemp("corpus"), replicas=1, gateways=1, extra_env=OCR_PRELOAD_ALL
    )
    s.start()
    yield s
    s.stop()


@dataclass
class Result:
    case: Case
    job: job_pb2.Job
    package: rp.ReadingPackage | None
    seconds: float


def _run(address: str, case: Case) -> Result:
    path = CORPUS / case.category / case.name
    started = time.monotonic()
    channel, s = stub(address)
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name=case.name, content=path.read_bytes(), password=case.password
            ),
            timeout=60,
        ).job
    job = wait_terminal(address, job.job_id, timeout=240)
    seconds = time.monotonic() - started
    package = None
    if job.state == job_pb2.STATE_SUCCEEDED:
        with Client(address) as client:
            package = client.result(job.job_id)
    return Result(case, job, package, seconds)


def test_corpus(stack: LocalStack) -> None:
    cases = _cases()
    assert cases, "NOTES.tsv lists no files"
    address = stack.gateway_addresses[0]
    # The slow ones (OCR, the 1M-cell workbook) first, so the rest fill in beside them.
    slow = [c for c in cases if c.category == "scanned_pdf" or "1M" in c.name]
    ordered = slow + [c for c in cases if c not in slow]
    with ThreadPoolExecutor(max_workers=2) as pool:  # the replica parses 2 at a time
        done = dict(
            zip(map(id, ordered), pool.map(lambda c: _run(address, c), ordered), strict=True)
        )
    results = [done[id(case)] for case in cases]
    lines = [
        f"{'file':<58} {'state/reason':<28} {'pages':>6} {'chars':>9} {'ocr pages':>9} "
        f"{'seconds':>8}"
    ]
    problems = []
    for r in results:
        label = r.case.name + (" (password)" if r.case.password else "")
        state = job_pb2.State.Name(r.job.state).removeprefix("STATE_")
        outcome = state + (f"/{r.job.error.reason}" if r.job.error.reason else "")
        ocr_pages = sum(p.ocr for p in r.package.pages) if r.package else 0
        lines.append(
            f"{label:<58} {outcome:<28} {r.job.result.page_count:>6} "
            f"{r.job.result.char_count:>9} {ocr_pages:>9} {r.seconds:>8.2f}"
        )
        try:
            _verify(r)
        except AssertionError as err:
            problems.append(f"{label}: {err}")
    print("\n" + "\n".join(lines))
    assert not problems, "\n".join(problems)


def _verify(r: Result) -> None:
    case, job = r.case, r.job
    if case.reason:
        assert job.state == job_pb2.STATE_FAILED, f"expected {case.reason}, got {job.state}"
        assert job.error.reason == case.reason, f"{job.error.reason}: {job.error.message}"
        return
    assert job.state == job_pb2.STATE_SUCCEEDED, f"{job.error.reason}: {job.error.message}"
    package = r.package
    assert package is not None
    # Never an empty success: text, cells, images or (even empty) tables must be there.
    content = (
        job.result.char_count + len(package.assets) + sum(len(p.tables) for p in package.pages)
    )
    assert content > 0, f"SUCCEEDED with an empty package: {list(package.warnings)}"
    if case.check is not None:
        case.check(package)
