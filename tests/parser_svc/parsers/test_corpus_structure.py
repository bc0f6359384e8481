"""Public documents of the shared corpus against the structure a careful reader sees in them
(corpus_structure.py: hand-checked, with how each fact was checked). Each document is parsed
in process with the deployment defaults (parser_svc.child.parse_child.parse, as the structure
benchmark's docparse engine does) and rendered as Markdown (docparse.render.to_markdown: what
`?format=markdown` returns); the facts are asserted on that Markdown as a reader would check
them: headings and their levels, list items with their markers and nesting, tables cell for
cell, blocks in reading order, page numbers and running heads left out, no table made of
displayed maths."""

from __future__ import annotations

import re
import tempfile
from functools import cache
from pathlib import Path

import pytest

from bench.structure.markdown_blocks import Block, blocks
from docparse.render import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions
from tests.parser_svc.parsers.corpus_structure import DOCUMENTS, DocumentFacts, TableFacts

CORPUS = Path(__file__).resolve().parents[4] / "shared" / "corpus"
pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(
        not (CORPUS / "SOURCES.tsv").is_file(),
        reason=f"the shared corpus is not at {CORPUS} (it is present in CI)",
    ),
]


def plain(text: str) -> str:
    """Whitespace collapsed, case folded, Markdown emphasis and escapes dropped."""
    return " ".join(re.sub(r"[*_`\\]", "", text).split()).casefold()


@cache
def _parsed(path: str) -> tuple[rp.ReadingPackage, str]:
    source = CORPUS / path
    with tempfile.TemporaryDirectory(prefix="corpus-structure-") as assets:
        options = ParseOptions.defaults(assets_dir=Path(assets))
        package = parse(source.suffix.lstrip("."), source.read_bytes(), lambda *_: None, options)
    return package, to_markdown(package)


def _in_order(found: list[str], wanted: list[str], what: str) -> None:
    """Each wanted text starts one of `found`, after the one the previous matched."""
    at = 0
    for text in wanted:
        index = next((i for i in range(at, len(found)) if found[i].startswith(text)), None)
        assert index is not None, f"{what}: {text!r} not found (in order) in {found[at:][:12]}"
        at = index + 1


def _check_headings(facts: DocumentFacts, read: list[Block]) -> None:
    headings = [b for b in read if b.kind == "heading"]
    if facts.no_headings:
        assert not headings, [h.text for h in headings]
    if facts.title:
        assert headings and (headings[0].level, plain(headings[0].text)) == (1, plain(facts.title))
    found = [f"{h.level} {plain(h.text)}" for h in headings]
    _in_order(found, [f"{level} {plain(text)}" for level, text in facts.headings], "headings")


def _check_items(facts: DocumentFacts, read: list[Block]) -> None:
    items = [b for b in read if b.kind == "item"]
    if facts.no_items:
        assert not items, [i.text for i in items]
    found = [f"{i.level} {i.marker} {plain(i.text)}" for i in items]
    wanted = [f"{depth} {marker} {plain(text)}" for depth, marker, text in facts.items]
    _in_order(found, wanted, "list items")


def _cells(row: list[tuple[str, int, int]] | tuple[str, ...]) -> list[str]:
    return [plain(cell if isinstance(cell, str) else cell[0]) for cell in row]


def _check_table(want: TableFacts, read: list[Block], after: int) -> int:
    """The index of the first table block from `after` on that matches `want`."""
    for index in range(after, len(read)):
        table = read[index].table
        if table is None or not table.rows or _cells(table.rows[0]) != _cells(want.header):
            continue
        body = [_cells(row) for row in table.rows[1:]]
        assert len(body) == want.body_rows, (want.header, len(body))
        assert all(len(row) == len(want.header) for row in body), body
        if want.row:
            assert _cells(want.row) in body, (want.row, body[:5])
        if want.caption:
            before = read[index - 1] if index else None
            caption = plain(before.text) if before is not None else ""
            assert caption.startswith(plain(want.caption)), (want.caption, caption)
        return index
    raise AssertionError(f"no table headed {want.header}")


def _check_tables(facts: DocumentFacts, package: rp.ReadingPackage, read: list[Block]) -> None:
    after = 0
    for want in facts.tables:
        after = _check_table(want, read, after) + 1
    if facts.table_count is not None:
        assert sum(1 for b in read if b.kind == "table") == facts.table_count
    for number in facts.no_tables_on:
        page = package.pages[number - 1]
        assert not page.tables, (number, [list(r.cells) for r in page.tables[0].rows][:3])


def _check_text(facts: DocumentFacts, markdown: str, read: list[Block]) -> None:
    texts = [plain(b.text) for b in read if b.kind != "table"]
    _in_order(texts, [plain(text) for text in facts.order], "reading order")
    for text in facts.left_out:
        assert plain(text) not in texts, f"{text!r} is in the Markdown"
    whole = plain(markdown)
    for text in facts.kept:
        assert plain(text) in whole, f"{text!r} is not in the Markdown"


@pytest.mark.parametrize("facts", DOCUMENTS, ids=[Path(d.path).name for d in DOCUMENTS])
def test_public_document_structure(facts: DocumentFacts) -> None:
    package, markdown = _parsed(facts.path)
    assert max(len(package.pages), len(package.slides)) == facts.pages
    read = blocks(markdown)
    _check_headings(facts, read)
    _check_items(facts, read)
    _check_tables(facts, package, read)
    _check_text(facts, markdown, read)
