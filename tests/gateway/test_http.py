"""The gateway's HTTP side against real stacks: JSON endpoints, gRPC → HTTP error mapping
(404 vs 410 vs 503, 400, 409, 413), and Server-Sent Events that resume by version — from the
browser's Last-Event-ID on another gateway, and by the gateway itself when an upstream watch is
cut under it."""

from __future__ import annotations

import http.client
import json
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from docparse.local.stack import LocalStack
from docparse_server.tenancy import key_digest
from tests import fixtures
from tests.conftest import auth_env, make_stack
from tests.helpers import eventually, make_pdf

PAGE_DELAY_MS = 50
UPLOAD_LIMIT = 1_000_000
TERMINAL = {"STATE_SUCCEEDED", "STATE_FAILED", "STATE_CANCELLED"}
TOKEN = "internal-secret-for-http-tests"
KEYS = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
    ]
}
A = {"Authorization": "Bearer key-of-a"}
B = {"X-Api-Key": "key-of-b"}


# ---------------------------------------------------------------------------- HTTP helpers


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    address: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
) -> Reply:
    conn = http.client.HTTPConnection(address, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return Reply(response.status, dict(response.getheaders()), response.read())
    finally:
        conn.close()


def multipart(
    files: list[tuple[str, bytes]], fields: dict[str, str] | None = None
) -> tuple[bytes, dict[str, str]]:
    boundary = uuid.uuid4().hex
    out = bytearray()
    for name, value in (fields or {}).items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        out += value.encode() + b"\r\n"
    for file_name, content in files:
        out += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{file_name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        out += content + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), {"Content-Type": f"multipart/form-data; boundary={boundary}"}


@dataclass
class Event:
    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None
    comments: list[str] = field(default_factory=list)

    def json(self) -> Any:
        return json.loads(self.data)


class EventStream:
    """A raw SSE reader: one HTTP response, parsed event by event as it arrives."""

    def __init__(
        self, address: str, path: str, headers: dict[str, str] | None = None, timeout: float = 60
    ) -> None:
        self.conn = http.client.HTTPConnection(address, timeout=timeout)
        self.conn.request("GET", path, headers={"Accept": "text/event-stream", **(headers or {})})
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.comments: list[str] = []
        self.retry: int | None = None

    def __iter__(self) -> Iterator[Event]:
        event = Event()
        while line := self.response.readline():
            text = line.decode().rstrip("\r\n")
            if not text:
                if event.data or event.id is not None or event.event != "message":
                    yield event
                event = Event()
                continue
            name, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "":
                self.comments.append(value)
            elif name == "retry":
                self.retry = int(value)
            elif name == "id":
                event.id = value
            elif name == "event":
                event.event = value
            elif name == "data":
                event.data += value

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_all(stream: EventStream) -> list[Event]:
    events = list(stream)
    assert events and events[-1].event == "end", ([e.event for e in events], stream.comments)
    return events


def records(events: list[Event]) -> list[dict[str, Any]]:
    return [e.json() for e in events if e.event in ("job", "batch")]


def assert_increasing(events: list[Event]) -> list[int]:
    ids = [int(e.id) for e in events if e.id is not None]
    assert ids == sorted(set(ids)), ids
    for event in events:
        if event.id is not None:
            assert int(event.json()["version"]) == int(event.id)
    return ids


def error_of(reply: Reply) -> dict[str, Any]:
    body = reply.json()
    assert set(body) == {"code", "reason", "message", "metadata"}, body
    assert reply.headers["Content-Type"].startswith("application/json")
    return dict(body)


def submit(
    address: str,
    content: bytes,
    name: str,
    query: str = "",
    headers: dict[str, str] | None = None,
) -> Reply:
    return request(address, "POST", f"/v1/jobs?file_name={name}{query}", content, headers)


def wait_done(address: str, job_id: str) -> dict[str, Any]:
    """Follows the job's event stream to its terminal record."""
    with EventStream(address, f"/v1/jobs/{job_id}/events") as stream:
        assert stream.status == 200
        return records(read_all(stream))[-1]


# --------------------------------------------------------------------------------- stacks


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("http"),
        replicas=2,
        gateways=2,
        extra_env={
            "DOCPARSE_PARSE_PAGE_DELAY_MS": str(PAGE_DELAY_MS),
            "DOCPARSE_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT),
        },
    ) as running:
        yield running


@pytest.fixture(scope="module")
def short_lived(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """Records expire 1 s after they end; a page takes 2.5 s, so streams go idle (heartbeats)."""
    with make_stack(
        tmp_path_factory.mktemp("http-short"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_RETENTION_S": "1", "DOCPARSE_PARSE_PAGE_DELAY_MS": "2500"},
    ) as running:
        yield running


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """API keys required (two tenants), and parser_svc ends every connection 1 s after it
    opened (max_connection_age, docs/operations.md), so any watch longer than that is cut under the
    gateway."""
    with make_stack(
        tmp_path_factory.mktemp("http-guarded"),
        replicas=1,
        gateways=1,
        extra_env={
            **auth_env(KEYS, TOKEN),
            "DOCPARSE_PARSE_PAGE_DELAY_MS": str(PAGE_DELAY_MS),
            "DOCPARSE_MAX_CONNECTION_AGE_MS": "1000",
            "DOCPARSE_MAX_CONNECTION_AGE_GRACE_MS": "200",
        },
    ) as running:
        yield running


# ---------------------------------------------------------------------------------- tests


def test_submit_status_result_as_json_and_text(stack: LocalStack) -> None:
    http_a, http_b = stack.http_addresses
    # Raw body with a wait budget: the sync answer, terminal already.
    sync = submit(http_a, make_pdf(2, "sync"), "sync.pdf", "&wait_ms=30000")
    assert sync.status == 200, sync.body
    job = sync.json()
    assert job["state"] == "STATE_SUCCEEDED" and job["file_name"] == "sync.pdf"
    assert job["result"]["page_count"] == 2 and int(job["result"]["char_count"]) > 0
    assert sync.headers["Location"] == f"/v1/jobs/{job['job_id']}"
    served = sync.headers["X-Served-By"].split(", ")
    assert len(served) == 2  # the parser_svc replica, then this gateway

    # Multipart without waiting: the async answer.
    body, headers = multipart([("async.pdf", make_pdf(3, "async"))])
    accepted = request(http_a, "POST", "/v1/jobs", body, headers)
    assert accepted.status == 202, accepted.body
    queued = accepted.json()
    assert queued["state"] in ("STATE_QUEUED", "STATE_RUNNING")
    assert queued["progress"]["done"] == 0  # defaults are present, not omitted

    # Any gateway answers for any job.
    final = wait_done(http_b, queued["job_id"])
    assert final["state"] == "STATE_SUCCEEDED"
    status = request(http_b, "GET", f"/v1/jobs/{queued['job_id']}")
    assert status.status == 200 and status.json() == final

    package = request(http_a, "GET", f"/v1/jobs/{queued['job_id']}/result")
    assert package.status == 200
    assert package.headers["ETag"] == f'"{final["result"]["sha256"]}"'
    pages = package.json()["pages"]
    assert [p["number"] for p in pages] == [1, 2, 3]
    assert "async 1 of 3" in pages[0]["text"]

    text = request(http_b, "GET", f"/v1/jobs/{queued['job_id']}/result?format=text")
    assert text.status == 200 and text.headers["Content-Type"].startswith("text/plain")
    # "async N of 3" atop every page is a page number line: page furniture (role "header" in
    # the JSON) is left out of text unless asked for with furniture=true.
    furniture = {b["text"] for p in pages for b in p["blocks"] if b["role"] in ("header", "footer")}
    assert ("async 2 of 3" in text.body.decode()) == ("async 2 of 3" not in furniture)
    kept = request(http_b, "GET", f"/v1/jobs/{queued['job_id']}/result?format=text&furniture=true")
    assert "async 2 of 3" in kept.body.decode()
    markdown = request(http_b, "GET", f"/v1/jobs/{queued['job_id']}/result?format=markdown")
    assert "<!-- page 3 -->" in markdown.body.decode()  # page breaks are comments
    html = request(http_b, "GET", f"/v1/jobs/{queued['job_id']}/result?format=html")
    assert html.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "sandbox" in html.headers["Content-Security-Policy"]
    assert '<section data-page="3">' in html.body.decode()
    bad = request(http_b, "GET", f"/v1/jobs/{queued['job_id']}/result?furniture=maybe")
    assert (bad.status, error_of(bad)["reason"]) == (400, "INVALID_FORMAT")


def test_batch_json_and_its_event_stream(stack: LocalStack) -> None:
    http_a, http_b = stack.http_addresses
    files = [
        ("report.pdf", make_pdf(4, "batch")),
        ("letter.docx", fixtures.docx_full()),
        ("numbers.xlsx", fixtures.xlsx_typed()),
    ]
    body, headers = multipart(files, {"request_id": uuid.uuid4().hex})
    created = request(http_a, "POST", "/v1/batches", body, headers)
    assert created.status == 202, created.body
    batch = created.json()
    assert batch["total"] == 3
    assert [j["file_name"] for j in batch["jobs"]] == [name for name, _ in files]
    assert created.headers["Location"] == f"/v1/batches/{batch['batch_id']}"

    with EventStream(http_b, f"/v1/batches/{batch['batch_id']}/events") as stream:
        assert stream.status == 200
        assert stream.response.getheader("Content-Type").startswith("text/event-stream")
        events = read_all(stream)
        assert stream.retry is not None and stream.retry > 0
    assert_increasing(events)
    final = records(events)[-1]
    assert (final["completed"], final["succeeded"]) == (3, 3)
    assert {j["state"] for j in final["jobs"]} == {"STATE_SUCCEEDED"}

    again = request(http_a, "GET", f"/v1/batches/{batch['batch_id']}")
    assert again.status == 200 and again.json()["version"] == final["version"]
    # A finished batch, resumed at its last version: 204, which stops an EventSource.
    with EventStream(
        http_a, f"/v1/batches/{batch['batch_id']}/events", {"Last-Event-ID": final["version"]}
    ) as stream:
        assert stream.status == 204


def test_job_events_resume_from_last_event_id_on_another_gateway(stack: LocalStack) -> None:
    http_a, http_b = stack.http_addresses
    job = submit(http_a, make_pdf(30, "resume"), "resume.pdf").json()
    path = f"/v1/jobs/{job['job_id']}/events"

    # First connection (gateway A): leave mid-parse, as a browser does on a network blip.
    first: list[Event] = []
    with EventStream(http_a, path) as stream:
        assert stream.status == 200
        for event in stream:
            first.append(event)
            record = event.json()
            if record["state"] == "STATE_RUNNING" and record["progress"]["done"] >= 3:
                break
    last_id = int(first[-1].id or 0)
    assert last_id > 0 and records(first)[-1]["state"] == "STATE_RUNNING"

    # Reconnect on gateway B with Last-Event-ID: only newer versions, through to the end.
    with EventStream(http_b, path, {"Last-Event-ID": str(last_id)}) as stream:
        assert stream.status == 200
        rest = read_all(stream)
    ids = assert_increasing(rest)
    assert ids and min(ids) > last_id
    assert assert_increasing(first + rest)  # together: no version twice, none going back
    done = records(rest)[-1]
    assert done["state"] == "STATE_SUCCEEDED" and done["progress"]["done"] == 30

    # ?after_version= is the same cursor (for clients that cannot set headers).
    with EventStream(http_a, f"{path}?after_version={ids[0]}") as stream:
        tail = read_all(stream)
    assert [int(e.id or 0) for e in tail if e.id] == [ids[-1]]
    # Resuming at the terminal version: nothing more to say, 204 (EventSource stops).
    with EventStream(http_b, path, {"Last-Event-ID": str(ids[-1])}) as stream:
        assert stream.status == 204


def test_cancel_running_job(stack: LocalStack) -> None:
    http_a, http_b = stack.http_addresses
    job = submit(http_a, make_pdf(200, "long"), "long.pdf").json()
    with EventStream(http_b, f"/v1/jobs/{job['job_id']}/events") as stream:
        for event in stream:
            if event.json()["state"] == "STATE_RUNNING":
                too_early = request(http_a, "GET", f"/v1/jobs/{job['job_id']}/result")
                assert too_early.status == 409
                assert error_of(too_early)["reason"] == "RESULT_NOT_READY"
                cancelled = request(http_a, "POST", f"/v1/jobs/{job['job_id']}:cancel")
                assert cancelled.status == 200, cancelled.body
                assert cancelled.json()["state"] == "STATE_CANCELLED"
                break
        rest = read_all(stream)
    assert records(rest)[-1]["state"] == "STATE_CANCELLED"
    again = request(http_b, "POST", f"/v1/jobs/{job['job_id']}:cancel")
    assert again.status == 409
    assert error_of(again) | {"message": ""} == {
        "code": "FAILED_PRECONDITION",
        "reason": "JOB_ALREADY_ENDED",
        "message": "",
        "metadata": {"job_id": job["job_id"], "state": "STATE_CANCELLED"},
    }


def test_errors_map_to_http_statuses_with_the_reason(stack: LocalStack) -> None:
    address = stack.http_addresses[0]
    missing = "0" * 32
    for path in (f"/v1/jobs/{missing}", f"/v1/jobs/{missing}/result", f"/v1/jobs/{missing}/events"):
        reply = request(address, "GET", path)
        assert reply.status == 404, path
        assert error_of(reply)["reason"] == "JOB_NOT_FOUND"
        assert error_of(reply)["metadata"] == {"job_id": missing}
        assert len(reply.headers["X-Served-By"].split(", ")) == 2  # which replica said so
    batch = request(address, "GET", f"/v1/batches/{missing}/events")
    assert (batch.status, error_of(batch)["reason"]) == (404, "BATCH_NOT_FOUND")

    def check(reply: Reply, status: int, code: str, reason: str) -> dict[str, Any]:
        assert reply.status == status, reply.body
        body = error_of(reply)
        assert (body["code"], body["reason"]) == (code, reason), body
        return body

    check(request(address, "GET", "/v1/jobs/bad.id"), 400, "INVALID_ARGUMENT", "INVALID_JOB_ID")
    check(submit(address, b"", "empty.pdf"), 400, "INVALID_ARGUMENT", "EMPTY_CONTENT")
    check(
        submit(address, fixtures.wordperfect(), "x.pdf"),
        400,
        "INVALID_ARGUMENT",
        "UNSUPPORTED_FORMAT",
    )
    big = b"%PDF-1.7\n" + b"0" * UPLOAD_LIMIT
    body = check(submit(address, big, "big.pdf"), 413, "RESOURCE_EXHAUSTED", "DOCUMENT_TOO_LARGE")
    assert body["metadata"]["limit_bytes"] == str(UPLOAD_LIMIT)
    # A batch is all or nothing; the refused file is named.
    upload, headers = multipart([("ok.pdf", make_pdf(1)), ("letter.wpd", fixtures.wordperfect())])
    refused = check(
        request(address, "POST", "/v1/batches", upload, headers),
        400,
        "INVALID_ARGUMENT",
        "UNSUPPORTED_FORMAT",
    )
    assert refused["metadata"]["file_index"] == "1"
    assert refused["metadata"]["file_name"] == "letter.wpd"
    # The gateway's own checks use the same body.
    check(
        request(address, "GET", f"/v1/jobs/{missing}/events", headers={"Last-Event-ID": "x"}),
        400,
        "INVALID_ARGUMENT",
        "INVALID_RESUME_CURSOR",
    )
    check(
        request(address, "POST", "/v1/jobs", b"x", {"Content-Type": "multipart/form-data"}),
        400,
        "INVALID_ARGUMENT",
        "BAD_MULTIPART",
    )
    check(request(address, "GET", "/v1/nothing"), 404, "NOT_FOUND", "NOT_FOUND")
    not_allowed = request(address, "DELETE", f"/v1/jobs/{missing}")
    check(not_allowed, 405, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED")
    assert "GET" in not_allowed.headers["Allow"]


def test_expired_is_410_and_a_silent_store_is_503(short_lived: LocalStack) -> None:
    address = short_lived.http_addresses[0]
    job = submit(address, make_pdf(1, "slow"), "slow.pdf").json()
    with EventStream(address, f"/v1/jobs/{job['job_id']}/events") as stream:
        events = read_all(stream)
        # Pages take 2.5 s and heartbeats come every 2 s: idle moments show as comments.
        assert any(c.startswith("heartbeat ") for c in stream.comments), stream.comments
    final = records(events)[-1]
    assert final["state"] == "STATE_SUCCEEDED"

    # Retention is 1 s here: the record goes, a tombstone says it existed.
    path = f"/v1/jobs/{job['job_id']}"
    gone = eventually(
        lambda: (r := request(address, "GET", path)).status != 200 and r, 30, "the job to expire"
    )
    assert gone.status == 410, gone.body
    body = error_of(gone)
    assert (body["code"], body["reason"]) == ("NOT_FOUND", "JOB_EXPIRED")
    assert int(body["metadata"]["expire_time_ms"]) > 0
    assert request(address, "GET", f"{path}/events").status == 410
    unknown = request(address, "GET", "/v1/jobs/" + "1" * 32)
    assert (unknown.status, error_of(unknown)["reason"]) == (404, "JOB_NOT_FOUND")

    # A Redis that accepts connections and never answers: 503 with Retry-After, never 404.
    redis = short_lived.redis
    assert redis is not None and redis.proc is not None
    redis.proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        down = request(address, "GET", path)
        events_down = request(address, "GET", f"{path}/events")
        elapsed = time.monotonic() - started
    finally:
        redis.proc.send_signal(signal.SIGCONT)
    for reply in (down, events_down):
        assert reply.status == 503, reply.body
        assert int(reply.headers["Retry-After"]) >= 1
        body = error_of(reply)
        assert (body["code"], body["reason"]) == ("UNAVAILABLE", "STATE_STORE_UNAVAILABLE")
    assert elapsed < 10
    assert request(address, "GET", path).status == 410  # and back once Redis answers


def test_http_authenticates_like_grpc(guarded: LocalStack) -> None:
    address = guarded.http_addresses[0]
    missing = request(address, "GET", "/v1/jobs/" + "0" * 32)
    assert (missing.status, error_of(missing)["reason"]) == (401, "API_KEY_MISSING")
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    wrong = request(address, "GET", "/v1/jobs/" + "0" * 32, headers={"X-Api-Key": "nope"})
    assert (wrong.status, error_of(wrong)["reason"]) == (401, "API_KEY_INVALID")
    assert submit(address, make_pdf(1), "anon.pdf").status == 401

    accepted = submit(address, make_pdf(1, "mine"), "mine.pdf", headers=A)
    assert accepted.status == 202, accepted.body
    path = f"/v1/jobs/{accepted.json()['job_id']}"
    # What a browser cannot send as a header (EventSource, links) goes as ?access_token=.
    with EventStream(address, f"{path}/events?access_token=key-of-a") as stream:
        assert stream.status == 200
        assert records(read_all(stream))[-1]["state"] == "STATE_SUCCEEDED"
    mine = request(address, "GET", path, headers=A)
    assert mine.status == 200 and mine.json()["state"] == "STATE_SUCCEEDED"
    # Another tenant cannot even tell the job exists.
    other = request(address, "GET", path, headers=B)
    assert (other.status, error_of(other)["reason"]) == (404, "JOB_NOT_FOUND")
    assert request(address, "GET", f"{path}/events", headers=B).status == 404
    text = request(address, "GET", f"{path}/result?format=text&access_token=key-of-a")
    assert "mine 1 of 1" in text.body.decode()
    # ... for reading only.
    cancel = request(address, "POST", f"{path}:cancel?access_token=key-of-a")
    assert (cancel.status, error_of(cancel)["reason"]) == (401, "API_KEY_MISSING")


def test_gateway_resumes_a_cut_upstream_watch_without_a_gap(guarded: LocalStack) -> None:
    address = guarded.http_addresses[0]
    pages = 60  # 3 s of parsing; every upstream connection lives 1 s
    job = submit(address, make_pdf(pages, "cut"), "cut.pdf", headers=A).json()
    with EventStream(address, f"/v1/jobs/{job['job_id']}/events", A) as stream:
        assert stream.status == 200
        events = read_all(stream)  # one HTTP response from start to end
        resumed = [c for c in stream.comments if "resuming after version" in c]
    assert resumed, stream.comments  # the gateway did reopen the watch upstream
    ids = assert_increasing(events)
    progress = [r["progress"]["done"] for r in records(events)]
    assert progress == sorted(progress)
    final = records(events)[-1]
    assert final["state"] == "STATE_SUCCEEDED" and final["progress"]["done"] == pages
    assert ids[-1] == int(final["version"])
