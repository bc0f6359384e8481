"""The SDK's paths against real stacks: the transport is the real gRPC one, only counted."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from docparse.aio import AsyncClient
from docparse.client import Client
from docparse.errors import DocparseError, JobFailed, WaitTimeout
from docparse.local.stack import LocalStack
from docparse.transport import GrpcTransport
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.waiting import TERMINAL, WaitPolicy
from tests.conftest import make_stack
from tests.helpers import eventually, make_pdf, stub


class CountingTransport(GrpcTransport):
    """The real transport, counting calls per method."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.counts: Counter[str] = Counter()

    def call(self, method: str, request: Message, deadline_s: float | None) -> Any:
        self.counts[method] += 1
        return super().call(method, request, deadline_s)

    def stream(self, method: str, request: Message, deadline_s: float | None) -> Iterator[Any]:
        self.counts[method] += 1
        return super().stream(method, request, deadline_s)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """Connections live 1.5 s, so long watch streams are cut by the server (GOAWAY)."""
    with make_stack(
        tmp_path_factory.mktemp("sdk"),
        replicas=2,
        gateways=1,
        extra_env={
            "DOCPARSE_MAX_CONNECTION_AGE_MS": "1500",
            "DOCPARSE_MAX_CONNECTION_AGE_GRACE_MS": "300",
            "DOCPARSE_PARSE_PAGE_DELAY_MS": "100",
        },
    ) as running:
        yield running


def test_sync_answer_needs_no_further_call(stack: LocalStack) -> None:
    transport = CountingTransport(stack.gateway_addresses[0])
    with Client(transport=transport) as client:
        answer = client.submit("two.pdf", make_pdf(2), wait_timeout_ms=60_000)
        assert answer.job.state == job_pb2.STATE_SUCCEEDED
        assert client.wait(answer.job) == answer.job
    # Only the submit: no watch, no status read. (On a loaded machine the 1.5 s connection age
    # of this stack can cut the submit itself; the SDK then repeats it with its request_id.)
    assert set(transport.counts) == {"SubmitJob"}


def test_async_answer_waited_across_cut_streams_then_result_on_disk(
    stack: LocalStack, tmp_path: Path
) -> None:
    transport = CountingTransport(stack.parser_addresses[0])
    with Client(transport=transport) as client:
        job = client.parse(make_pdf(40, "long"), file_name="long.pdf")
        assert job.state == job_pb2.STATE_SUCCEEDED and job.progress.done == 40
        ref = client.download_result(job.job_id, tmp_path / "long.pb")
        package = client.result(job.job_id)
    assert (tmp_path / "long.pb").stat().st_size == ref.size_bytes == job.result.size_bytes
    assert len(package.pages) == 40 and "long 40 of 40" in package.pages[-1].text
    assert transport.counts["SubmitJob"] == 1
    # The 4 s parse outlived several 1.5 s connections: the wait resumed its watch.
    assert transport.counts["WatchJob"] >= 2


def test_failed_job_and_unknown_job(stack: LocalStack) -> None:
    with Client(stack.gateway_addresses[0]) as client:
        with pytest.raises(JobFailed) as failed:
            client.parse(b"%PDF-1.7\nnot really a pdf", file_name="broken.pdf")
        assert failed.value.reason == "CORRUPT_DOCUMENT"
        with pytest.raises(DocparseError) as missing:
            client.wait("0" * 32)
        assert missing.value.code == grpc.StatusCode.NOT_FOUND and not missing.value.expired


def test_async_client_against_the_stack(stack: LocalStack) -> None:
    async def run() -> job_pb2.Job:
        async with AsyncClient(stack.gateway_addresses[0]) as client:
            job = await client.parse(make_pdf(12, "async"), file_name="async.pdf")
            package = await client.result(job.job_id)
            assert len(package.pages) == 12
            return job

    assert asyncio.run(run()).state == job_pb2.STATE_SUCCEEDED


@pytest.fixture(scope="module")
def no_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("sdk-idle"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_ROLE": "api"},
    ) as running:
        yield running


def test_timeout_against_a_stack_that_never_runs_the_job(no_workers: LocalStack) -> None:
    client = Client(no_workers.gateway_addresses[0], policy=WaitPolicy(timeout_s=2.0))
    with client, pytest.raises(WaitTimeout) as timeout:
        client.parse(make_pdf(1), file_name="stuck.pdf")
    assert timeout.value.last_state == "QUEUED" and len(timeout.value.job_id) == 32


def _until_ended(gateway: str, job_id: str) -> None:
    """Polls GetStatus (on a channel of its own: `on_answer` hears none of it) until the job
    has ended."""
    channel, service = stub(gateway)
    with channel:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        eventually(
            lambda: service.GetStatus(request, timeout=10).job.state in TERMINAL,
            timeout=120,
            what=f"the end of {job_id}",
        )


def test_on_answer_hears_who_answered_a_watch_left_at_its_terminal_record(
    stack: LocalStack,
) -> None:
    """A wait and a page stream stop reading at the terminal record (a cut after it is no
    retry), and still tell `on_answer` who answered those streams: the replica, then the
    gateway, as for every call. Both clients. Each job has ended before it is watched, so
    the first stream holds the terminal record: a job still running when a 1.5 s connection
    ends (the stack's first, while its fork server warms up on a loaded machine) would have
    every stream that reached it cut before its end."""
    gateway = stack.gateway_addresses[0]
    gateway_id = f"{socket.gethostname()}/{stack.gateways[0].pid}"
    replicas = {f"{socket.gethostname()}/{p.pid}" for p in stack.parsers}
    heard: dict[str, list[tuple[str, tuple[str, ...]]]] = {"sync": [], "async": []}

    def observer(client: str) -> Callable[[str, tuple[str, ...]], None]:
        return lambda method, served_by: heard[client].append((method, served_by))

    with Client(gateway, on_answer=observer("sync")) as client:
        job = client.submit("three.pdf", make_pdf(3)).job
        _until_ended(gateway, job.job_id)
        records = list(client.watch(job.job_id))
        pages = list(client.stream_pages(job.job_id))
    assert records[-1].state == job_pb2.STATE_SUCCEEDED and pages[-1].HasField("job")

    async def run() -> None:
        async with AsyncClient(gateway, on_answer=observer("async")) as client:
            answer = await client.submit("four.pdf", make_pdf(4))
            await asyncio.to_thread(_until_ended, gateway, answer.job.job_id)
            assert (await client.wait(answer.job)).state == job_pb2.STATE_SUCCEEDED
            async for _ in client.stream_pages(answer.job.job_id):
                pass

    asyncio.run(run())
    for client, answers in heard.items():
        assert all(served_by[-1] == gateway_id for _, served_by in answers), answers
        # A stream the stack's 1.5 s connections cut is heard too, from the gateway alone.
        for method in ("WatchJob", "StreamResult"):
            whole = [s for name, s in answers if name == method and len(s) == 2]
            assert whole and all(s[0] in replicas for s in whole), (client, method, answers)
