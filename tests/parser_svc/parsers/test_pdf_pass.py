"""One run of a PDF page for its text and its rules (parser_svc/parsers/pdf_pass.py, the native
module parser_svc/parsers/native/pdf_pass.c) reads exactly what two runs read: the text page,
the "l"
and "re" items and the item count of page.get_cdrawings(), hence the same tables. Checked on
generated pages drawn every way the walk has a rule for (tests/fixtures/drawings.py), on the
format tests' table page and on every page of the shared corpus' PDFs when present. A page the
run saw draw no image shows none to page.get_image_info()."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest

from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions, pdf, pdf_images, pdf_pass
from parser_svc.parsers.native import build
from parser_svc.parsers.pdf_pass import image_info, rules_of, text_and_rules
from parser_svc.parsers.pdf_tables import find_tables
from tests import fixtures
from tests.fixtures.drawings import PAGES, WORDS, drawing_zoo_pdf, repeated_images_pdf
from tests.helpers import CORPUS, corpus_pdfs, make_pdf

_MUPDF_WARNINGS = re.compile(r"\(\d+ warnings")
ZOO = [*PAGES, "rotated", "annotated"]


@pytest.fixture(autouse=True)
def _native_when_it_can_be() -> None:
    """`make setup` builds the module wherever it can be built; where it can, the tests below
    must not pass by comparing the two-run path with itself."""
    if not pdf_pass.native():
        try:
            build.build()
        except RuntimeError as err:
            pytest.skip(
                f"parser_svc.parsers.native cannot be built here ({err}): pages are read twice"
            )
        pytest.fail("parser_svc.parsers.native can be built here but is not: run make setup")


def _compare(page: pymupdf.Page) -> tuple[pdf_pass.Rules, list[object]]:
    """Asserts one run equals two runs on `page`; returns the rules and the tables found."""
    two = page.get_textpage()
    blocks = page.get_text("blocks", sort=True, textpage=two)
    rules = rules_of(page.get_cdrawings())
    one, native_rules, images, image_page = text_and_rules(page)
    if images == 0:  # what lets the parser skip the image scan of the page
        assert page.get_image_info() == []
    else:  # the run's image text page holds what a run of get_image_info's own holds
        assert image_page is not None
        assert image_info(page, image_page) == image_info(page, None)
        assert _shown(page, image_page, {}) == _image_info_with_xrefs(page)
        assert _shown(page, None, {}) == _image_info_with_xrefs(page)  # the fallback's way
    assert page.get_text("blocks", sort=True, textpage=one) == blocks
    assert page.get_text("words", textpage=one) == page.get_text("words", textpage=two)
    assert native_rules == rules
    tables = find_tables(rules, lambda: page.get_text("words", textpage=two))
    assert find_tables(native_rules, lambda: page.get_text("words", textpage=one)) == tables
    return rules, list(tables)


def _shown(page: pymupdf.Page, image_page: object, digests: dict[int, bytes | None]) -> object:
    return pdf_images.named_images(page.parent, page, page.get_images(), image_page, digests)


def _image_info_with_xrefs(page: pymupdf.Page) -> list[dict[str, object]]:
    found = page.get_image_info(hashes=True, xrefs=True)
    return [{k: v for k, v in info.items() if k not in ("number", "digest")} for info in found]


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The images pdf_images decodes to hash, as they are decoded."""
    seen: list[object] = []
    decode = pdf_images.image_digest

    def counted(image: object) -> bytes:
        seen.append(image)
        return decode(image)

    monkeypatch.setattr(pdf_images, "image_digest", counted)
    return seen


def test_an_image_shown_again_is_not_decoded_again(decoded: list[object]) -> None:
    """Each image (and each showing of an inline image) is decoded once per document, and every
    page's images, with their xrefs, are what get_image_info(xrefs=True) lists: two xrefs of
    the same pixels are named as pymupdf names them (the later of the page's list)."""
    doc = pymupdf.open(stream=repeated_images_pdf())  # type: ignore[no-untyped-call]
    digests: dict[int, bytes | None] = {}
    xrefs = []
    for page in doc:
        image_page = text_and_rules(page).image_page
        shown = _shown(page, image_page, digests)
        assert shown == _image_info_with_xrefs(page)
        xrefs.append([info["xref"] for info in shown])  # type: ignore[index]
    _a, b, c, d = (item[0] for item in doc[0].get_images())  # /A is named /B: same pixels
    assert xrefs == [[b, b, c, b, 0], [b, c], [b, d], [b]]
    assert len(decoded) == 4 + 1  # A, B, C, D and the inline image; pymupdf decodes 26 times


def test_images_of_other_sizes_are_named_without_decoding(decoded: list[object]) -> None:
    """Two images can hash alike only if their decoded pixels are as many bytes: a page whose
    images all differ in size (for any component count) has them named by object alone, and
    of two images of one size (told apart by hashing) only those two are decoded, once each."""
    doc = pymupdf.open()
    sizes = {
        "red": (64, 48, (200, 0, 0)),
        "blue": (33, 31, (0, 0, 200)),
        "dot": (10, 10, (9, 9, 9)),
    }
    for number in range(3):
        page = doc.new_page()
        for row, (width, height, rgb) in enumerate(sizes.values()):
            png = fixtures._png(width, height, rgb)
            page.insert_image(pymupdf.Rect(72, 72 + 120 * row, 172, 172 + 120 * row), stream=png)
        if number == 2:  # one more image of red's size, other pixels: the two are hashed
            png = fixtures._png(64, 48, (0, 200, 0))
            page.insert_image(pymupdf.Rect(300, 72, 400, 172), stream=png)
    doc = pymupdf.open(stream=doc.tobytes())  # type: ignore[no-untyped-call]
    digests: dict[int, bytes | None] = {}
    for page in doc:
        image_page = text_and_rules(page).image_page
        assert _shown(page, image_page, digests) == _image_info_with_xrefs(page)
        if page.number < 2:
            assert decoded == []
    assert len(decoded) == 2


def _zoo() -> Iterator[tuple[str, pymupdf.Page]]:
    doc = pymupdf.open(stream=drawing_zoo_pdf())  # type: ignore[no-untyped-call]
    assert doc.page_count == len(ZOO)
    for index, name in enumerate(ZOO):
        yield name, doc[index]


@pytest.mark.parametrize("name", ZOO)
def test_one_run_reads_what_two_runs_read(name: str) -> None:
    page = dict(_zoo())[name]
    rules, tables = _compare(page)
    grid = [list(row) for row in WORDS]
    if name == "too many items":
        assert rules[1] > 5000 and tables == []
    elif name == "hand-drawn":  # its left column is a stroked quad: no rule for table detection
        assert [t.rows for t in tables] == [[row[1:] for row in grid]]  # type: ignore[attr-defined]
    else:
        assert [t.rows for t in tables] == [grid]  # type: ignore[attr-defined]


def test_a_stroke_merges_into_its_fill_only_with_the_same_items() -> None:
    """pymupdf lists a stroke of exactly the previous fill's items as one "fs" drawing: its
    items count once. A rect stroked the other way round is another item ("re" keeps the
    orientation) and counts again."""
    pages = dict(_zoo())
    assert _compare(pages["fill then stroke"])[0][1] == 9
    assert _compare(pages["fill and stroke"])[0][1] == 9
    assert _compare(pages["other orientation"])[0][1] == 18


def test_a_shading_counts_as_an_image() -> None:
    """pymupdf's image list (get_image_info) shows a shading as an image: the run counts it,
    so the page's image scan is not skipped."""
    pages = dict(_zoo())
    assert text_and_rules(pages["shading"]).images == 1
    assert len(pages["shading"].get_image_info()) == 1
    assert text_and_rules(pages["lines"]).images == 0


def test_the_rotated_page_is_read_unrotated_and_left_rotated() -> None:
    page = dict(_zoo())["rotated"]
    _compare(page)
    assert page.rotation == 90


def _boxes_pdf() -> pymupdf.Document:
    """Pages of other sizes, crop boxes off the origin, and /Rotate on the page or inherited
    from the page tree, normal and not (-90, 450, 45: pymupdf reads them as 270, 90, 0)."""
    doc = pymupdf.open()
    for width, height in ((612, 792), (200.5, 300.25), (841.89, 595.28), (50, 50)):
        page = doc.new_page(width=width, height=height)
        page.insert_text((12, 30), "Left words", fontsize=6)
        page.insert_text((width / 2 + 4, 30), "right words", fontsize=6)
    doc[1].set_cropbox(pymupdf.Rect(10.5, 20, 150, 250.75))
    _, tree = doc.xref_get_key(doc.pdf_catalog(), "Pages")  # "n 0 R"
    doc.xref_set_key(int(tree.split()[0]), "Rotate", "-90")
    for page in doc.pages(0, 2):  # these two inherit it from the tree
        doc.xref_set_key(page.xref, "Rotate", "null")
    doc.xref_set_key(doc[2].xref, "Rotate", "450")
    doc.xref_set_key(doc[3].xref, "Rotate", "45")
    return pymupdf.open(stream=doc.tobytes())  # type: ignore[no-untyped-call]


def test_the_page_box_is_pymupdfs_rect_and_rotation(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _boxes_pdf()
    seen = []
    for page in [*doc, *(page for _, page in _zoo())]:
        rect = page.rect
        expected = (rect.width, rect.height, page.rotation)
        assert pdf_pass.page_box(page) == expected
        monkeypatch.setattr(pdf_pass, "_native", None)  # pymupdf's own answer, the fallback
        assert pdf_pass.page_box(page) == expected
        monkeypatch.undo()
        seen.append(expected[2])
    assert sorted(set(seen)) == [0, 90, 270]


def test_the_package_is_the_same_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole reading package of the zoo and of the format tests' table page, with the
    native module and without it (the fallback a machine without a compiler runs)."""
    native = pdf_pass._native
    documents = (drawing_zoo_pdf(), fixtures.pdf_with_table_and_image(), _boxes_pdf().tobytes())
    for i, data in enumerate(documents):
        packages = []
        for way in (native, None):
            monkeypatch.setattr(pdf_pass, "_native", way)
            options = ParseOptions.defaults(assets_dir=tmp_path / f"{i}-{way is None}")
            packages.append(parse("pdf", data, lambda *_: None, options))
        assert packages[0] == packages[1]
        if i < 2:
            assert sum(len(page.tables) for page in packages[0].pages) >= 1
        if i == 1:
            assert len(packages[0].pages[0].images) == 1  # the table page's PNG
    # the crop box's size, rotated; pages turned a quarter are as wide as they were high
    assert [(p.width, p.height, p.rotation) for p in packages[0].pages][1:] == [
        (230.75, 139.5, 270),
        (pytest.approx(595.28), pytest.approx(841.89), 90),
        (50, 50, 0),
    ]
    assert all(page.blocks for page in packages[0].pages)


@pytest.mark.corpus
@pytest.mark.skipif(
    not (CORPUS / "text_pdf").is_dir(),
    reason=f"the shared corpus is not at {CORPUS} (it is present in CI)",
)
@pytest.mark.slow  # every corpus page, twice
def test_every_corpus_pdf_page_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Page by page as above, then each whole reading package both ways (scans aside)."""
    native = pdf_pass._native
    pages = tables = 0
    for path, doc, count in corpus_pdfs():
        for index in range(count):
            try:
                page = doc[index]
                page.get_textpage()
            except Exception:  # a page that cannot be read either way
                continue
            tables += len(_compare(page)[1])
            pages += 1
        if path.parent.name == "scanned_pdf":
            continue  # their pages go to OCR either way (and take seconds): pages compared above
        packages: list[object] = []
        for way in (native, None):
            monkeypatch.setattr(pdf_pass, "_native", way)
            options = ParseOptions.defaults(assets_dir=tmp_path / f"{path.stem}-{way is None}")
            try:
                package = parse("pdf", path.read_bytes(), lambda *_: None, options)
            except Exception as err:  # a file the parser refuses: refused the same way
                packages.append(type(err).__name__)
                continue
            # A repaired file's warning counts mupdf's warnings, which every run of a page
            # repeats: two runs counted the content stream's syntax errors twice.
            warnings = [_MUPDF_WARNINGS.sub("(N warnings", w) for w in package.warnings]
            del package.warnings[:]
            package.warnings.extend(warnings)
            packages.append(package)
        monkeypatch.setattr(pdf_pass, "_native", native)
        assert packages[0] == packages[1], path.name
    assert pages > 200 and tables > 10, (pages, tables)


def test_a_module_built_for_another_mupdf_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """After a pymupdf upgrade without a rebuild the module's structs may not match the loaded
    mupdf: it is left unused (pages read twice) and the log names both versions."""
    monkeypatch.setattr(pymupdf, "mupdf_version", "0.0.1")
    with caplog.at_level(logging.WARNING, logger=pdf_pass.__name__):
        assert pdf_pass._load() is None
    assert "built for mupdf" in caplog.text and "0.0.1" in caplog.text


def test_a_module_older_than_the_parser_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A module built from an older pdf_pass.c (another call signature) is left unused: pages
    are read twice, and the log says why."""
    monkeypatch.setattr(pdf_pass, "NATIVE_API", pdf_pass.NATIVE_API + 1)
    with caplog.at_level(logging.WARNING, logger=pdf_pass.__name__):
        assert pdf_pass._load() is None
    assert "older than this parser" in caplog.text


def test_a_missing_module_is_not_an_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No compiler where the parser was installed: the import fails and nothing is loaded,
    silently (pages are read twice: test_the_package_is_the_same_either_way)."""
    monkeypatch.setitem(sys.modules, "parser_svc.parsers.native._pdf_pass", None)
    monkeypatch.delattr("parser_svc.parsers.native._pdf_pass", raising=False)
    with caplog.at_level(logging.WARNING, logger=pdf_pass.__name__):
        assert pdf_pass._load() is None
    assert caplog.text == ""


def test_the_build_is_up_to_date_and_says_so() -> None:
    """`make setup` runs the build every time: with the module built from this source for this
    mupdf and interpreter it rebuilds nothing."""
    before = build.TARGET.stat().st_mtime_ns
    done = subprocess.run(
        [sys.executable, "-m", "parser_svc.parsers.native.build"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr
    assert "ready" in done.stdout
    assert build.TARGET.stat().st_mtime_ns == before


def _small_metrics_pdf() -> bytes:
    """One line of 11 pt Helvetica whose font descriptor says ascent 600, descent -200: a font
    whose ascender minus descender is below 1 em, as TeX fonts and many subsets have."""
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Small metrics line of text", fontname="helv", fontsize=11)
    for xref in range(1, doc.xref_length()):
        if doc.xref_get_key(xref, "Type")[1] == "/Font":
            descriptor = doc.get_new_xref()
            doc.update_object(
                descriptor,
                "<< /Type /FontDescriptor /FontName /Helvetica /Flags 32 /ItalicAngle 0 "
                "/FontBBox [0 -200 1000 600] /Ascent 600 /Descent -200 /CapHeight 600 /StemV 80 >>",
            )
            doc.xref_set_key(xref, "FontDescriptor", f"{descriptor} 0 R")
    return doc.tobytes()


# Parses argv[1] in a fresh interpreter after argv[2]'s imports; prints the first block's box
# and the package's digest.
_PARSE_AFTER = """
import hashlib, sys
from pathlib import Path
if sys.argv[2] != "parsers-first":
    import pymupdf  # pymupdf 2 imports pymupdf4llm with it, which stops quad corrections
    if sys.argv[2] == "corrections-on":
        pymupdf.TOOLS.unset_quad_corrections(False)  # pymupdf's own default
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions
package = parse("pdf", Path(sys.argv[1]).read_bytes(), lambda *_: None, ParseOptions.defaults())
box = package.pages[0].blocks[0].bbox
print(box.y0, box.y1, hashlib.sha256(package.SerializeToString(deterministic=True)).hexdigest())
"""


@pytest.mark.slow  # three pythons
def test_character_boxes_do_not_depend_on_what_the_process_imported_first(
    tmp_path: Path,
) -> None:
    """The parse child imports the parsers before pymupdf (and skips pymupdf4llm); a test or a
    library user imports pymupdf first (and pymupdf4llm with it, which switches pymupdf's box
    corrections off for the whole process). The same document gives the same package either
    way, and a line's box spans the font's ascent to its descent (72 - 6.6 to 72 + 2.2)."""
    source = tmp_path / "small-metrics.pdf"
    source.write_bytes(_small_metrics_pdf())
    printed = {
        order: subprocess.run(
            [sys.executable, "-c", _PARSE_AFTER, str(source), order],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[3],
        ).stdout.split()
        for order in ("parsers-first", "pymupdf-first", "corrections-on")
    }
    assert printed["parsers-first"] == printed["pymupdf-first"] == printed["corrections-on"]
    y0, y1 = (float(v) for v in printed["parsers-first"][:2])
    assert (y0, y1) == pytest.approx((65.4, 74.2), abs=0.01)


def test_a_parse_closes_its_document_unless_its_process_ends_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process that goes on (a test, the fork server's warm-up) gets its document closed; a
    forked parse child, which ends with os._exit after its parse, keeps it open until then
    (closing would free mupdf's objects one by one for nothing)."""
    opened: list[pymupdf.Document] = []
    real_open = pymupdf.open

    def recording_open(*args: object, **kwargs: object) -> pymupdf.Document:
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(pymupdf, "open", recording_open)
    data = make_pdf(2, "closed")
    parse("pdf", data, lambda *_: None, ParseOptions.defaults())
    assert opened[-1].is_closed
    monkeypatch.setattr(pdf, "_kept_until_exit", None)
    pdf.keep_documents_until_exit()
    package = parse("pdf", data, lambda *_: None, ParseOptions.defaults())
    assert not opened[-1].is_closed and pdf._kept_until_exit == [opened[-1]]
    assert len(package.pages) == 2
