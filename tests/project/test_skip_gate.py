"""Under CI a skip fails the run unless tests/skip_allowlist.txt lists it (tests/skip_gate.py):
a pytest run in a child process on a tiny test file, as CI runs it (also on xdist workers)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.skip_gate import ALLOWLIST, load

ROOT = Path(__file__).resolve().parents[2]
TESTS = """
import pytest

def test_runs() -> None:
    assert True

@pytest.mark.skipif(True, reason="no frobnicator here")
def test_listed() -> None:
    pass

def test_unlisted() -> None:
    pytest.skip("no widget here")
"""
CONFTEST = """
from pathlib import Path
from tests.skip_gate import install

def pytest_configure(config):
    install(config, Path(__file__).with_name("allow.txt"))
"""

pytestmark = pytest.mark.slow  # a python per case


def _run(tmp_path: Path, allow: str, ci: bool, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_tiny.py").write_text(TESTS)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "allow.txt").write_text(allow)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT)
    # Only the plugin under test and xdist: the installed ones (hypothesis, schemathesis, ...)
    # cost ~2 s of imports in each process and have no part in a skip.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if ci:
        env["CI"] = "true"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "xdist.plugin", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*command, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_under_ci_an_unlisted_skip_fails_the_run_and_is_named(tmp_path: Path) -> None:
    done = _run(tmp_path, "test_tiny.py::test_listed | the frobnicator has no package\n", True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed, 2 skipped" in done.stdout
    assert "skipped under CI and not allowlisted: no widget here" in done.stdout
    assert "test_tiny.py::test_unlisted" in done.stdout
    assert "allowed  test_tiny.py::test_listed: no frobnicator here" in done.stdout
    assert "2 skipped, 1 not allowlisted" in done.stdout


def test_under_ci_allowlisted_skips_pass_also_on_xdist_workers(tmp_path: Path) -> None:
    allow = "# comment\ntest_tiny.py::test_listed | no package\n*::test_unl* | a pattern\n"
    for args in ((), ("-n", "2")):
        done = _run(tmp_path, allow, True, *args)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 skipped, 0 not allowlisted" in done.stdout


def test_on_xdist_workers_an_unlisted_skip_still_fails(tmp_path: Path) -> None:
    done = _run(tmp_path, "", True, "-n", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 skipped, 2 not allowlisted" in done.stdout


def test_outside_ci_a_skip_is_only_a_skip(tmp_path: Path) -> None:
    done = _run(tmp_path, "", False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not allowlisted" not in done.stdout


def test_an_entry_without_a_reason_is_refused(tmp_path: Path) -> None:
    (tmp_path / "allow.txt").write_text("tests/x.py::test_y\n")
    with pytest.raises(ValueError, match=re.escape("expected `node id pattern | reason`")):
        load(tmp_path / "allow.txt")


def test_the_allowlist_parses_and_every_entry_names_an_existing_test_file() -> None:
    for entry in load(ALLOWLIST):
        path = entry.pattern.split("::", 1)[0]
        assert any(ROOT.glob(path)), f"{entry.pattern}: no such test file"
