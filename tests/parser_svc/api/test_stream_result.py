"""StreamResult on a running stack: a job's pages are readable while it runs (drafts), a stream
resumed on another replica continues where it stopped, the finals are the final package's
pages byte for byte, and a worker killed mid-document never makes a page served twice
differently."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import grpc
import pytest

from docparse.client import Client
from docparse.local.stack import LocalStack
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from tests.conftest import make_stack
from tests.helpers import make_pdf, rpc_error, stub, submit
from tests.parser_svc.state.test_durability import runner_of, status

Message = parser_service_pb2.StreamResultResponse
PAGES = 30


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("stream"),
        replicas=2,
        gateways=1,
        extra_env={
            "DOCPARSE_PARSE_PAGE_DELAY_MS": "100",  # the job runs while pages are read
            "DOCPARSE_LOCK_DURATION_MS": "3000",  # a killed worker's job is taken over soon
            "DOCPARSE_RETRY_BACKOFF_MS": "200",
        },
    ) as running:
        yield running


def stream(address: str, job_id: str, cursor: str = "") -> Iterator[Message]:
    channel, s = stub(address)
    with channel:
        request = parser_service_pb2.StreamResultRequest(job_id=job_id, cursor=cursor)
        yield from s.StreamResult(request, timeout=120)


def page_of(message: Message) -> bytes:
    part = reading_package_pb2.ReadingPackage.FromString(message.page_part)
    assert len(part.pages) == 1 and part.pages[0].number == message.page_number
    return part.pages[0].SerializeToString(deterministic=True)


def assert_finals_are_the_package(gateway: str, job_id: str, finals: list[Message]) -> None:
    package = Client(gateway).result(job_id)
    assert [m.page_number for m in finals] == list(range(1, PAGES + 1))
    assert [page_of(m) for m in finals] == [
        p.SerializeToString(deterministic=True) for p in package.pages
    ]


def test_pages_come_while_the_job_runs_and_resume_on_another_replica(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    first, second = stack.parser_addresses
    job = submit(gateway, make_pdf(PAGES, "streamed"), "streamed.pdf")
    before: list[Message] = []
    for message in stream(first, job.job_id):
        before.append(message)
        if len(before) == 3:
            break
    assert all(not m.final for m in before)
    assert status(gateway, job.job_id).state == job_pb2.STATE_RUNNING  # read before the end
    after = list(stream(second, job.job_id, before[-1].cursor))
    *pages, end = after
    assert end.job.state == job_pb2.STATE_SUCCEEDED and not end.page_part
    drafts = [m.page_number for m in before + pages if not m.final]
    assert sorted(drafts) == list(range(1, len(drafts) + 1)) and len(drafts) > 3  # none twice
    assert_finals_are_the_package(gateway, job.job_id, [m for m in pages if m.final])
    # After the end a new stream (the SDK's, through the gateway) sends the finals alone, and
    # a resume from its end nothing.
    with Client(gateway) as client:
        again = list(client.stream_pages(job.job_id))
    assert [m.page_number for m in again[:-1]] == list(range(1, PAGES + 1))
    assert [m.page_part for m in again[:-1]] == [m.page_part for m in pages if m.final]
    assert [m.job.state for m in stream(first, job.job_id, again[-1].cursor)] == [
        job_pb2.STATE_SUCCEEDED
    ]


def test_a_killed_worker_never_serves_a_page_twice_differently(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    job = submit(gateway, make_pdf(PAGES, "killed"), "killed.pdf")
    victim = runner_of(stack, job.job_id)
    watcher = next(c.address for c in stack.parsers if c is not victim)
    messages: list[Message] = []
    try:
        for message in stream(watcher, job.job_id):
            messages.append(message)
            if len(messages) == 5:  # five pages read: the worker dies mid-document
                victim.signal(signal.SIGKILL)
    finally:
        if not victim.alive():
            stack.restart(victim)
    *pages, end = messages
    assert end.job.state == job_pb2.STATE_SUCCEEDED and end.job.attempt == 2
    drafts: dict[int, set[bytes]] = {}
    for message in pages:
        if not message.final:
            drafts.setdefault(message.page_number, set()).add(page_of(message))
    assert all(len(parts) == 1 for parts in drafts.values())  # each page one draft
    assert {m.attempt for m in pages if not m.final} == {1, 2}  # both attempts drafted
    assert_finals_are_the_package(gateway, job.job_id, [m for m in pages if m.final])


def test_a_cursor_not_made_by_the_stream_is_refused(stack: LocalStack) -> None:
    job = submit(stack.gateway_addresses[0], make_pdf(2, "cursor"), "cursor.pdf")
    err = rpc_error(lambda: list(stream(stack.parser_addresses[0], job.job_id, "x7")))
    assert (err.code, err.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.INVALID_RESUME_CURSOR,
    )
