"""Result renders share the gateway's render workers fairly between tenants
(gateway/http/render_queue.py): one big-result worker here, tenant A asks for three JSON renders
of a big workbook, and tenant B for its own big one: B's render, queued behind A's, is served
before A's render that was already waiting; A's fourth at once is refused with 429
TOO_MANY_RENDERS and Retry-After. B's one-page result goes to the small-result lane and is
answered while A's big renders still wait. The order is read from the gateway's own metrics
(renders running and queued per tenant) and the order answers begin, never from wall time."""

from __future__ import annotations

import http.client
import json
import re
import threading
import urllib.request
from collections.abc import Iterator
from functools import partial

import pytest

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.tenancy import key_digest
from tests.conftest import auth_env, make_stack
from tests.fixtures import big_xlsx
from tests.gateway.test_http import Reply, request
from tests.helpers import eventually, make_pdf, stub

TOKEN = "internal-secret-for-render-fairness"
KEYS: dict[str, object] = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
    ]
}
HTTP = {"a": {"X-Api-Key": "key-of-a"}, "b": {"X-Api-Key": "key-of-b"}}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    env = {
        **auth_env(KEYS, TOKEN),
        "DOCPARSE_GATEWAY_HTTP_RENDER_WORKERS": "1",
        "DOCPARSE_GATEWAY_HTTP_RENDER_PER_TENANT": "3",
    }
    with make_stack(
        tmp_path_factory.mktemp("render-fair"), replicas=1, gateways=1, extra_env=env
    ) as running:
        yield running


def parsed(stack: LocalStack, who: str, name: str, content: bytes) -> str:
    channel, s = stub(stack.gateway_addresses[0])
    metadata = (("x-api-key", f"key-of-{who}"),)
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name=name, content=content),
            metadata=metadata,
            timeout=60,
        ).job
        last = job
        watch = parser_service_pb2.WatchJobRequest(job_id=job.job_id)
        for event in s.WatchJob(watch, metadata=metadata, timeout=300):
            if event.HasField("job"):
                last = event.job
    assert last.state == job_pb2.STATE_SUCCEEDED, last
    return str(job.job_id)


def gauge(stack: LocalStack, name: str) -> dict[str, float]:
    """The gateway's gauge `docparse_gateway_renders_<name>`, per tenant."""
    url = f"http://{stack.gateways[0].metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=5) as reply:
        body = reply.read().decode()
    pattern = rf'^docparse_gateway_renders_{name}\{{tenant="([^"]+)"\}} (\S+)$'
    return {tenant: float(value) for tenant, value in re.findall(pattern, body, re.M)}


def queued(stack: LocalStack) -> dict[str, float]:
    return gauge(stack, "queued")


def a_waiting(stack: LocalStack, count: int) -> bool:
    return queued(stack).get("tenant-a", 0) >= count


@pytest.fixture(scope="module")
def jobs(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A's and B's big workbooks (results of MBs: the big lane) and B's one-page PDF (kB)."""
    path = tmp_path_factory.mktemp("render-fair-docs") / "big.xlsx"
    workbook = big_xlsx(path, rows=20_000, cols=10).read_bytes()
    return {
        "a": parsed(stack, "a", "big.xlsx", workbook),
        "b_big": parsed(stack, "b", "big.xlsx", workbook),
        "b_small": parsed(stack, "b", "one.pdf", make_pdf(1, "tenant b")),
    }


class Gets:
    """Result requests in threads; `done` gets a name when its answer's headers arrive: the
    gateway sends them as soon as the render is done (the order renders got a worker)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.done: list[str] = []
        self.replies: dict[str, Reply] = {}
        self.threads: list[threading.Thread] = []

    def start(self, who: str, name: str, job_id: str) -> None:
        thread = threading.Thread(target=self._get, args=(who, name, job_id))
        thread.start()
        self.threads.append(thread)

    def _get(self, who: str, name: str, job_id: str) -> None:
        conn = http.client.HTTPConnection(self.address, timeout=300)
        try:
            conn.request("GET", f"/v1/jobs/{job_id}/result", headers=HTTP[who])
            response = conn.getresponse()
            self.done.append(name)
            body = response.read()
            self.replies[name] = Reply(response.status, dict(response.getheaders()), body)
        finally:
            conn.close()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=300)
        statuses = {name: reply.status for name, reply in self.replies.items()}
        assert set(statuses.values()) == {200}, statuses

    def a_renders_three(self, stack: LocalStack, job_a: str) -> None:
        """A's three renders: one running, then the others waiting in A's line, in order."""
        for i in range(3):
            self.start("a", f"a{i}", job_a)
            if i == 0:
                eventually(lambda: gauge(stack, "running").get("tenant-a") == 1, what="A running")
            else:
                eventually(partial(a_waiting, stack, i), what=f"A's render {i} waiting")


def test_b_render_goes_before_a_waiting_renders(stack: LocalStack, jobs: dict[str, str]) -> None:
    address = stack.http_addresses[0]
    job_a, job_b = jobs["a"], jobs["b_big"]
    gets = Gets(address)
    gets.a_renders_three(stack, job_a)
    done, replies = gets.done, gets.replies
    over = request(address, "GET", f"/v1/jobs/{job_a}/result", headers=HTTP["a"])
    assert over.status == 429, over.body
    assert over.json()["reason"] == "TOO_MANY_RENDERS" and over.headers["Retry-After"] == "1"
    gets.start("b", "b", job_b)

    def b_queued() -> dict[str, float] | None:
        now = queued(stack)
        return now if now.get("tenant-b") == 1 else None

    seen = eventually(b_queued, what="B's render waiting")
    assert seen.get("tenant-a", 0) >= 1, "A's renders ended before B queued: make them bigger"
    # B's proto result needs no render worker and is never queued
    proto = request(address, "GET", f"/v1/jobs/{job_b}/result?format=proto", headers=HTTP["b"])
    assert proto.status == 200
    gets.join()
    # B's render got the first worker free after it queued, ahead of A's waiting ones
    assert done.index("b") < done.index("a2"), done
    assert json.loads(replies["b"].body)["sheets"][0]["name"] == "Big"
    assert queued(stack) == {"tenant-a": 0.0, "tenant-b": 0.0}


def test_b_one_page_result_does_not_wait_for_a_big_renders(
    stack: LocalStack, jobs: dict[str, str]
) -> None:
    """Small results have a lane and a worker of their own: B's one-page result is answered
    while A's big renders still run and wait."""
    gets = Gets(stack.http_addresses[0])
    gets.a_renders_three(stack, jobs["a"])
    small = request(
        stack.http_addresses[0], "GET", f"/v1/jobs/{jobs['b_small']}/result", headers=HTTP["b"]
    )
    assert small.status == 200 and small.json()["pages"][0]["number"] == 1
    assert queued(stack).get("tenant-a", 0) >= 1 and not gets.done  # A's still waiting
    gets.join()
