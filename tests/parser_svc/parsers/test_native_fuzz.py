"""The native PDF page reader under hostile input (scripts/fuzz_native.py): a short run of
mutated PDFs through its AddressSanitizer + UndefinedBehaviorSanitizer build ends with no crash
and no sanitizer report; and that build reports a memory error when there is one."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
FUZZ = ROOT / "scripts" / "fuzz_native.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_native", FUZZ)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fuzz_native = _load()

pytestmark = pytest.mark.slow  # a build and a few hundred parses


@pytest.fixture(autouse=True)
def _compiler() -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc): `make setup` installs one (make cc)")


@pytest.mark.timeout(120)
def test_a_short_fuzz_run_under_the_sanitizers_finds_nothing(tmp_path: Path) -> None:
    command = [sys.executable, str(FUZZ), "--execs", "200", "--jobs", "2", "--out", str(tmp_path)]
    done = subprocess.run(
        command, capture_output=True, text=True, errors="replace", timeout=60, cwd=ROOT
    )
    numbers = json.loads(done.stdout.splitlines()[-1])
    reports = [p.read_text()[:2000] for p in (tmp_path / "reports").iterdir()]
    assert numbers["crashes"] == 0 and numbers["reports"] == 0, (numbers, reports)
    assert numbers["executions"] >= 200 and numbers["seeds"] >= 6, numbers
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_sanitized_python_reports_a_heap_overflow(tmp_path: Path) -> None:
    """What the fuzz run counts is real: the same environment, a library that writes past a
    malloc'd block, and a report names it."""
    source = tmp_path / "bad.c"
    source.write_text(
        "#include <stdlib.h>\n"
        "int overflow(int at) {\n"
        "  char *p = malloc(4); p[at] = 1; int v = p[0]; free(p); return v;\n"
        "}\n"
    )
    library = tmp_path / "libbad.so"
    subprocess.run(
        [
            "cc",
            "-g",
            "-fsanitize=address,undefined",
            "-shared",
            "-fPIC",
            str(source),
            "-o",
            str(library),
        ],
        check=True,
    )
    script = f"import ctypes; ctypes.CDLL({str(library)!r}).overflow(8)"
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=fuzz_native.sanitizer_env(tmp_path),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=60,
    )
    assert done.returncode != 0
    reports = [p.read_text() for p in (tmp_path / "reports").iterdir()]
    assert any("heap-buffer-overflow" in report for report in reports), (reports, done.stderr)
