"""The CLI a newcomer reaches for, against `docparse up` as the README starts it for local
webhooks (the dev tenant's secrets file and DOCPARSE_WEBHOOK_ALLOW_CIDRS=127.0.0.1/32 in its
environment): the startup lines say which of auth, webhooks, tracing and CORS are on;
`submit --callback` reaches a receiver on this machine, signed; `docparse list` pages through
the caller's jobs with its filters; `result --json` is one line."""

from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from docparse.local.embedded_redis import free_port
from tests.helpers import Up, eventually, make_pdf

pytestmark = pytest.mark.stack  # `docparse up`

ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
ORIGIN = "http://localhost:3000"


class Receiver(http.server.ThreadingHTTPServer):
    """A webhook receiver on 127.0.0.1: verifies each delivery's signature, keeps its event."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"

    def jobs(self) -> dict[str, str]:
        """job id → the state its delivery said."""
        events = [e for e in list(self.events) if e["type"].startswith("job.")]
        return {e["data"]["job_id"]: e["data"]["state"] for e in events}

    def batches(self) -> dict[str, dict[str, Any]]:
        """batch id → the batch its `batch.completed` delivery carried."""
        events = [e for e in list(self.events) if e["type"] == "batch.completed"]
        return {e["data"]["batch_id"]: e["data"] for e in events}


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.events.append(Webhook(SECRET).verify(body, headers))  # raises if forged
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("newcomer")
    secrets = root / "webhook-secrets.json"
    secrets.write_text(json.dumps({"default": {"local": SECRET}}))
    env = {
        "DOCPARSE_WEBHOOK_SECRETS_FILE": str(secrets),
        "DOCPARSE_WEBHOOK_ALLOW_CIDRS": "127.0.0.1/32",
        "DOCPARSE_WEBHOOK_POLL_S": "0.1",
        "DOCPARSE_GATEWAY_HTTP_CORS_ORIGINS": ORIGIN,
    }
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "DOCPARSE_TRACING_ENDPOINT"):  # fmt: skip
        env[name] = ""  # tracing off, whatever the test's environment says
    stack = Up("--replicas", "1", "--port", str(free_port()), "--http-port", str(free_port()),
               "--data-dir", str(root / "stack"), cwd=ROOT, env=env)  # fmt: skip
    yield stack
    assert stack.stop() == 0


def cli(up: Up, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "docparse", *args, "--target", up.target],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip


def submitted(run: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


def test_startup_lines_say_what_is_on(up: Up) -> None:
    said = {
        line.split()[0]: line.split(None, 1)[1]
        for line in up.output
        if line.startswith("  ") and line.split()[0] in ("auth", "webhooks", "tracing", "CORS")
    }
    assert said["auth"].startswith("off"), said
    assert said["webhooks"].startswith("on: secrets ") and "127.0.0.1/32" in said["webhooks"]
    assert said["tracing"].startswith("off"), said
    assert said["CORS"].startswith(f"on for {ORIGIN}"), said
    assert any("DOCPARSE_*" in line for line in up.output), "the environment passes through"


def test_submit_with_a_callback_is_delivered_signed(
    up: Up, receiver: Receiver, tmp_path: Path
) -> None:
    one = tmp_path / "one.pdf"
    one.write_bytes(make_pdf(1, "called back"))
    called = ("--callback", receiver.url, "--callback-secret", "local")
    job = submitted(cli(up, "submit", str(one), *called, "--json"))[0]
    delivered = eventually(lambda: receiver.jobs().get(job["job_id"]), 60, "the webhook")
    assert delivered == "STATE_SUCCEEDED"

    # Several files with a callback: one batch, and one webhook for it (none per file).
    two, three = tmp_path / "two.pdf", tmp_path / "three.pdf"
    two.write_bytes(make_pdf(1, "two"))
    three.write_bytes(make_pdf(2, "three"))
    batch, *jobs = submitted(cli(up, "submit", str(two), str(three), *called, "--json"))
    batch_id = batch["batch_id"]
    assert [j["job_id"] for j in jobs] == [f"{batch_id}-0", f"{batch_id}-1"]
    ended = eventually(lambda: receiver.batches().get(batch_id), 60, "the batch's webhook")
    assert (ended["completed"], ended["succeeded"]) == (2, 2)
    assert not {j["job_id"] for j in jobs} & set(receiver.jobs())

    unknown = cli(up, "submit", str(one), "--callback", receiver.url, "--callback-secret", "x")
    assert unknown.returncode == 2
    assert "INVALID_ARGUMENT CALLBACK_SECRET_UNKNOWN" in unknown.stderr


def test_list_filters_pages_and_json_lines(up: Up, tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for n in range(3):
        (inbox / f"b{n}.pdf").write_bytes(make_pdf(1, f"batch file {n}"))
    (inbox / "broken.pdf").write_bytes(b"%PDF-1.7 truncated")
    batch = cli(up, "submit", str(inbox), "--watch", "--json")
    assert batch.returncode == 1, batch.stderr  # the broken file failed
    files = [json.loads(line) for line in batch.stdout.splitlines()]
    batch_id = files[0]["batch_id"]
    assert {f["batch_id"] for f in files} == {batch_id}

    listed = cli(up, "list", "--batch", batch_id, "--json")
    assert listed.returncode == 0, listed.stderr
    records = [json.loads(line) for line in listed.stdout.splitlines()]  # one job per line
    assert sorted(r["job_id"] for r in records) == sorted(f["job_id"] for f in files)
    failed = cli(up, "list", "--batch", batch_id, "--state", "failed", "--json")
    names = [json.loads(line)["file_name"] for line in failed.stdout.splitlines()]
    assert names == ["broken.pdf"]
    both = cli(up, "list", "--batch", batch_id, "--state", "SUCCEEDED,STATE_FAILED", "--json")
    assert len(both.stdout.splitlines()) == 4

    # Newest first; --limit stops early and names the token that goes on from there.
    everything = [json.loads(x)["job_id"] for x in cli(up, "list", "--limit", "0", "--json")
                  .stdout.splitlines()]  # fmt: skip
    first = cli(up, "list", "--limit", "2", "--json")
    assert [json.loads(x)["job_id"] for x in first.stdout.splitlines()] == everything[:2]
    token = first.stderr.split("--page-token ", 1)[1].split()[0]
    rest = cli(up, "list", "--limit", "0", "--page-token", token, "--json")
    assert [json.loads(x)["job_id"] for x in rest.stdout.splitlines()] == everything[2:]
    assert "--page-token" not in rest.stderr

    table = cli(up, "list", "--batch", batch_id)
    assert table.returncode == 0 and table.stdout.splitlines()[0].startswith("job id")
    assert "broken.pdf" in table.stdout and "CORRUPT_DOCUMENT" in table.stdout


def test_result_json_is_one_line(up: Up, tmp_path: Path) -> None:
    memo = tmp_path / "memo.pdf"
    memo.write_bytes(make_pdf(3, "one line"))
    job = submitted(cli(up, "submit", str(memo), "--server-wait", "60", "--json"))[0]
    assert job["state"] == "STATE_SUCCEEDED"
    for flags in (["--json"], ["--format", "json"], ["--json", "--format", "json"]):
        run = cli(up, "result", job["job_id"], *flags)
        assert run.returncode == 0, run.stderr
        [line] = run.stdout.splitlines()
        assert len(json.loads(line)["pages"]) == 3
    mixed = cli(up, "result", job["job_id"], "--json", "--format", "markdown")
    assert mixed.returncode == 2 and "--format json" in mixed.stderr
