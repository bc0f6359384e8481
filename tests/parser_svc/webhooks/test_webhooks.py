"""Signed webhooks (SubmitJobRequest.callback): at least once, Standard Webhooks signatures,
backoff and dead letters, SSRF-safe egress.

A real stack (2 replicas, 1 gateway) and a real HTTP receiver on 127.0.0.7, the only address
the stack's allow-list names: 127.0.0.1 and every other private address stay refused."""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from standardwebhooks.webhooks import Webhook

from docparse.client import Client
from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.v1.parser_service_pb2 import Callback
from parser_svc.settings import Settings
from parser_svc.state.lua_scripts import CREATE_JOB
from parser_svc.state.store import JobStore, connect
from parser_svc.webhooks.outbox import Hook, Outbox
from tests.conftest import make_stack
from tests.faultproxy import FaultProxy
from tests.helpers import eventually, make_pdf, stub, wait_terminal

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
RECEIVER_HOST = "127.0.0.7"
MAX_ATTEMPTS = 5


class Receiver(http.server.ThreadingHTTPServer):
    """Answers its first requests with `statuses` (a 3xx with `Location: <location>`), then
    200. Records every request and accepts (processes) each webhook-id once, after verifying
    its signature."""

    def __init__(
        self, statuses: tuple[int, ...] = (), location: str = "", secret: str = SECRET
    ) -> None:
        self.statuses = statuses
        self.location = location
        self.secret = secret
        self.requests: list[tuple[dict[str, str], bytes, int]] = []
        self.accepted: dict[str, Any] = {}
        self.lock = threading.Lock()
        super().__init__((RECEIVER_HOST, 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{RECEIVER_HOST}:{self.server_address[1]}/hooks/docparse"


class Handler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {k.lower(): v for k, v in self.headers.items()}
        receiver = self.server
        with receiver.lock:
            seen = len(receiver.requests)
            status = receiver.statuses[seen] if seen < len(receiver.statuses) else 200
            receiver.requests.append((headers, body, status))
            if status == 200 and headers["webhook-id"] not in receiver.accepted:
                event = Webhook(receiver.secret).verify(body, headers)  # raises if it is off
                receiver.accepted[headers["webhook-id"]] = event
        self.send_response(status)
        if 300 <= status < 400:
            self.send_header("location", receiver.location)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def webhook_env(root: Path, recheck_s: float) -> dict[str, str]:
    """Webhooks on, the receiver's address allowed, small timers. `recheck_s`: how soon the
    dispatcher looks again at a job that had not ended (the floor under the pub/sub wake)."""
    secrets = root / "webhook-secrets.json"
    secrets.write_text(json.dumps({"default": {"main": SECRET, "other": OTHER_SECRET}}))
    return {
        "DOCPARSE_WEBHOOK_SECRETS_FILE": str(secrets),
        "DOCPARSE_WEBHOOK_ALLOW_CIDRS": f"{RECEIVER_HOST}/32",
        "DOCPARSE_WEBHOOK_POLL_S": "0.1",
        "DOCPARSE_WEBHOOK_RECHECK_S": str(recheck_s),
        "DOCPARSE_WEBHOOK_BACKOFF_MS": "200",
        "DOCPARSE_WEBHOOK_BACKOFF_MAX_S": "1",
        "DOCPARSE_WEBHOOK_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
        "DOCPARSE_WEBHOOK_TIMEOUT_S": "3",
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    root = tmp_path_factory.mktemp("webhooks")
    # Ten minutes between rechecks: every first attempt below comes from the wake-up that the
    # job's terminal event gives (the tests wait at most a minute for anything).
    env = webhook_env(root, recheck_s=600)
    s = make_stack(root / "stack", replicas=2, gateways=1, extra_env=env)
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def store(stack: LocalStack) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    yield client
    client.close()


def submit(
    stack: LocalStack,
    url: str,
    secret_name: str = "main",
    request_id: str = "",
    content: bytes = b"",
) -> job_pb2.Job:
    channel, s = stub(stack.parser_addresses[0])
    with channel:
        return s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name="memo.pdf",
                content=content or make_pdf(1, "webhook"),
                request_id=request_id,
                callback=parser_service_pb2.Callback(url=url, secret_name=secret_name),
            ),
            timeout=30,
        ).job


def refusal(stack: LocalStack, url: str, secret_name: str = "main") -> DocparseError:
    try:
        submit(stack, url, secret_name)
    except grpc.RpcError as err:
        return DocparseError.from_rpc_error(err)
    raise AssertionError(f"a callback to {url} was accepted")


def deliveries(stack: LocalStack) -> dict[str, float]:
    """docparse_webhook_deliveries_total by outcome, summed over the replicas' endpoints."""
    total: dict[str, float] = {}
    for child in stack.parsers:
        url = f"http://{child.metrics_address}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            text = reply.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "docparse_webhook_deliveries_total":
                    outcome = sample.labels["outcome"]
                    total[outcome] = total.get(outcome, 0.0) + sample.value
    return total


def delivery_of(store: redis.Redis, job_id: str) -> dict[str, str]:
    keys = list(store.scan_iter(f"docparse:test:webhook:{job_id}.*"))
    assert len(keys) == 1, keys
    return store.hgetall(keys[0])  # type: ignore[return-value]


def ended_delivery(store: redis.Redis, job_id: str, outcome: str) -> dict[str, str]:
    """The job's delivery record once it ended with `outcome` (delivered or dead)."""

    def ended() -> dict[str, str] | None:
        record = delivery_of(store, job_id)
        return record if record.get("outcome") == outcome else None

    return eventually(ended, timeout=60, what=f"the delivery of {job_id} to end {outcome}")


def test_receiver_down_three_times_gets_one_signed_delivery(
    stack: LocalStack, store: redis.Redis
) -> None:
    receiver = Receiver(statuses=(503, 503, 503))
    before = deliveries(stack)
    try:
        job = submit(stack, receiver.url)
        ended = wait_terminal(stack.parser_addresses[1], job.job_id)
        assert ended.state == job_pb2.STATE_SUCCEEDED
        eventually(lambda: receiver.accepted, timeout=60, what="an accepted delivery")
        record = ended_delivery(store, job.job_id, "delivered")
    finally:
        receiver.shutdown()
        receiver.server_close()
    # Four attempts (503, 503, 503, 200), one id: the receiver processed the job once.
    assert [status for _, _, status in receiver.requests] == [503, 503, 503, 200]
    ids = {headers["webhook-id"] for headers, _, _ in receiver.requests}
    assert ids == {f"msg_{job.job_id}_succeeded"}
    assert list(receiver.accepted) == [f"msg_{job.job_id}_succeeded"]
    event = receiver.accepted[f"msg_{job.job_id}_succeeded"]
    assert event["type"] == "job.succeeded"
    data = event["data"]
    assert isinstance(data, dict)
    assert data["job_id"] == job.job_id and data["state"] == "STATE_SUCCEEDED"
    assert data["version"] == str(ended.version)
    # Every attempt was signed anew (its own timestamp) and verifies.
    for headers, body, _ in receiver.requests:
        Webhook(SECRET).verify(body, headers)
    assert record["attempts"] == "4"
    assert not [m for m in store.zrange("docparse:test:webhooks:due", 0, -1) if job.job_id in m]

    def counted() -> dict[str, float] | None:
        after = deliveries(stack)
        delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
        return delta if delta.get("delivered") == 1 else None

    delta = eventually(counted, what="the metric to count the delivery")
    assert delta == {"delivered": 1, "failed": 3, "dead_lettered": 0}


def test_receiver_down_for_good_ends_in_the_dead_letter_set(
    stack: LocalStack, store: redis.Redis
) -> None:
    with socket.socket() as sock:  # a port nobody listens on: every connect is refused
        sock.bind((RECEIVER_HOST, 0))
        port = sock.getsockname()[1]
    before = deliveries(stack)
    with Client(stack.gateway_addresses[0]) as client:  # the SDK, through the gateway
        callback = Callback(url=f"http://{RECEIVER_HOST}:{port}/gone", secret_name="main")
        job = client.submit("memo.pdf", make_pdf(1), callback=callback).job
        assert client.wait(job).state == job_pb2.STATE_SUCCEEDED
    record = ended_delivery(store, job.job_id, "dead")
    dead: list[str] = store.zrange("docparse:test:webhooks:dead", 0, -1)  # type: ignore[assignment]
    assert [m for m in dead if m.startswith(job.job_id)], dead
    assert record["attempts"] == str(MAX_ATTEMPTS)
    assert "connect" in record["last_error"].lower(), record["last_error"]

    def counted() -> dict[str, float] | None:
        after = deliveries(stack)
        delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
        return delta if delta.get("dead_lettered") == 1 else None

    delta = eventually(counted, what="the metric to count the dead letter")
    assert delta == {"delivered": 0, "failed": MAX_ATTEMPTS - 1, "dead_lettered": 1}


def due_entries(store: redis.Redis, job_id: str) -> list[str]:
    due: list[str] = store.zrange("docparse:test:webhooks:due", 0, -1)  # type: ignore[assignment]
    return [member for member in due if member.startswith(job_id)]


def test_a_repeated_submit_adds_its_callback_once(stack: LocalStack, store: redis.Redis) -> None:
    """Re-runs of a submit (same request_id: a lost reply) answer with the first job; each
    callback they name is delivered once, and one that was delivered is not added again."""
    first, second = Receiver(), Receiver()
    request_id = f"webhooks-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        pdf = make_pdf(1, "repeated")
        jobs = [submit(stack, r.url, "main", request_id, pdf) for r in (first, second, first)]
        job_id = jobs[0].job_id
        assert {job.job_id for job in jobs} == {job_id}
        for receiver in (first, second):
            eventually(lambda r=receiver: r.accepted, timeout=60, what="both deliveries")  # type: ignore[misc]
        eventually(lambda: not due_entries(store, job_id), what="both deliveries to end")
        assert submit(stack, first.url, "main", request_id, pdf).job_id == job_id
        assert due_entries(store, job_id) == []  # delivered already: not added again
    finally:
        for server in (first, second):
            server.shutdown()
            server.server_close()
    msg_id = f"msg_{job_id}_succeeded"
    for receiver in (first, second):
        assert [headers["webhook-id"] for headers, _, _ in receiver.requests] == [msg_id]


def test_a_redirect_is_not_followed(stack: LocalStack, store: redis.Redis) -> None:
    trap = Receiver()  # an allowed address: following the redirect would reach it
    receiver = Receiver(statuses=(307,), location=trap.url)
    try:
        job = submit(stack, receiver.url)
        record = ended_delivery(store, job.job_id, "delivered")
    finally:
        for server in (receiver, trap):
            server.shutdown()
            server.server_close()
    assert [status for _, _, status in receiver.requests] == [307, 200]
    assert trap.requests == []
    assert record["attempts"] == "2"


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/hook",
        "http://127.0.0.1:8080/hook",  # loopback, but not the allow-listed 127.0.0.7
        "http://169.254.169.254/latest/meta-data",  # cloud metadata (link-local)
        "http://[::1]/hook",
        "http://[::ffff:10.0.0.1]/hook",  # IPv4-mapped IPv6
        "http://[::a00:1]/hook",  # IPv4-compatible IPv6 (deprecated): 10.0.0.1
        "http://[::ffff:0:a00:1]/hook",  # IPv4-translated (SIIT)
        "http://[64:ff9b:1::a00:1]/hook",  # local-use NAT64
        "http://[fec0::1]/hook",  # site-local (deprecated)
        "http://224.0.0.1/hook",  # multicast
        "http://localhost/hook",  # a name: resolved, and every address checked
    ],
)
def test_callback_to_a_private_address_is_refused_at_submit(stack: LocalStack, url: str) -> None:
    err = refusal(stack, url)
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT, err
    assert err.reason == "CALLBACK_NOT_ALLOWED", err


def test_a_refused_name_reveals_neither_whether_it_resolves_nor_to_what(
    stack: LocalStack,
) -> None:
    """A name that does not resolve and a name that resolves to a private address get the
    same answer: submits cannot map the deployment's internal names."""
    missing = refusal(stack, "http://no-such-host.invalid/hook")
    private = refusal(stack, "http://localhost/hook")
    assert missing.reason == private.reason == "CALLBACK_NOT_ALLOWED"
    assert missing.message.replace("no-such-host.invalid", "H") == private.message.replace(
        "localhost", "H"
    )
    assert "127.0.0.1" not in private.message and "::1" not in private.message


@pytest.mark.parametrize(
    ("url", "secret_name", "reason"),
    [
        (f"http://{RECEIVER_HOST}/hook", "nope", "CALLBACK_SECRET_UNKNOWN"),
        (f"http://{RECEIVER_HOST}/hook", "", "CALLBACK_INVALID"),
        ("ftp://example.com/hook", "main", "CALLBACK_INVALID"),
        (f"http://user:pw@{RECEIVER_HOST}/hook", "main", "CALLBACK_INVALID"),
        ("http://" + "a" * 2100 + ".com/", "main", "CALLBACK_INVALID"),
        ("http://2130706433/hook", "main", "CALLBACK_INVALID"),  # 127.0.0.1 as one number
        ("http://0x7f.1/hook", "main", "CALLBACK_INVALID"),
        ("http://127.1/hook", "main", "CALLBACK_INVALID"),
    ],
)
def test_bad_callbacks_are_refused_at_submit(
    stack: LocalStack, url: str, secret_name: str, reason: str
) -> None:
    err = refusal(stack, url, secret_name)
    assert (err.code, err.reason) == (grpc.StatusCode.INVALID_ARGUMENT, reason), err


def test_http_submit_takes_the_callback_fields(stack: LocalStack) -> None:
    query = urllib.parse.urlencode(
        {"file_name": "memo.pdf", "callback_url": "http://10.0.0.1/x", "callback_secret": "main"}
    )
    request = urllib.request.Request(
        f"http://{stack.http_addresses[0]}/v1/jobs?{query}",
        data=make_pdf(1),
        method="POST",
        headers={"content-type": "application/pdf"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 400
    body = json.loads(caught.value.read())
    assert (body["code"], body["reason"]) == ("INVALID_ARGUMENT", "CALLBACK_NOT_ALLOWED")

    # As multipart form fields, as the upload page and curl -F send them.
    receiver = Receiver()
    boundary = uuid.uuid4().hex
    parts = [
        ("callback_url", receiver.url, b""),
        ("callback_secret", "main", b""),
        ("file", "memo.pdf", make_pdf(1, "multipart")),
    ]
    body_parts = []
    for name, value, content in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{value}"' if content else "")
        body_parts.append(
            f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
            + (content or value.encode())
            + b"\r\n"
        )
    request = urllib.request.Request(
        f"http://{stack.http_addresses[0]}/v1/jobs",
        data=b"".join(body_parts) + f"--{boundary}--\r\n".encode(),
        method="POST",
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            job_id = json.loads(reply.read())["job_id"]
        eventually(lambda: receiver.accepted, timeout=60, what="the HTTP job's webhook")
    finally:
        receiver.shutdown()
        receiver.server_close()
    assert list(receiver.accepted) == [f"msg_{job_id}_succeeded"]


@pytest.mark.stack  # starts a stack in its body
def test_a_stack_with_an_unreadable_secrets_file_does_not_start(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.json"
    secrets.write_text('{"default": {"main": "not-a-whsec-secret"}}')
    s = make_stack(
        tmp_path / "stack",
        replicas=1,
        gateways=0,
        extra_env={"DOCPARSE_WEBHOOK_SECRETS_FILE": str(secrets)},
    )
    with pytest.raises(DocparseError) as caught:
        s.start(timeout=30)
    # The replica exited 2 naming the reason and the file (the stack relays its error line).
    assert caught.value.reason == "WEBHOOK_CONFIG_INVALID", caught.value
    assert str(secrets) in caught.value.message and "whsec_" in caught.value.message


def test_a_create_whose_reply_came_too_late_still_calls_back(
    tmp_path: Path, isolated_proxy: FaultProxy
) -> None:
    """The create ran but its reply came after the replica gave up: the submit failed
    UNAVAILABLE and the caller never retried. The delivery was written before the create, so
    the job (queued by the sweeper) still calls back, once."""
    env = {
        **webhook_env(tmp_path, recheck_s=0.2),
        "DOCPARSE_SWEEP_INTERVAL_S": "0.5",
        "DOCPARSE_SWEEP_ENQUEUE_AFTER_S": "1",
    }
    receiver = Receiver()
    with make_stack(
        tmp_path / "stack", replicas=1, gateways=0, redis_url=isolated_proxy.url, extra_env=env
    ) as proxied:
        # Scripts loaded, so the fault below hits a real run of the create (not NOSCRIPT).
        assert wait_terminal(proxied.parser_addresses[0], submit(proxied, receiver.url).job_id)
        eventually(lambda: receiver.accepted, timeout=60, what="the warm-up job's webhook")
        receiver.accepted.clear()
        fault = isolated_proxy.arm("delay", lambda c: c.script_sha() == CREATE_JOB.sha, delay_s=2.5)
        try:
            with pytest.raises(grpc.RpcError) as failed:
                submit(proxied, receiver.url)
            error = DocparseError.from_rpc_error(failed.value)
            assert (error.code, error.reason) == (
                grpc.StatusCode.UNAVAILABLE,
                "STATE_STORE_UNAVAILABLE",
            )
            assert fault.fired == 1
            event = eventually(
                lambda: next(iter(receiver.accepted.values()), None),
                timeout=60,
                what="the webhook of the job whose create reply was late",
            )
        finally:
            isolated_proxy.calm()
            receiver.shutdown()
            receiver.server_close()
        job_id = event["data"]["job_id"]
        assert event["type"] == "job.succeeded"
        assert wait_terminal(proxied.parser_addresses[0], job_id).state == job_pb2.STATE_SUCCEEDED
        assert [h["webhook-id"] for h, _, _ in receiver.requests].count(
            f"msg_{job_id}_succeeded"
        ) == 1


def test_a_secret_added_to_the_file_is_used_without_a_restart(stack: LocalStack) -> None:
    secrets = Path(stack.parsers[0].env["DOCPARSE_WEBHOOK_SECRETS_FILE"])
    rotated = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    before = secrets.read_text()
    receiver = Receiver(secret=rotated)
    try:
        assert refusal(stack, receiver.url, "rotated").reason == "CALLBACK_SECRET_UNKNOWN"
        tenants = json.loads(before)
        tenants["default"]["rotated"] = rotated
        secrets.write_text(json.dumps(tenants))
        job = submit(stack, receiver.url, "rotated")
        eventually(lambda: receiver.accepted, timeout=60, what="the delivery signed with it")
    finally:
        secrets.write_text(before)
        receiver.shutdown()
        receiver.server_close()
    assert list(receiver.accepted) == [f"msg_{job.job_id}_succeeded"]  # verified with `rotated`


def test_a_delivery_whose_job_was_never_created_is_dropped(
    stack: LocalStack, store: redis.Redis
) -> None:
    """What a replica leaves when it dies between writing a delivery and running the create:
    an entry for a job that never exists. Once older than DOCPARSE_SWEEP_UPLOADS_AFTER_S it is
    dropped, and nothing is sent."""
    receiver = Receiver()
    job_id = uuid.uuid4().hex
    settings = Settings(redis_url=stack.redis_url, env="test")

    async def write() -> str:
        client = connect(settings)
        try:
            outbox = Outbox(settings, JobStore(client, settings))
            return await outbox.add(job_id, "default", Hook(receiver.url, "main"))
        finally:
            await client.aclose()

    delivery = asyncio.run(write())
    key = f"docparse:test:webhook:{delivery}"
    assert store.exists(key)
    # As old as the sweeper's upload limit (600 s), and due again: the next round drops it.
    store.hset(key, "created_ms", str(int(time.time() * 1000) - 601_000))

    def dropped() -> bool:
        store.zadd("docparse:test:webhooks:due", {delivery: 0}, xx=True)
        return not store.exists(key) and not due_entries(store, job_id)

    try:
        eventually(dropped, what="the orphan delivery to be dropped")
    finally:
        receiver.shutdown()
        receiver.server_close()
    assert receiver.requests == []
    assert store.zscore("docparse:test:webhooks:dead", delivery) is None
