"""One tenant's callbacks to a receiver that never answers do not hold another tenant's webhook
(parser_svc/webhooks/slots.py), through a stack with two tenants: tenant A has 20 jobs whose
callbacks go to a black hole (a listener that accepts and never answers; attempts there last
the whole 60 s timeout), tenant B one job calling a receiver that answers. B's webhook arrives
while every one of A's attempts is still open (none has ended), and A never has more than its
cap of 3 on the wire. With lockstep rounds B's delivery waited for a round of A's timeouts."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.tenancy import key_digest
from tests.conftest import auth_env, make_stack
from tests.helpers import eventually, make_pdf, metric, stub
from tests.parser_svc.webhooks.test_webhooks import RECEIVER_HOST, SECRET, Receiver

TOKEN = "internal-secret-for-webhook-fairness"
KEYS: dict[str, object] = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
    ]
}
PER_TENANT = 3
A_JOBS = 20


class BlackHole:
    """Accepts connections on RECEIVER_HOST and never answers; keeps each one open."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind((RECEIVER_HOST, 0))
        self.sock.listen(256)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    @property
    def url(self) -> str:
        return f"http://{RECEIVER_HOST}:{self.sock.getsockname()[1]}/never"

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    root = tmp_path_factory.mktemp("webhook-fair")
    secrets = root / "webhook-secrets.json"
    secrets.write_text(json.dumps({"tenant-a": {"main": SECRET}, "tenant-b": {"main": SECRET}}))
    env = {
        **auth_env(KEYS, TOKEN),
        "DOCPARSE_WEBHOOK_SECRETS_FILE": str(secrets),
        "DOCPARSE_WEBHOOK_ALLOW_CIDRS": f"{RECEIVER_HOST}/32",
        "DOCPARSE_WEBHOOK_POLL_S": "0.1",
        "DOCPARSE_WEBHOOK_TIMEOUT_S": "60",
        "DOCPARSE_WEBHOOK_PER_TENANT": str(PER_TENANT),
    }
    with make_stack(root / "stack", replicas=1, gateways=1, extra_env=env) as running:
        yield running


def submit_and_wait(stack: LocalStack, who: str, url: str, label: str) -> str:
    channel, s = stub(stack.gateway_addresses[0])
    metadata = (("x-api-key", f"key-of-{who}"),)
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name="memo.pdf",
                content=make_pdf(1, label),
                callback=parser_service_pb2.Callback(url=url, secret_name="main"),
            ),
            metadata=metadata,
            timeout=30,
        ).job
        last = job
        watch = parser_service_pb2.WatchJobRequest(job_id=job.job_id)
        for event in s.WatchJob(watch, metadata=metadata, timeout=120):
            if event.HasField("job"):
                last = event.job
    assert last.state == job_pb2.STATE_SUCCEEDED, last
    return str(job.job_id)


def test_b_webhook_is_not_held_by_a_black_hole(stack: LocalStack, tmp_path: Path) -> None:
    hole, receiver = BlackHole(), Receiver()
    try:
        with ThreadPoolExecutor(4) as pool:
            list(
                pool.map(
                    lambda i: submit_and_wait(stack, "a", hole.url, f"a {i}"),
                    range(A_JOBS),
                )
            )
        in_flight = "docparse_webhook_deliveries_in_flight"
        eventually(
            lambda: metric(stack, in_flight).get("tenant=tenant-a") == PER_TENANT,
            what="A's deliveries on the wire, at its cap",
        )
        job_b = submit_and_wait(stack, "b", receiver.url, "b")
        eventually(lambda: receiver.accepted, timeout=45, what="B's webhook")
        # Every one of A's attempts is still open: B did not wait for any of them to end.
        outcomes = metric(stack, "docparse_webhook_deliveries_total")
        assert outcomes.get("outcome=failed") == 0 and outcomes.get("outcome=dead_lettered") == 0
        assert outcomes.get("outcome=delivered") == 1
        assert len(hole.held) == PER_TENANT  # A's cap, never more
        assert list(receiver.accepted) == [f"msg_{job_b}_succeeded"]
        held_back = metric(stack, "docparse_webhook_deliveries_held_back_total")
        assert held_back.get("cap=tenant,tenant=tenant-a", 0) > 0
    finally:
        hole.close()
        receiver.shutdown()
        receiver.server_close()


def test_a_host_that_keeps_timing_out_is_left_alone(tmp_path: Path) -> None:
    """Attempts to the black hole time out (1 s here); after two in a row its circuit opens for
    a minute: A's other deliveries wait in the outbox (no slot, no attempt counted) and the
    black hole sees no new connection, while B's webhook still goes out."""
    secrets = tmp_path / "webhook-secrets.json"
    secrets.write_text(json.dumps({"tenant-a": {"main": SECRET}, "tenant-b": {"main": SECRET}}))
    env = {
        **auth_env(KEYS, TOKEN),
        "DOCPARSE_WEBHOOK_SECRETS_FILE": str(secrets),
        "DOCPARSE_WEBHOOK_ALLOW_CIDRS": f"{RECEIVER_HOST}/32",
        "DOCPARSE_WEBHOOK_POLL_S": "0.1",
        "DOCPARSE_WEBHOOK_TIMEOUT_S": "1",
        "DOCPARSE_WEBHOOK_PER_TENANT": str(PER_TENANT),
        "DOCPARSE_WEBHOOK_CIRCUIT_AFTER": "2",
        "DOCPARSE_WEBHOOK_CIRCUIT_OPEN_S": "60",
    }
    hole, receiver = BlackHole(), Receiver()
    try:
        with make_stack(tmp_path / "stack", replicas=1, gateways=1, extra_env=env) as stack:
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda i: submit_and_wait(stack, "a", hole.url, f"a {i}"), range(8)))
            held_back = "docparse_webhook_deliveries_held_back_total"
            eventually(
                lambda: metric(stack, held_back).get("cap=circuit,tenant=tenant-a", 0) > 0,
                what="A's deliveries held back by the open circuit",
            )
            eventually(
                lambda: (
                    metric(stack, "docparse_webhook_deliveries_in_flight").get("tenant=tenant-a")
                    == 0
                ),
                what="A's last attempts to end",
            )
            tried = len(hole.held)
            assert tried <= PER_TENANT + 2, tried  # then the circuit opened
            failed = metric(stack, "docparse_webhook_deliveries_total")["outcome=failed"]
            assert failed == tried  # only attempts that went out count
            job_b = submit_and_wait(stack, "b", receiver.url, "b")
            eventually(lambda: receiver.accepted, timeout=30, what="B's webhook")
            assert list(receiver.accepted) == [f"msg_{job_b}_succeeded"]
            assert len(hole.held) == tried  # nothing more went to the black hole meanwhile
    finally:
        hole.close()
        receiver.shutdown()
        receiver.server_close()
