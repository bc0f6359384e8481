"""The structure benchmark's own instruments (bench/structure): the generated PDFs hold
what their truth says, and the scorer gives a perfect Markdown 1.0 on every property and drops
each property a broken Markdown breaks. docparse's own scores are the benchmark's business
(bench/README.md), not pinned here."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from bench.structure.documents import article, newsletter, procedure, report
from bench.structure.engines import run
from bench.structure.family import random_document
from bench.structure.markdown_blocks import norm
from bench.structure.score import score
from bench.structure.teds import ParsedTable, teds
from bench.structure.truth import Truth


def html_table(table: dict[str, Any], keep_rows: int | None = None) -> str:
    rows = table["rows"][:keep_rows]
    out = ["<table>"]
    for index, row in enumerate(rows):
        tag = "th" if index < table["header_rows"] else "td"
        cells = "".join(
            f'<{tag} rowspan="{c["row_span"]}" colspan="{c["col_span"]}">'
            f"{html.escape(c['text'])}</{tag}>"
            for c in row
        )
        out.append(f"<tr>{cells}</tr>")
    return "\n".join([*out, "</table>"])


def perfect(truth: Truth, *, headings: bool = True, cut_tables: bool = False) -> str:
    """Markdown holding the truth as a careful reader would write it (`headings` False: as plain
    paragraphs; `cut_tables`: each table's body cut to two rows)."""
    parts = [("#" * h["level"] + " " if headings else "") + h["text"] for h in truth.headings]
    parts += [p["text"] for p in truth.paragraphs]
    parts.append(
        "\n".join("  " * (i["level"] - 1) + f"{i['marker']} {i['text']}" for i in truth.list_items)
    )
    for table in truth.tables:
        parts.append(html_table(table, table["header_rows"] + 2 if cut_tables else None))
    return "\n\n".join(parts) + "\n"


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Truth, Path]]:
    out = tmp_path_factory.mktemp("structure")
    truths = [
        article(out), report(out, long_rows=40), procedure(out), newsletter(out),
        random_document(out, 11),
    ]  # fmt: skip
    return {t.name: (t, out / f"{t.name}.pdf") for t in truths}


def page_texts(path: Path) -> list[str]:
    with pymupdf.open(path) as doc:
        return [norm(page.get_text()) for page in doc]


def test_the_pdfs_hold_their_truth(documents: dict[str, tuple[Truth, Path]]) -> None:
    for truth, path in documents.values():
        texts = page_texts(path)
        assert len(texts) == truth.pages
        every = " ".join(texts)
        for heading in truth.headings:
            assert norm(heading["text"]) in every, (truth.name, heading)
        for line in truth.furniture:
            assert any(norm(line) in text for text in texts), (truth.name, line)
        if truth.name != "newsletter":  # drawn in reading order: each paragraph comes whole
            for paragraph in truth.paragraphs:
                assert norm(paragraph["text"]) in every, (truth.name, paragraph)


def test_the_newsletter_is_drawn_out_of_reading_order(
    documents: dict[str, tuple[Truth, Path]],
) -> None:
    truth, path = documents["newsletter"]
    every = " ".join(page_texts(path))
    whole = [p for p in truth.paragraphs if norm(p["text"]) in every]
    assert len(whole) < len(truth.paragraphs) / 2
    assert truth.furniture == [f"Harbor Notes, page {n}" for n in range(1, truth.pages + 1)]
    with pymupdf.open(path) as doc:
        assert doc[0].get_text().startswith("Harbor Notes, page 1")  # the footer drawn first


def test_the_report_holds_its_three_tables(documents: dict[str, tuple[Truth, Path]]) -> None:
    truth, path = documents["report"]
    merged, borderless, long = truth.tables
    assert merged["header_rows"] == 2
    assert merged["rows"][0][0] == {"text": "Region", "row_span": 2, "col_span": 1}
    assert [c["col_span"] for c in merged["rows"][0]] == [1, 2, 2]
    assert len(long["rows"]) == 41 and len(borderless["rows"]) == 7
    header = " ".join(norm(c["text"]) for c in long["rows"][0])
    assert truth.pages >= 2
    assert all(header in text for text in page_texts(path)[1:])  # the header repeated


def test_the_procedure_nests_its_lists(documents: dict[str, tuple[Truth, Path]]) -> None:
    truth, _ = documents["procedure"]
    assert {h["level"] for h in truth.headings} == {1, 2, 3}
    assert {i["level"] for i in truth.list_items} == {1, 2, 3}
    assert {"1.", "a)", "•", "–"} <= {i["marker"] for i in truth.list_items}  # noqa: RUF001


def test_the_family_is_seeded(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    one, two = random_document(tmp_path / "a", 7), random_document(tmp_path / "b", 7)
    other = random_document(tmp_path, 8)
    assert (tmp_path / "a" / "family_7.pdf").read_bytes()[:4] == b"%PDF"
    assert one.paragraphs == two.paragraphs and one.tables == two.tables
    assert one.paragraphs != other.paragraphs


def test_the_engines_give_markdown(documents: dict[str, tuple[Truth, Path]]) -> None:
    """Raw text holds the procedure's paragraphs whole but renders no heading; docparse gives
    Markdown of every page (its scores are the benchmark's, not pinned)."""
    truth, path = documents["procedure"]
    raw = run("get_text", [path], 1)["procedure"]
    assert raw["pages"] == truth.pages
    values = score(str(raw["markdown"]), truth).values()
    assert values["paragraphs whole"] == 1.0 and values["headings"] == 0.0
    parsed = run("docparse", [path], 1)["procedure"]
    assert parsed["pages"] == truth.pages
    assert norm(truth.headings[0]["text"]) in norm(str(parsed["markdown"]))


def test_a_perfect_markdown_scores_one(documents: dict[str, tuple[Truth, Path]]) -> None:
    for truth, _ in documents.values():
        values = score(perfect(truth), truth).values()
        assert values.pop("furniture lines") == 0, truth.name
        assert values.pop("headings not in truth") == 0, truth.name
        assert all(v in (None, 1.0) for v in values.values()), (truth.name, values)
        titled = perfect(truth) + "".join(f"\n\n## {label}\n" for label in truth.labels)
        assert score(titled, truth).values()["headings not in truth"] == 0  # sidebar titles


def test_a_broken_markdown_scores_less(documents: dict[str, tuple[Truth, Path]]) -> None:
    truth, _ = documents["report"]
    plain = score(perfect(truth, headings=False), truth).values()
    assert plain["headings"] == 0 and plain["heading levels"] == 0
    assert plain["paragraphs whole"] == 1.0
    page_markers = "\n\n".join(f"## Page {n}" for n in range(1, truth.pages + 1))
    marked = score(perfect(truth) + page_markers, truth).values()
    assert marked["headings not in truth"] == truth.pages and marked["headings"] == 1.0
    cut = score(perfect(truth, cut_tables=True), truth).values()
    assert cut["tables TEDS"] is not None and cut["tables TEDS"] < 0.7
    with_furniture = perfect(truth) + "\n\n".join(truth.furniture)
    assert score(with_furniture, truth).values()["furniture lines"] == len(truth.furniture)
    # The renderer's page marks are comments, not text a reader sees, even where a footer's
    # words ("Page 3") are the same.
    commented = perfect(truth) + "\n\n".join(f"<!-- {line} -->" for line in truth.furniture)
    assert score(commented, truth).values()["furniture lines"] == 0
    backwards = Truth(**{**truth.__dict__, "paragraphs": truth.paragraphs[::-1]})
    assert score(perfect(backwards), truth).values()["paragraph order"] == 0.0


def test_lists_flattened_or_lost_score_less(documents: dict[str, tuple[Truth, Path]]) -> None:
    truth, _ = documents["procedure"]
    flat = perfect(truth).replace("\n  ", "\n")
    values = score(flat, truth).values()
    assert values["list items"] == 1.0
    assert values["list levels"] is not None and values["list levels"] < 0.8
    loose = perfect(truth).replace("• ", "").replace("– ", "").replace("◦ ", "")  # noqa: RUF001
    assert score(loose, truth).values()["list items"] < 0.8


def test_teds_counts_spans_and_text() -> None:
    merged = ParsedTable([[("Region", 2, 1), ("Sales", 1, 2)], [("Q1", 1, 1), ("Q2", 1, 1)]], 2)
    assert teds(merged, merged) == 1.0
    flat = ParsedTable([[("Region", 1, 1), ("Sales Q1", 1, 1), ("Sales Q2", 1, 1)]], 1)
    assert 0 < teds(flat, merged) < 0.7
    typo = ParsedTable([[("Regiom", 2, 1), ("Sales", 1, 2)], [("Q1", 1, 1), ("Q2", 1, 1)]], 2)
    assert 0.9 < teds(typo, merged) < 1.0
