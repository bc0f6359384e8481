"""EPUB books (written with zipfile in tests/fixtures/books.py): chapters as pages in spine order
with their structure, the book's metadata, its images as assets; DRM, zip bombs, too many
chapters and damaged books refused with their reason."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from docparse.reasons import ErrorReason
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.detect import detect_type
from parser_svc.parsers.epub import parse_epub
from tests.fixtures import PNG
from tests.fixtures.books import epub

CHAPTERS = {
    "ch1.xhtml": "<h1>Chapter 1: The Light</h1><p>The lamp burned &amp; the sea rose.</p>"
    '<p><img src="../images/lamp.png" alt="The lamp"/></p>',
    "ch2.xhtml": "<h1>Chapter 2: Stores</h1><h2>Oil</h2><ol><li>Fill</li><li>Trim</li></ol>"
    "<table><tr><th>Item</th><th>Count</th></tr><tr><td>Wicks</td><td>12</td></tr></table>",
    "ch3.xhtml": '<section epub:type="chapter"><h1>Chapter 3: Свет</h1>'
    '<p>Маяк светит.<a epub:type="noteref" href="#n1">1</a></p></section>'
    '<aside epub:type="footnote" id="n1"><p>1. Построен в 1851 году.</p></aside>',
}


def run(data: bytes, assets: Path | None = None, **overrides: object) -> rp.ReadingPackage:
    kind = detect_type(data)
    assert kind == "epub"
    options = ParseOptions.defaults(job_id="job1", deployment="test", **overrides)
    options.assets_dir = assets
    return parse(kind, data, lambda done, total, stage: None, options)


def test_epub_chapters_in_spine_order_with_structure_and_metadata(tmp_path: Path) -> None:
    book = epub(CHAPTERS, images={"images/lamp.png": PNG}, order=[0, 2, 1])
    package = run(book, tmp_path)
    assert package.content_type == "epub"
    assert (package.metadata.title, package.metadata.author) == (
        "The Lighthouse Keeper",
        "Mara Quist",
    )
    assert package.metadata.extra["language"] == "en"
    assert [page.number for page in package.pages] == [1, 2, 3]
    assert [page.blocks[0].text for page in package.pages] == [
        "Chapter 1: The Light",
        "Chapter 3: Свет",
        "Chapter 2: Stores",
    ]
    stores = package.pages[2]
    assert [(b.role, b.text, b.level, b.marker) for b in stores.blocks[:4]] == [
        ("heading", "Chapter 2: Stores", 1, ""),
        ("heading", "Oil", 2, ""),
        ("list_item", "Fill", 1, "1."),
        ("list_item", "Trim", 1, "2."),
    ]
    assert [list(row.cells) for row in stores.tables[0].rows] == [
        ["Item", "Count"],
        ["Wicks", "12"],
    ]
    assert [(b.role, b.text) for b in package.pages[1].blocks] == [
        ("heading", "Chapter 3: Свет"),
        ("", "Маяк светит.1"),
        ("footnote", "1. Построен в 1851 году."),
    ]
    (image,) = package.pages[0].images
    assert (tmp_path / image.asset_id).read_bytes() == PNG
    assert (image.width, image.height) == (64, 48)
    markdown = to_markdown(package)
    assert (
        markdown.index("# Chapter 1")
        < markdown.index("# Chapter 3")
        < markdown.index("# Chapter 2")
    )


def test_epub_progress_per_chapter_and_images_none(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    options = ParseOptions.defaults(images="none", assets_dir=tmp_path)
    package = parse_epub(
        epub(CHAPTERS, images={"images/lamp.png": PNG}),
        lambda d, t, s: calls.append((d, t)),
        options,
    )
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert not package.assets and not package.pages[0].images
    assert "The lamp" in package.pages[0].text  # its alt text instead


def test_drm_encrypted_epub_is_unsupported_and_says_so() -> None:
    book = epub(CHAPTERS, encrypted=["OEBPS/text/ch1.xhtml", "OEBPS/text/ch2.xhtml"])
    with pytest.raises(ParseFailure) as failure:
        run(book)
    assert failure.value.reason == ErrorReason.UNSUPPORTED_FORMAT
    assert "DRM" in failure.value.message


def test_obfuscated_fonts_alone_do_not_stop_the_book() -> None:
    package = run(epub(CHAPTERS, encrypted=["OEBPS/fonts/serif.otf"]))
    assert len(package.pages) == 3


def test_epub_zip_bomb_is_refused_by_declared_size() -> None:
    out = io.BytesIO(epub(CHAPTERS))
    with zipfile.ZipFile(out, "a") as archive:
        archive.writestr("OEBPS/padding.bin", b"\0" * 8_000_000, compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(ParseFailure) as failure:
        run(out.getvalue(), max_unzipped_bytes=4_000_000)
    assert failure.value.reason == ErrorReason.DOCUMENT_TOO_LARGE


def test_epub_with_more_chapters_than_the_page_limit_is_too_large() -> None:
    book = epub({f"c{i}.xhtml": f"<p>{i}</p>" for i in range(12)})
    with pytest.raises(ParseFailure) as failure:
        run(book, max_pages=10)
    assert failure.value.reason == ErrorReason.DOCUMENT_TOO_LARGE


def test_damaged_epubs_are_corrupt() -> None:
    book = epub(CHAPTERS)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(book)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if info.filename != "META-INF/container.xml":
                target.writestr(info, source.read(info))
    binary = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(book)) as source, zipfile.ZipFile(binary, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            target.writestr(
                info, bytes(range(256)) * 8 if info.filename.endswith("ch2.xhtml") else data
            )
    for damaged in (out.getvalue(), book[: len(book) // 2], binary.getvalue()):
        with pytest.raises(ParseFailure) as failure:
            parse_epub(damaged, lambda *a: None, ParseOptions.defaults())
        assert failure.value.reason == ErrorReason.CORRUPT_DOCUMENT
