"""The structure benchmark: docparse's Markdown against pymupdf4llm with its layout
model and raw pymupdf get_text, on documents whose structure is known by construction, scored
per property, with the cost per page, all from one run.

    .venv/bin/python -m bench.structure.bench                     # the four + 12 family documents
    .venv/bin/python -m bench.structure.bench --seed 500 --count 30 --no-four   # another set

Each engine runs in a process of its own (bench.structure.engines); prints the table and writes
var/bench/structure.json (scores per engine and per document, times)."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness.output import OUT_DIR, ROOT, log, write_text
from bench.structure.documents import FOUR
from bench.structure.family import random_document
from bench.structure.score import PROPERTIES, Score, score
from bench.structure.truth import Truth

ENGINES = ("docparse", "pymupdf4llm", "get_text")
HEADERS = {
    "docparse": "docparse", "pymupdf4llm": "pymupdf4llm + layout", "get_text": "get_text",
    "pymupdf4llm_no_furniture": "pymupdf4llm + layout, header/footer off",
}  # fmt: skip


def build_set(out: Path, four: bool, seed: int, count: int) -> list[Truth]:
    truths = [make(out) for make in FOUR] if four else []
    return truths + [random_document(out, seed + index) for index in range(count)]


def run_engine(engine: str, documents: Path, rounds: int) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, "-m", "bench.structure.engines", engine, str(documents)]
        done = subprocess.run(
            [*command, out.name, "--rounds", str(rounds)], cwd=ROOT, capture_output=True,
            text=True,
        )  # fmt: skip
        if done.returncode:
            raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(Path(out.name).read_text())
        return result


def ms_per_page(results: dict[str, Any]) -> float:
    per_page = [r["seconds"] * 1000 / max(1, r["pages"]) for r in results.values()]
    return float(statistics.median(per_page))


def _cell(value: float | None, furniture: bool) -> str:
    if value is None:
        return "–"  # noqa: RUF001
    return f"{value:.0f}" if furniture else f"{value:.2f}"


def table(totals: dict[str, Score], costs: dict[str, float], title: str) -> str:
    names = [HEADERS[e] for e in totals]
    lines = [f"| {title} | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    values = {engine: total.values() for engine, total in totals.items()}
    for name in PROPERTIES:
        counted = name in ("furniture lines", "headings not in truth")
        row = [_cell(values[e][name], counted) for e in totals]
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    lines.append("| median ms / page | " + " | ".join(f"{costs[e]:.1f}" for e in totals) + " |")
    if "docparse" in costs and costs.get("pymupdf4llm"):
        ratio = costs["docparse"] / costs["pymupdf4llm"]
        lines.append(f"\ndocparse / pymupdf4llm + layout, median ms per page: {ratio:.3f}\n")
    return "\n".join(lines)


def report(
    truths: dict[str, Truth], results: dict[str, dict[str, Any]], seed: int
) -> dict[str, Any]:
    """Prints a table for the four reference documents, the family and all, and returns the JSON."""
    scores = {
        engine: {name: score(out[name]["markdown"], truth) for name, truth in truths.items()}
        for engine, out in results.items()
    }
    family = [n for n, t in truths.items() if t.kind == "family"]
    groups = {
        "the four reference documents": [n for n in truths if n not in family],
        f"family, seed {seed}": family, "all": list(truths),
    }  # fmt: skip
    totals_json = {}
    for title, members in groups.items():
        if not members:
            continue
        totals = {e: sum((scores[e][n] for n in members), Score()) for e in results}
        costs = {e: ms_per_page({n: results[e][n] for n in members}) for e in results}
        pages = sum(truths[n].pages for n in members)
        print(table(totals, costs, f"{title}: {len(members)} documents, {pages} pages"))
        totals_json[title] = {"scores": {e: t.values() for e, t in totals.items()}, "ms": costs}
    per_document = {n: {e: scores[e][n].values() for e in results} for n in truths}
    return {"groups": totals_json, "documents": per_document, "seed": seed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1000, help="the family set's first seed")
    parser.add_argument("--count", type=int, default=12, help="family documents")
    parser.add_argument(
        "--no-four", action="store_true", help="without the four reference documents"
    )
    parser.add_argument("--rounds", type=int, default=1, help="timed parses per document")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--keep", type=Path, help="write the documents and Markdown here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        truths = {t.name: t for t in build_set(work, not args.no_four, args.seed, args.count)}
        log(f"{len(truths)} documents in {work}")
        results: dict[str, dict[str, Any]] = {}
        for engine in args.engines.split(","):
            log(f"running {engine}")
            results[engine] = run_engine(engine, work, args.rounds)
            if args.keep:
                for name, one in results[engine].items():
                    (work / f"{name}.{engine}.md").write_text(one["markdown"])
    out = report(truths, results, args.seed)
    write_text(OUT_DIR / "structure.json", json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
