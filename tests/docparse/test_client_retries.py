"""The retry table (docparse.retries) against a real stack, through the CLI as a user runs it:
what cannot succeed fails at once, a target that refuses connections fails within 30 s naming
itself, and a rate limit is waited out once, for the time it states."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from docparse.local.embedded_redis import free_port
from docparse.local.stack import LocalStack
from docparse_server.tenancy import key_digest
from tests.conftest import auth_env, make_stack
from tests.helpers import make_pdf

ROOT = Path(__file__).resolve().parents[2]
DOCPARSE = [sys.executable, "-m", "docparse"]
KEYS: dict[str, object] = {
    "keys": [
        {"sha256": key_digest("small-key"), "tenant": "small", "max_upload_bytes": 50_000},
        {"sha256": key_digest("slow-key"), "tenant": "slow", "submits_per_minute": 1},
    ]
}
RETRY_LINE = re.compile(r"^retry: retrying (\w+) in ([\d.]+) s after (\w+) (\w+)", re.M)


@dataclass
class Background:
    """A CLI run in the background: its target, and (once it ended) its outcome and wall time."""

    target: str
    done: threading.Event = field(default_factory=threading.Event)
    returncode: int = -1
    stderr: str = ""
    elapsed: float = 0.0


@pytest.fixture(scope="module")
def closed_port_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Background]:
    """`docparse submit` at a port nobody listens on, started first: its 30 s run while the
    stack starts and the other tests run."""
    document = tmp_path_factory.mktemp("closed") / "one.pdf"
    document.write_bytes(make_pdf(1))
    run = Background(f"127.0.0.1:{free_port()}")

    def submit() -> None:
        done, run.elapsed = run_cli("submit", str(document), "--target", run.target)
        run.returncode, run.stderr = done.returncode, done.stderr
        run.done.set()

    thread = threading.Thread(target=submit, daemon=True)
    thread.start()
    yield run
    thread.join(timeout=120)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, closed_port_run: subprocess.Popen[str]
) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("retries"),
        replicas=1,
        gateways=1,
        extra_env=auth_env(KEYS, "internal-token-for-retries"),
    ) as running:
        yield running


def run_cli(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([*DOCPARSE, *args], capture_output=True, text=True, timeout=180, cwd=ROOT)
    return done, time.monotonic() - started


def test_document_too_large_fails_at_once_with_exit_2(stack: LocalStack, tmp_path: Path) -> None:
    big = tmp_path / "big.pdf"
    big.write_bytes(make_pdf(1) + b"%" + b"x" * 60_000)
    target = stack.gateway_addresses[0]
    run, elapsed = run_cli("submit", str(big), "--target", target, "--api-key", "small-key", "-v")
    assert run.returncode == 2, run.stderr
    assert "error: RESOURCE_EXHAUSTED DOCUMENT_TOO_LARGE" in run.stderr
    assert "tried" not in run.stderr and not RETRY_LINE.search(run.stderr)  # one upload
    print(f"DOCUMENT_TOO_LARGE: exit 2 after {elapsed:.1f} s (interpreter start included)")


def test_a_folder_with_a_file_too_large_fails_at_once_naming_it(
    stack: LocalStack, tmp_path: Path
) -> None:
    """The same through UploadBatch (a folder): the replica refuses the file at its header,
    while the client is still streaming, and the reason reaches the user."""
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "a-small.pdf").write_bytes(make_pdf(1))
    big = folder / "b-big.pdf"
    big.write_bytes(make_pdf(1) + b"%" + b"x" * 3_000_000)
    target = stack.gateway_addresses[0]
    run, _ = run_cli("submit", str(folder), "--target", target, "--api-key", "small-key", "-v")
    assert run.returncode == 2, run.stderr
    # The file's own size: a generated PDF's length varies by a byte from run to run.
    size = big.stat().st_size
    refused = f"error: RESOURCE_EXHAUSTED DOCUMENT_TOO_LARGE: 'b-big.pdf' has {size} bytes"
    assert refused in run.stderr
    # Never retried for its reason; only a status gRPC lost on the way (a bare INTERNAL, see
    # docparse/retries.py) is asked again.
    assert all(code == "INTERNAL" for _, _, code, _ in RETRY_LINE.findall(run.stderr))


def test_rate_limited_submit_waits_the_stated_time_once(stack: LocalStack, tmp_path: Path) -> None:
    """The tenant may submit 1 document a minute: the second submit is told RATE_LIMITED with
    `retry_after_s` (the rest of the minute), waits exactly that once, and then succeeds."""
    if time.time() % 60 > 50:  # both submits must fall in the same minute of the limiter
        time.sleep(61 - time.time() % 60)
    target = stack.gateway_addresses[0]
    common = ("--target", target, "--api-key", "slow-key", "-v")
    first_doc, second_doc = tmp_path / "first.pdf", tmp_path / "second.pdf"
    first_doc.write_bytes(make_pdf(1, "first"))
    second_doc.write_bytes(make_pdf(1, "second"))
    first, _ = run_cli("submit", str(first_doc), *common)
    assert first.returncode == 0, first.stderr
    second, elapsed = run_cli("submit", str(second_doc), *common)
    assert second.returncode == 0, second.stderr
    retries = RETRY_LINE.findall(second.stderr)
    assert len(retries) == 1, second.stderr
    method, delay, code, reason = retries[0]
    assert (method, code, reason) == ("SubmitJob", "RESOURCE_EXHAUSTED", "RATE_LIMITED")
    assert 0 < float(delay) <= 60
    assert float(delay) <= elapsed < float(delay) + 30  # waited that long, then succeeded
    assert "QUEUED" in second.stdout or "RUNNING" in second.stdout or "SUCCEEDED" in second.stdout
    print(f"RATE_LIMITED: stated {delay} s, the submit took {elapsed:.1f} s")


def test_closed_port_fails_within_30_s_naming_the_target(
    closed_port_run: Background, stack: LocalStack
) -> None:
    assert closed_port_run.done.wait(timeout=120)
    stderr, elapsed, target = (
        closed_port_run.stderr,
        closed_port_run.elapsed,
        closed_port_run.target,
    )
    assert closed_port_run.returncode == 2, stderr
    assert f"error: UNAVAILABLE TARGET_UNREACHABLE: no docparse server answered at {target}" in (
        stderr
    )
    spent = re.search(r"SubmitJob tried (\d+) times over ([\d.]+) s", stderr)
    assert spent is not None, stderr
    assert int(spent[1]) >= 5 and float(spent[2]) <= 30.0
    assert elapsed < 30.0 + 10  # plus the interpreter's start on a loaded machine
    print(f"closed port: exit 2 after {elapsed:.1f} s wall, {spent[0]}")
