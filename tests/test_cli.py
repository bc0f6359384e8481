"""The `docparse` command end to end: up, submit --watch, status, watch, and a clean stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from docparse.embedded_redis import free_port
from tests.helpers import eventually, make_pdf

ROOT = Path(__file__).resolve().parents[1]
DOCPARSE = [sys.executable, "-m", "docparse"]


def _children(pid: int) -> set[int]:
    """Every live descendant of `pid`, read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    proc = subprocess.Popen(
        [*DOCPARSE, "up", "--replicas", "2", "--gateways", "1", "--port", str(port),
         "--data-dir", str(tmp_path_factory.mktemp("up"))],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("docparse ready"):
            break
    else:
        pytest.fail(f"docparse up exited with {proc.wait()} before it was ready")
    assert f"gateway=127.0.0.1:{port}" in line
    yield proc, f"127.0.0.1:{port}"
    if proc.poll() is None:
        proc.kill()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DOCPARSE, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_submit_watch_status_and_errors(
    up: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    _, target = up
    document = tmp_path / "six.pdf"
    document.write_bytes(make_pdf(6))
    submitted = run_cli("submit", str(document), "--watch", "--target", target)
    assert submitted.returncode == 0, submitted.stderr
    assert "6/6" in submitted.stdout  # the progress board reached the end
    job_id, state = submitted.stdout.strip().splitlines()[-1].split()[:2]
    assert state == "SUCCEEDED"

    status = run_cli("status", job_id, "--target", target, "--json")
    assert status.returncode == 0 and '"state": "STATE_SUCCEEDED"' in status.stdout
    watched = run_cli("watch", job_id, "--target", target)
    assert watched.returncode == 0 and "SUCCEEDED" in watched.stdout

    missing = run_cli("status", "f" * 32, "--target", target)
    assert missing.returncode == 2
    assert "NOT_FOUND JOB_NOT_FOUND" in missing.stderr


def test_sigterm_stops_every_child_process(up: tuple[subprocess.Popen[str], str]) -> None:
    proc, _ = up
    children = _children(proc.pid)
    assert len(children) >= 4  # redis-server, 2 parser_svc, 1 gateway
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    eventually(lambda: not any(_alive(pid) for pid in children), 30, "children to exit")


def test_demo_exits_zero_after_parsing_the_examples(tmp_path: Path) -> None:
    env = {**os.environ, "DEMO_EXIT": "1"}
    demo = subprocess.run(
        [*DOCPARSE, "up", "--demo", "examples", "--port", str(free_port()),
         "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout + demo.stderr
    examples = sorted(p.name for p in (ROOT / "examples").iterdir())
    summary = demo.stdout.split("replicas", 1)[1]
    for name in examples:
        line = next(line for line in summary.splitlines() if line.startswith(name[:28]))
        assert " SUCCEEDED " in line
    assert "all documents parsed" in demo.stdout
