"""The `docparse` command end to end: up, submit --watch, status, watch, and a clean stop."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from docparse.local.embedded_redis import free_port
from tests import fixtures
from tests.helpers import Up, eventually, make_pdf

pytestmark = pytest.mark.stack  # `docparse up` and its demo

ROOT = Path(__file__).resolve().parents[2]
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
    stack = Up("--replicas", "2", "--gateways", "1", "--port", str(port),
               "--http-port", str(free_port()), "--data-dir", str(tmp_path_factory.mktemp("up")),
               cwd=ROOT)  # fmt: skip
    assert stack.target == f"127.0.0.1:{port}"
    yield stack.proc, stack.target
    if stack.proc.poll() is None:
        stack.proc.kill()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DOCPARSE, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_submit_watch_status_result_and_errors(
    up: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    _, target = up
    document = tmp_path / "six.pdf"
    document.write_bytes(make_pdf(6))
    submitted = run_cli("submit", str(document), "--watch", "--target", target)
    assert submitted.returncode == 0, submitted.stderr
    assert "6/6" in submitted.stdout  # the progress board reached the end
    row = submitted.stdout.strip().splitlines()[-1].split()
    assert row[0] == "six.pdf" and row[2] == "SUCCEEDED" and row[3] == "6"
    job_id = row[1]

    status = run_cli("status", job_id, "--target", target, "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["state"] == "STATE_SUCCEEDED"
    watched = run_cli("watch", job_id, "--target", target)
    assert watched.returncode == 0 and "SUCCEEDED" in watched.stdout

    # "page N of 6" atop each page is page furniture: kept with --furniture.
    text = run_cli("result", job_id, "--format", "text", "--furniture", "--target", target)
    assert text.returncode == 0 and "page 6 of 6" in text.stdout
    markdown = run_cli("result", job_id, "--format", "markdown", "--target", target)
    assert "<!-- page 6 -->" in markdown.stdout  # page breaks are comments, not headings
    html = run_cli("result", job_id, "--format", "html", "--target", target)
    assert html.returncode == 0 and html.stdout.startswith("<!DOCTYPE html>")
    assert '<section data-page="6">' in html.stdout
    package = json.loads(run_cli("result", job_id, "--target", target).stdout)
    assert len(package["pages"]) == 6
    raw = run_cli("result", job_id, "--format", "raw", "-o", str(tmp_path / "r.pb"),
                  "--target", target)  # fmt: skip
    assert raw.returncode == 0 and "(verified)" in raw.stdout

    missing = run_cli("status", "f" * 32, "--target", target)
    assert missing.returncode == 2
    assert "NOT_FOUND JOB_NOT_FOUND" in missing.stderr
    ended = run_cli("cancel", job_id, "--target", target)
    assert ended.returncode == 2 and "FAILED_PRECONDITION JOB_ALREADY_ENDED" in ended.stderr


def test_folder_submits_as_a_batch_and_exit_code_reports_failures(
    up: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    _, target = up
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "a.pdf").write_bytes(make_pdf(2, "alpha"))
    (folder / "b.pdf").write_bytes(make_pdf(3, "beta"))
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7 truncated")
    run = run_cli("submit", str(folder), "--watch", "--json", "--target", target)
    assert run.returncode == 1, run.stderr  # one file failed
    jobs = [json.loads(line) for line in run.stdout.splitlines()]
    states = {job["file_name"]: job["state"] for job in jobs}
    assert states == {
        "a.pdf": "STATE_SUCCEEDED",
        "b.pdf": "STATE_SUCCEEDED",
        "broken.pdf": "STATE_FAILED",
    }
    batch_id = jobs[0]["batch_id"]
    batch = run_cli("batch", batch_id, "--target", target)
    assert batch.returncode == 0 and "completed 3/3" in batch.stdout


def test_password_language_server_wait_and_assets(
    up: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    """`--password-fd` (never argv) opens an encrypted PDF; `--server-wait` answers with the
    ended job in one call; `--language` reaches the server (an unknown one is refused);
    `result --assets-dir` saves the images, sha256-checked."""
    _, target = up
    secret = tmp_path / "memo.pdf"
    secret.write_bytes(fixtures.encrypted_pdf("pässwort"))
    read_end, write_end = os.pipe()
    os.write(write_end, "pässwort\n".encode())
    os.close(write_end)
    opened = subprocess.run(
        [*DOCPARSE, "submit", str(secret), "--password-fd", str(read_end), "--server-wait", "60",
         "--language", "en", "--target", target],
        capture_output=True, text=True, timeout=120, cwd=ROOT, pass_fds=(read_end,),
    )  # fmt: skip
    os.close(read_end)
    assert opened.returncode == 0, opened.stderr
    assert " SUCCEEDED " in opened.stdout  # the server waited: no watch was needed
    locked = run_cli("submit", str(secret), "--server-wait", "60", "--target", target)
    assert locked.returncode == 1 and "FAILED" in locked.stdout
    assert "PASSWORD_REQUIRED" in locked.stdout
    unknown = run_cli("submit", str(secret), "--language", "tlh", "--target", target)
    assert unknown.returncode == 2 and "LANGUAGE_NOT_INSTALLED" in unknown.stderr

    pictured = tmp_path / "pictured.docx"
    pictured.write_bytes(fixtures.docx_full())
    done = run_cli("submit", str(pictured), "--server-wait", "60", "--target", target, "--json")
    job = json.loads(done.stdout)
    assert job["state"] == "STATE_SUCCEEDED", done.stdout + done.stderr
    assets = tmp_path / "assets"
    saved = run_cli("result", job["job_id"], "--assets-dir", str(assets), "--target", target)
    assert saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["assets"]  # not a terminal: JSON by default
    assert "assets (" in saved.stderr and "sha256 verified" in saved.stderr
    assert [p.read_bytes() for p in assets.iterdir()] == [fixtures.PNG]


def test_sigterm_stops_every_child_process(up: tuple[subprocess.Popen[str], str]) -> None:
    proc, _ = up
    children = _children(proc.pid)
    assert len(children) >= 4  # redis-server, 2 parser_svc, 1 gateway
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    eventually(lambda: not any(_alive(pid) for pid in children), 30, "children to exit")


def test_demo_exits_zero_after_parsing_the_examples(tmp_path: Path) -> None:
    """`make run`'s command, while something else holds the default port 50050: the demo
    moves to a free port and says so instead of failing."""
    env = {**os.environ, "DEMO_EXIT": "1"}
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):  # already taken by someone else: just as good
            squatter.bind(("127.0.0.1", 50050))
            squatter.listen()
        demo = subprocess.run(
            [*DOCPARSE, "up", "--demo", "examples", "--data-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
        )  # fmt: skip
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "port 50050 is taken" in demo.stdout
    examples = sorted(p.name for p in (ROOT / "examples").iterdir())
    summary = demo.stdout.split("replicas", 1)[1]
    served: dict[str, set[str]] = {}  # job id -> replicas the gateway's access log names
    for raw in (tmp_path / "logs" / "gateway-0.log").read_text().splitlines():
        record = json.loads(raw) if raw.startswith("{") else {}
        if record.get("event") == "rpc" and record.get("upstream") and record.get("job_id"):
            served.setdefault(record["job_id"], set()).add(record["upstream"])
    for name in examples:
        line = next(line for line in summary.splitlines() if line.startswith(name[:28]))
        assert " SUCCEEDED " in line
        job_id, chars, replicas = (line.split(maxsplit=5)[i] for i in (1, 4, 5))
        assert int(chars) > 0, line  # every example has text: pages, cells, slides or OCR'd
        assert set(replicas.split(", ")) == served[job_id]  # every replica that answered
    assert "all documents parsed" in demo.stdout
