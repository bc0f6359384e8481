"""Hostile load at the edges (issue #11): open streams per tenant, big renders on the gateway's
loop, malformed parameters. Measured as another tenant sees it: its calls' latency through the
same gateway while one tenant does its worst."""

from __future__ import annotations

import asyncio
import json
import statistics
import threading
import time
import urllib.request
from collections.abc import Iterator

import aiohttp
import grpc
import pytest

from docparse.errors import DocparseError
from docparse.stack import LocalStack
from docparse.tenancy import key_digest
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from tests import fixtures
from tests.conftest import auth_env, make_stack
from tests.helpers import eventually, make_pdf, stub
from tests.test_hostile import finished

TOKEN = "internal-secret-for-hostile-http-tests"
A, B, C = (("x-api-key", "key-of-a"),), (("x-api-key", "key-of-b"),), (("x-api-key", "key-c"),)
KEYS = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
        {"sha256": key_digest("key-c"), "tenant": "tenant-c", "max_streams": 3},
    ]
}
REPLICA_STREAMS, GATEWAY_STREAMS = 150, 50


@pytest.fixture(scope="module")
def api_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """One replica that serves the API but parses nothing (jobs stay QUEUED: streams on them
    stay open), one gateway."""
    with make_stack(
        tmp_path_factory.mktemp("streams"),
        replicas=1,
        gateways=1,
        extra_env={
            **auth_env(KEYS, TOKEN),
            "DOCPARSE_ROLE": "api",
            "DOCPARSE_MAX_STREAMS_PER_TENANT": str(REPLICA_STREAMS),
            "DOCPARSE_GATEWAY_HTTP_MAX_EVENT_STREAMS_PER_TENANT": str(GATEWAY_STREAMS),
        },
    ) as running:
        yield running


def queued_job(stack: LocalStack, metadata: tuple[tuple[str, str], ...]) -> str:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        request = parser_service_pb2.SubmitJobRequest(file_name="a.pdf", content=make_pdf(1))
        return str(s.SubmitJob(request, metadata=metadata, timeout=30).job.job_id)


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] if len(samples) > 1 else samples[0]


class Poller:
    """Another tenant's GetStatus calls through the gateway, in a thread, timed."""

    def __init__(self, stack: LocalStack, job_id: str, metadata: tuple[tuple[str, str], ...]):
        self.channel, self.stub = stub(stack.gateway_addresses[0])
        self.request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        self.metadata = metadata
        self.latencies: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            self.stub.GetStatus(self.request, metadata=self.metadata, timeout=30)
            self.latencies.append(time.perf_counter() - started)
            self.stop.wait(0.01)

    def __enter__(self) -> Poller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.channel.close()

    def summary(self) -> str:
        ms = [x * 1000 for x in self.latencies]
        median, tail, worst = statistics.median(ms), p99(ms), max(ms)
        return f"{len(ms)} calls, p50 {median:.1f} ms, p99 {tail:.1f} ms, max {worst:.1f} ms"


async def _open_watch(
    s: parser_service_pb2_grpc.ParserServiceStub, job_id: str, metadata: tuple[tuple[str, str], ...]
) -> grpc.aio.UnaryStreamCall[
    parser_service_pb2.WatchJobRequest, parser_service_pb2.WatchJobResponse
]:
    call = s.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job_id), metadata=metadata)
    first = await call.read()  # the snapshot: the stream is open and counted
    assert first is not grpc.aio.EOF and first.job.state == job_pb2.STATE_QUEUED
    return call


async def _refused_watch(
    s: parser_service_pb2_grpc.ParserServiceStub, job_id: str, metadata: tuple[tuple[str, str], ...]
) -> DocparseError:
    call = s.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job_id), metadata=metadata)
    try:
        await call.read()
    except grpc.aio.AioRpcError as err:
        return DocparseError.from_rpc_error(err)
    raise AssertionError("a watch stream over the tenant's limit was opened")


async def _open_sse(session: aiohttp.ClientSession, url: str, key: str) -> aiohttp.ClientResponse:
    response = await session.get(url, headers={"X-Api-Key": key})
    assert response.status == 200, await response.text()
    assert (await response.content.readline()).startswith(b"retry:")
    return response


def test_a_tenant_over_its_stream_limit_is_refused_and_others_do_not_wait(
    api_only: LocalStack,
) -> None:
    """Tenant A opens every event stream the gateway allows it (50, each also a watch on the
    replica) and every watch stream the replica allows it (150 in all), then keeps knocking:
    each further one is refused before it costs anything (RESOURCE_EXHAUSTED / 429
    TOO_MANY_STREAMS with the limit), B's GetStatus calls through the same gateway stay fast,
    and once A lets go it may open streams again. Before: unlimited; another tenant saw a 21 s
    stall under 500 watch streams and 200 SSE connections."""
    job_a, job_b = queued_job(api_only, A), queued_job(api_only, B)
    gateway = api_only.gateway_addresses[0]
    http = api_only.http_addresses[0]
    sse_url = f"http://{http}/v1/jobs/{job_a}/events"

    async def saturate() -> tuple[DocparseError, int, str, str, int]:
        channel = grpc.aio.insecure_channel(gateway)
        s = parser_service_pb2_grpc.ParserServiceStub(channel)
        timeout = aiohttp.ClientTimeout(total=120)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            events = await asyncio.gather(
                *(_open_sse(session, sse_url, "key-of-a") for _ in range(GATEWAY_STREAMS))
            )
            watches = await asyncio.gather(
                *(_open_watch(s, job_a, A) for _ in range(REPLICA_STREAMS - GATEWAY_STREAMS))
            )
            refused = await _refused_watch(s, job_a, A)
            async with session.get(sse_url, headers={"X-Api-Key": "key-of-a"}) as over:
                body = await over.json()
                sse_status, sse_reason = over.status, body["reason"]
                retry_after = int(over.headers["Retry-After"])
            # A keeps knocking for a while (its maximum load) while B polls.
            knocks = 0
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                await asyncio.gather(*(_refused_watch(s, job_a, A) for _ in range(20)))
                knocks += 20
            for call in watches:
                call.cancel()
            for response in events:
                response.close()
        await channel.close()
        return refused, sse_status, sse_reason, str(retry_after), knocks

    with Poller(api_only, job_b, B) as poller:
        refused, sse_status, sse_reason, retry_after, knocks = asyncio.run(saturate())
    print(f"\nstreams: tenant A held {REPLICA_STREAMS} streams and was refused {knocks} more; "
          f"tenant B's GetStatus through the same gateway: {poller.summary()}")  # fmt: skip
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "TOO_MANY_STREAMS",
    )
    assert refused.metadata["limit"] == str(REPLICA_STREAMS)
    assert (sse_status, sse_reason, retry_after) == (429, "TOO_MANY_STREAMS", "1")
    assert p99(poller.latencies) < 0.5, poller.summary()

    # Slots come back when streams end: A may open streams again.
    async def reopen() -> None:
        channel = grpc.aio.insecure_channel(gateway)
        s = parser_service_pb2_grpc.ParserServiceStub(channel)
        calls = [await _open_watch(s, job_a, A) for _ in range(3)]
        for call in calls:
            call.cancel()
        await channel.close()

    eventually(lambda: _succeeds(lambda: asyncio.run(reopen())), 30, "A's slots returned")


def _succeeds(fn: object) -> bool:
    try:
        fn()  # type: ignore[operator]
    except (AssertionError, grpc.RpcError):
        return False
    return True


def test_an_api_key_sets_its_own_stream_limit(api_only: LocalStack) -> None:
    """The key of tenant C says max_streams 3: the fourth watch, and the fourth event stream,
    are refused with limit 3; tenant B (no per-key limit) is not affected by C's count."""
    job_c = queued_job(api_only, C)
    gateway, http = api_only.gateway_addresses[0], api_only.http_addresses[0]

    async def run() -> tuple[DocparseError, int, dict[str, object]]:
        channel = grpc.aio.insecure_channel(gateway)
        s = parser_service_pb2_grpc.ParserServiceStub(channel)
        watches = [await _open_watch(s, job_c, C) for _ in range(3)]
        refused = await _refused_watch(s, job_c, C)
        for call in watches:
            call.cancel()
        await channel.close()
        url = f"http://{http}/v1/jobs/{job_c}/events"
        async with aiohttp.ClientSession() as session:
            # The replica's slots free up as the cancels arrive; the gateway's are its own.
            events = [await _open_sse(session, url, "key-c") for _ in range(3)]
            async with session.get(url, headers={"X-Api-Key": "key-c"}) as over:
                status, body = over.status, await over.json()
            for response in events:
                response.close()
        return refused, status, body

    refused, status, body = asyncio.run(run())
    assert (refused.code, refused.reason, refused.metadata["limit"]) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "TOO_MANY_STREAMS",
        "3",
    )
    assert (status, body["reason"], body["metadata"]["limit"]) == (429, "TOO_MANY_STREAMS", "3")


@pytest.fixture(scope="module")
def parsing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("render"), replicas=1, gateways=1, extra_env=auth_env(KEYS, TOKEN)
    ) as running:
        yield running


def test_a_million_cell_json_result_does_not_stall_the_gateway(
    parsing: LocalStack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """GET /v1/jobs/{id}/result?format=json of a 1M-cell workbook (45 MB of JSON) while
    another tenant polls GetStatus through the same gateway. Before: the JSON was built on the
    gateway's only event loop and every other call waited up to 6.6 s."""
    path = tmp_path_factory.mktemp("big") / "big-1M.xlsx"
    fixtures.big_xlsx(path)
    gateway, http = parsing.gateway_addresses[0], parsing.http_addresses[0]
    channel, s = stub(gateway)
    with channel:
        request = parser_service_pb2.SubmitJobRequest(
            file_name="big.xlsx", content=path.read_bytes()
        )
        job = s.SubmitJob(request, metadata=A, timeout=60).job
    done = finished(gateway, job.job_id, A)
    assert done.state == job_pb2.STATE_SUCCEEDED, done.error
    job_b = queued_job(parsing, B)
    url = f"http://{http}/v1/jobs/{job.job_id}/result?format=json"

    with Poller(parsing, job_b, B) as poller:
        started = time.perf_counter()
        with urllib.request.urlopen(
            urllib.request.Request(url, headers={"X-Api-Key": "key-of-a"}), timeout=300
        ) as response:
            headers, body = response.headers, response.read()
        seconds = time.perf_counter() - started
        eventually(lambda: len(poller.latencies) > 20, 30, "a few more polls")
    print(f"\nrender: {len(body) / 1e6:.1f} MB of JSON in {seconds:.1f} s; another tenant's "
          f"GetStatus through the same gateway: {poller.summary()}")  # fmt: skip
    assert headers["Cache-Control"] == "no-store" and headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Type"].startswith("application/json")
    package = json.loads(body)
    assert len(package["sheets"][0]["rows"]) == 50_000
    assert p99(poller.latencies) < 0.1, poller.summary()
