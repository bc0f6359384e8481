"""StreamResult on a running stack: a job's pages are readable while it runs (drafts), a stream
resumed on another replica continues where it stopped, the finals are the final package's
pages byte for byte, and a worker killed mid-document never makes a page served twice
differently."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
import redis

from docparse import page_ranges
from docparse.client import Client
from docparse.local.stack import LocalStack
from docparse.reasons import ErrorReason
from docparse.streamed_pages import one_page_each
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from docparse.v1 import reading_package_pb2 as rp
from docparse.v1.parser_service_pb2 import GetResultRequest, WatchJobRequest
from tests.conftest import make_stack
from tests.helpers import eventually, make_pdf, rpc_error, stub, submit, wait_terminal
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
            # The first read of a running job waits for the pages read before it: on a loaded
            # box as long as it takes (it returns as soon as they are there).
            "DOCPARSE_DRAFT_BACKFILL_WAIT_S": "20",
        },
    ) as running:
        yield running


def stream(address: str, job_id: str, cursor: str = "", per_message: int = 0) -> Iterator[Message]:
    channel, s = stub(address)
    with channel:
        request = parser_service_pb2.StreamResultRequest(
            job_id=job_id, cursor=cursor, pages_per_message=per_message
        )
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


def test_pages_several_a_message_are_the_pages_one_a_message_sends(stack: LocalStack) -> None:
    """Two readers of one running job on two replicas, one page a message and sixteen: the
    same pages in the same order, with the same cursors and bytes; the finals, ready at once,
    come sixteen a message; a stream resumed from a cursor inside a message continues after
    that page."""
    gateway = stack.gateway_addresses[0]
    first, second = stack.parser_addresses
    job = submit(gateway, make_pdf(PAGES, "grouped"), "grouped.pdf")
    with ThreadPoolExecutor(2) as pool:
        alone = pool.submit(lambda: list(stream(first, job.job_id)))
        several = pool.submit(lambda: list(stream(second, job.job_id, per_message=16)))
        one_a_message, grouped = alone.result(), several.result()
    flat = [one for message in grouped for one in one_page_each(message)]

    def seen(messages: list[Message]) -> list[tuple[Any, ...]]:
        return [
            (m.page_number, m.final, m.cursor, m.sha256, m.attempt, m.page_part, m.job.version)
            for m in messages
        ]

    assert seen(flat) == seen(one_a_message)
    assert flat[-1].job.state == job_pb2.STATE_SUCCEEDED
    assert any(not m.final for m in flat[:-1])  # drafts while it ran
    assert all(not m.page_part for m in grouped)  # several a message: in `pages` only
    finals = [m for m in grouped if m.pages and m.pages[0].final]
    assert [len(m.pages) for m in finals] == [16, PAGES - 16]
    assert_finals_are_the_package(gateway, job.job_id, [m for m in flat if m.final])

    inside = finals[0].pages[4]  # the 5th final, inside a message of 16
    rest = list(stream(first, job.job_id, inside.cursor, per_message=16))
    assert [len(m.pages) for m in rest] == [16, PAGES - 5 - 16, 0]
    resumed = [one for message in rest for one in one_page_each(message)]
    assert [m.page_number for m in resumed[:-1]] == list(range(6, PAGES + 1))


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


def get_result(address: str, job_id: str, pages: str) -> tuple[rp.ReadingPackage, list[Any]]:
    """GetResult with `pages` straight from a replica: the package (its sha256 checked) and
    the messages."""
    channel, s = stub(address)
    with channel:
        messages = list(s.GetResult(GetResultRequest(job_id=job_id, pages=pages), timeout=30))
    data = b"".join(m.chunk for m in messages)
    ref = messages[0].result
    assert (ref.size_bytes, ref.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    package = rp.ReadingPackage.FromString(data)
    assert ref.page_count == len(package.pages)
    return package, messages


def test_a_job_nobody_reads_while_it_runs_writes_no_drafts(stack: LocalStack) -> None:
    """Drafts cost a parse nobody streams from (bench/README.md, "Drafts on demand"): a job
    waited for without reading its pages stores no page part and no pointer, and its finals
    are all a stream opened after the end sends."""
    job = submit(stack.gateway_addresses[0], make_pdf(6, "unread"), "unread.pdf")
    assert wait_terminal(stack.gateway_addresses[0], job.job_id).state == job_pb2.STATE_SUCCEEDED
    client = redis.Redis.from_url(stack.redis_url)
    try:
        assert not list(client.scan_iter(match=f"*{job.job_id}*:page*"))
        assert list(client.scan_iter(match=f"*:job:*{job.job_id}*"))  # the record is there
    finally:
        client.close()
    assert not list(stack.data_dir.glob(f"**/pages/{job.job_id}/*"))
    messages = list(stream(stack.parser_addresses[1], job.job_id))
    assert [(m.page_number, m.final) for m in messages[:-1]] == [(n, True) for n in range(1, 7)]


def test_drafts_wait_for_a_reader_whose_first_read_gets_the_pages_read_so_far(
    stack: LocalStack,
) -> None:
    """A job nobody reads writes no drafts: its running records name no ready page though
    pages are done. The first GetResult with `pages` (on the other replica) turns its drafts
    on and answers the pages read before it, in the same call, as drafts, marked partial;
    from then on the records name the ready pages, growing, and any replica serves what they
    name; once SUCCEEDED they name the package's pages."""
    gateway = stack.gateway_addresses[0]
    first, second = stack.parser_addresses
    job = submit(gateway, make_pdf(PAGES, "ready"), "ready.pdf")
    running: list[job_pb2.Job] = []
    asked = 0
    channel, s = stub(first)
    with channel:
        for event in s.WatchJob(WatchJobRequest(job_id=job.job_id), timeout=120):
            progress = event.job.progress
            if event.job.state != job_pb2.STATE_RUNNING:
                if event.job.state == job_pb2.STATE_SUCCEEDED:
                    break
                continue
            if not asked and progress.done >= 3:
                assert progress.ready_pages == "", "drafts written before anyone read"
                package, messages = get_result(second, job.job_id, "1-")
                asked = len(package.pages)
                assert asked >= progress.done, "the first read lacks pages read before it"
                assert [p.number for p in package.pages] == list(range(1, asked + 1))
                assert messages[0].partial
                assert list(messages[0].draft_pages) == list(range(1, asked + 1))
            elif asked and progress.ready_pages not in {
                "",
                *(j.progress.ready_pages for j in running),
            }:
                running.append(event.job)
            if len(running) == 2:
                break
    assert len(running) == 2, "no running record named a ready page after the first read"
    ready = [page_ranges.parse(j.progress.ready_pages) for j in running]
    named = [[n for n in range(1, PAGES + 1) if page_ranges.selects(r, n)] for r in ready]
    assert named[0][0] == 1 and set(named[0]) < set(named[1])  # page 1 on, growing
    # What the record names, any replica serves at once, as drafts, marked partial.
    package, messages = get_result(second, job.job_id, running[1].progress.ready_pages)
    assert [p.number for p in package.pages] == named[1]
    assert messages[0].partial and list(messages[0].draft_pages) == [
        p.number for p in package.pages
    ]
    assert status(gateway, job.job_id).state == job_pb2.STATE_RUNNING  # it was read before the end
    done = wait_terminal(gateway, job.job_id)
    assert done.progress.ready_pages == f"1-{PAGES}"
    # Once SUCCEEDED: the package's pages, cut; not partial, no drafts.
    whole = Client(gateway).result(job.job_id)
    package, messages = get_result(first, job.job_id, "2,29-")
    assert not messages[0].partial and not messages[0].draft_pages
    assert [p.number for p in package.pages] == [2, 29, 30]
    assert [p.SerializeToString() for p in package.pages] == [
        whole.pages[n - 1].SerializeToString() for n in (2, 29, 30)
    ]
    assert (package.content_type, package.parser_version) == (
        whole.content_type,
        whole.parser_version,
    )


def test_get_result_with_pages_refuses_a_bad_selection_and_a_failed_job(
    stack: LocalStack,
) -> None:
    address = stack.parser_addresses[0]
    job = submit(stack.gateway_addresses[0], b"%PDF-1.7 not really", "broken.pdf")
    assert wait_terminal(address, job.job_id).state == job_pb2.STATE_FAILED
    err = rpc_error(lambda: get_result(address, job.job_id, "1-2"))
    assert (err.code, err.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        ErrorReason.JOB_NOT_SUCCEEDED,
    )
    err = rpc_error(lambda: get_result(address, job.job_id, "3-1"))
    assert (err.code, err.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.INVALID_PAGE_RANGE,
    )


def test_the_sdk_and_the_cli_read_some_pages_while_the_job_runs(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    # 120 pages at 0.1 s each: the job runs for 12 s, the CLI's start takes one or two
    job = submit(gateway, make_pdf(120, "sdk pages"), "sdk.pdf")
    with Client(gateway) as client:
        read = eventually(
            lambda: (r := client.read_pages(job.job_id, "1-3")).package.pages[2:] and r,
            what="pages 1-3 read while the job runs",
        )
        assert read.partial and read.draft_pages == (1, 2, 3)
        assert [p.number for p in read.package.pages] == [1, 2, 3]
        cli = subprocess.run(
            [sys.executable, "-m", "docparse", "result", job.job_id, "--pages", "2",
             "--format", "text", "--target", gateway],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        assert "partial: job" in cli.stderr and "sdk pages 2" in cli.stdout
        client.wait(job.job_id)
        done = client.read_pages(job.job_id, "1-3")
        assert not done.partial and not done.draft_pages
        assert [p.number for p in done.package.pages] == [1, 2, 3]
