"""The benchmarks run as modules from the repository root (`python -m bench.bench_spine`, ...):
each entry point and the spine's helper-process module import and parse their options, and no
file under bench/ edits sys.path or grows past 400 lines. (The benchmarks themselves are too
long for the suite; bench/README.md has their smoke-run commands.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = [
    "bench.bench_cluster",
    "bench.bench_spine",
    "bench.bench_parse",
    "bench.bench_ocr",
    "bench.bench_capacity",
    "bench.capacity",
    "bench.parse.split",
    "bench.parse.draft_cost",
    "bench.parse.confinement_cost",
    "bench.parse.instructions",
    "bench.parse.loop_costs",
    "bench.bench_batch_watch",
    "bench.bench_options",
    "bench.bench_book",
    "bench.spine.parts",
    "bench.structure.bench",
    "bench.structure.generate",
    "bench.structure.engines",
    "bench.structure.footnotes",
]


# Each entry point as `python -m` runs it (runpy, `__main__`, the argv it would get), all in one
# interpreter: a python each cost the suite ~30 CPU s of imports for 19 `--help`s.
RUN_EACH = r"""
import contextlib, io, json, runpy, sys
modules, results = sys.argv[1:], {}
for module in modules:
    out, err, code = io.StringIO(), io.StringIO(), None
    sys.argv = [module, "--help"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        code = exit.code
    except BaseException as error:
        code = repr(error)
    results[module] = {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", RUN_EACH, *ENTRY_POINTS], cwd=ROOT, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results: dict[str, dict[str, object]] = json.loads(done.stdout)
    return results


@pytest.mark.slow  # a python for all entry points
@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_entry_point_runs_as_a_module(helps: dict[str, dict[str, object]], module: str) -> None:
    result = helps[module]
    assert result["code"] == 0, result["stderr"]
    assert str(result["stdout"]).startswith("usage:"), result["stdout"]


@pytest.mark.slow  # a python
def test_helper_process_module_imports() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.spine.children", "_unknown", "--out", "/dev/null"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "unknown role _unknown" in done.stderr, done.stderr


def test_no_sys_path_edits_and_small_files() -> None:
    sources = sorted((ROOT / "bench").rglob("*.py"))
    assert len(sources) > 10
    for path in sources:
        text = path.read_text()
        assert "sys.path" not in text, path
        assert text.count("\n") <= 400, path
