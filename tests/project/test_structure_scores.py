"""docparse's structure scores, pinned with margins: the four reference documents and a small
generated family (bench/structure), parsed in process and rendered as Markdown, scored per
property against the truth written when each PDF was drawn. A parser change that loses headings,
lists, tables, reading order or furniture detection fails here; the side-by-side comparison with
pymupdf4llm + layout and the cost per page are the benchmark's (`python -m bench.structure.bench`,
bench/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.structure.documents import article, newsletter, procedure, report
from bench.structure.engines import run
from bench.structure.family import random_document
from bench.structure.score import Score, score
from bench.structure.truth import Truth

pytestmark = pytest.mark.slow

# Every score on these documents was 1.00 when they were pinned (one heading not in the truth:
# a sidebar title); the floors leave a small margin for harmless changes and catch real losses.
FLOORS = {
    "paragraphs whole": 0.97,
    "paragraph order": 0.97,
    "headings": 0.95,
    "heading levels": 0.95,
    "list items": 0.95,
    "list levels": 0.95,
    "tables TEDS": 0.93,
}
FAMILY_SEEDS = range(21000, 21006)


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Score]:
    out = tmp_path_factory.mktemp("structure-scores")
    truths: list[Truth] = [article(out), report(out, long_rows=40), procedure(out), newsletter(out)]
    truths += [random_document(out, seed) for seed in FAMILY_SEEDS]
    rendered = run("docparse", [out / f"{t.name}.pdf" for t in truths], 1)
    return {t.name: score(str(rendered[t.name]["markdown"]), t) for t in truths}


def _total(scores: list[Score]) -> dict[str, float | None]:
    total = Score()
    for one in scores:
        total = total + one
    return total.values()


@pytest.mark.parametrize("group", ["reference", "family"])
def test_structure_scores_hold(scored: dict[str, Score], group: str) -> None:
    names = [n for n in scored if n.startswith("family") == (group == "family")]
    values = _total([scored[n] for n in names])
    low = {p: values[p] for p, floor in FLOORS.items() if (values[p] or 0.0) < floor}
    assert not low, f"{group}: scores under their floors {FLOORS}: {low}"
    assert values["furniture lines"] == 0, values
    assert (values["headings not in truth"] or 0) <= 1, values


# Family documents of sets nobody had looked at that once scored low, and what they showed:
# three narrow columns whose nested list items left the left edge nearly empty (taken for a
# gutter: the page read line by line across its columns); two tables one paragraph apart, the
# paragraph's last line close enough to join them into one run (the first one lost); a list
# whose first marker stood in the gutter (cutting the page); a ruled table at the top of a
# right column, beside text, joined to the last table of the page before.
ONCE_FAILED = {
    13010: ("paragraph order", "list items"),
    7016: ("tables TEDS",),
    17000: ("list items", "list levels"),
    17002: ("tables TEDS",),
}


def test_layouts_that_once_failed_read_right(tmp_path: Path) -> None:
    truths = [random_document(tmp_path, seed) for seed in ONCE_FAILED]
    rendered = run("docparse", [tmp_path / f"{t.name}.pdf" for t in truths], 1)
    for truth, properties in zip(truths, ONCE_FAILED.values(), strict=True):
        values = score(str(rendered[truth.name]["markdown"]), truth).values()
        assert {p: values[p] for p in properties} == dict.fromkeys(properties, 1.0), truth.name
