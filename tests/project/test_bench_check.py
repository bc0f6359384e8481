"""The parse benchmark checks its packages against raw pymupdf (bench/parse/check.py): a real
package (the parse child's own `parse`) passes, the same package with a page cut short or a
page missing fails the run with a line naming the file and the page; and its one-page inputs
differ from one another and from the fork server's warm-up page."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pymupdf

from bench.harness.documents import one_page_pdfs
from bench.parse.check import Tally, check_package, raw_page_chars
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions
from tests.helpers import make_pdf

ROOT = Path(__file__).resolve().parents[2]


def package_of(path: Path, tmp_path: Path) -> rp.ReadingPackage:
    options = ParseOptions.defaults(assets_dir=tmp_path / "assets", pdf_tables=True)
    return parse("pdf", path.read_bytes(), lambda *_: None, options)


def checked(path: Path, package: rp.ReadingPackage) -> Tally:
    tally = Tally()
    check_package(path.name, raw_page_chars(path), package, tally)
    return tally


def test_a_package_cut_short_fails_the_check(tmp_path: Path) -> None:
    path = tmp_path / "three.pdf"
    path.write_bytes(make_pdf(3, "checked"))
    package = package_of(path, tmp_path)
    whole = checked(path, package)
    assert whole.problems == [], whole.problems
    assert (whole.packages, whole.pages) == (1, 3)

    page = package.pages[1]
    page.text = page.text[: len(page.text) // 2]  # the second page's text cut in half
    cut = checked(path, package)
    assert len(cut.problems) == 1
    assert cut.problems[0].startswith("three.pdf page 2 (read from its text layer):")

    del package.pages[2]  # a page missing
    short = checked(path, package)
    assert short.problems == ["three.pdf: 2 pages in the package, raw 3"]


def test_one_page_inputs_pass_and_a_small_cut_is_caught(tmp_path: Path) -> None:
    paths = one_page_pdfs(tmp_path, 8, "t")
    for path in paths:
        package = package_of(path, tmp_path)
        assert checked(path, package).problems == [], path.name
        page = package.pages[0]
        page.text = page.text[: int(len(page.text) * 0.9)]  # a tenth of the page lost
        assert len(checked(path, package).problems) == 1, path.name


def test_a_mismatch_ends_the_benchmark_with_status_1() -> None:
    code = (
        "from bench.parse.check import PackageMismatch\n"
        "raise PackageMismatch('of round 1 (fork_server)', ['memo.pdf page 1 (read from its "
        "text layer): 10 characters in the package, raw get_text 900 (allowed ±54)'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "packages of round 1 (fork_server) do not match raw pymupdf" in done.stderr
    assert "memo.pdf page 1" in done.stderr


def test_one_page_inputs_differ_from_each_other_and_from_the_warm_up_page(
    tmp_path: Path,
) -> None:
    paths = one_page_pdfs(tmp_path, 12, "v")
    texts, fonts, sizes, tables, images = set(), set(), set(), 0, 0
    for path in paths:
        with pymupdf.open(path) as doc:
            page = doc[0]
            texts.add(page.get_text())
            fonts |= {font[3] for font in page.get_fonts()}
            sizes.add(len(page.get_text()) // 500)
            images += bool(page.get_images())
            tables += bool(page.get_drawings())  # the ruled table's lines
    assert len({hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}) == 12
    assert len(texts) == 12
    assert not any("Warm-up page" in text for text in texts)
    assert len(fonts) >= 4, fonts
    assert len(sizes) >= 3, sizes  # short and long pages
    assert 0 < tables < 12 and 0 < images < 12, (tables, images)
