"""Kills, freezes, outages and cancels on a real stack: every job ends exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis

from docparse.client import Client
from docparse.errors import DocparseError
from docparse.local.stack import Child, LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from tests.conftest import make_stack
from tests.helpers import Recorder, eventually, make_pdf, rpc_error, stub, submit

CRASH_MARKER = "DOCPARSE-TEST-CRASH"
MAX_ATTEMPTS = 3


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("durability"),
        replicas=3,
        gateways=1,
        extra_env={
            "DOCPARSE_PARSE_PAGE_DELAY_MS": "100",
            # A takeover after a kill or freeze within seconds, but not one per missed
            # renewal: with 3 s locks (renewed every 1.5 s), the 2-core CI box under a full
            # run starved a worker's loop long enough that a job was taken over 3 times
            # around the Redis restart and ended WORKER_LOST (each claim is an attempt).
            "DOCPARSE_LOCK_DURATION_MS": "5000",
            "DOCPARSE_INLINE_RESULT_MAX_BYTES": "0",  # every result is a blob we can count
            "DOCPARSE_FAULT_SEGV_MARKER": CRASH_MARKER,
            "DOCPARSE_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
            "DOCPARSE_RETRY_BACKOFF_MS": "200",
            "DOCPARSE_SHUTDOWN_GRACE_S": "5",
        },
    ) as running:
        yield running


@pytest.fixture(autouse=True)
def all_replicas_up(stack: LocalStack) -> Iterator[None]:
    yield
    for child in stack.parsers:
        if not child.alive():
            stack.restart(child)


def status(address: str, job_id: str) -> job_pb2.Job:
    channel, s = stub(address)
    with channel:
        return s.GetStatus(parser_service_pb2.GetStatusRequest(job_id=job_id), timeout=10).job


def runner_of(stack: LocalStack, job_id: str) -> Child:
    """The parser_svc replica whose parse child is working on `job_id` (read from /proc)."""

    def find() -> Child | None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if b"parser_svc.child.parse_child" in cmdline and any(
                arg.endswith(f"inputs/{job_id}".encode()) for arg in cmdline
            ):
                parent = int(stat.rsplit(")", 1)[1].split()[1])
                return next((c for c in stack.parsers if c.pid == parent), None)
        return None

    return eventually(find, 30, f"a parse child for {job_id}")


def progressed(address: str, job_id: str, pages: int) -> bool:
    job = status(address, job_id)
    return job.state == job_pb2.STATE_RUNNING and job.progress.done >= pages


def result_blobs(stack: LocalStack, job_id: str) -> list[Path]:
    folder = stack.data_dir / "blobs" / "test" / "results" / job_id
    return sorted(folder.glob("*.pb.gz")) if folder.exists() else []


def other_replica(stack: LocalStack, busy: Child) -> str:
    return next(c.address for c in stack.parsers if c is not busy)


def test_killed_worker_mid_parse_is_taken_over_and_finishes_once(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    job = submit(gateway, make_pdf(30), "thirty.pdf")
    recorder = Recorder(gateway, job.job_id)
    eventually(lambda: progressed(gateway, job.job_id, 5), 60, "5 pages parsed")
    victim = runner_of(stack, job.job_id)
    victim.signal(signal.SIGKILL)

    final = recorder.final()
    assert final.state == job_pb2.STATE_SUCCEEDED
    assert final.attempt == 2
    assert final.progress.done == 30
    recorder.assert_monotonic()
    blobs = result_blobs(stack, job.job_id)
    assert [b.name for b in blobs] == [Path(final.result.blob_key).name]
    package = Client(gateway).result(job.job_id)
    assert [p.number for p in package.pages] == list(range(1, 31))


def test_frozen_worker_cannot_write_after_its_lease_was_taken(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    job = submit(gateway, make_pdf(30), "frozen.pdf")
    eventually(lambda: progressed(gateway, job.job_id, 3), 60, "3 pages parsed")
    frozen = runner_of(stack, job.job_id)
    frozen.signal(signal.SIGSTOP)
    try:
        watch_from = other_replica(stack, frozen)
        final = eventually(
            lambda: (j := status(watch_from, job.job_id)).state == job_pb2.STATE_SUCCEEDED and j,
            90,
            "another replica to finish the job",
        )
        assert final.attempt == 2
    finally:
        frozen.signal(signal.SIGCONT)
    log = frozen.log
    eventually(
        lambda: (
            f"job {job.job_id}: progress refused" in log.read_text()
            or f"job {job.job_id}: terminal write refused" in log.read_text()
        ),
        30,
        "the stale worker to try a write and be refused",
    )
    assert status(watch_from, job.job_id) == final
    assert len(result_blobs(stack, job.job_id)) == 1


def test_document_that_always_kills_its_parser_fails_after_the_attempts(
    stack: LocalStack,
) -> None:
    gateway = stack.gateway_addresses[0]
    poison = make_pdf(2) + f"\n% {CRASH_MARKER}\n".encode()
    job = submit(gateway, poison, "poison.pdf")
    final = Recorder(gateway, job.job_id).final()
    assert final.state == job_pb2.STATE_FAILED
    assert final.error.reason == "PARSER_CRASHED"
    assert "SIGSEGV" in final.error.message
    assert final.attempt == MAX_ATTEMPTS
    client = redis.Redis.from_url(stack.redis_url)
    # A dead letter: kept in BullMQ's failed set for inspection, not retried any more. The
    # worker writes the job's terminal record first and then hands the failure to BullMQ, so
    # the entry follows the record that Recorder saw by a moment.
    eventually(
        lambda: client.zscore("docparse:test:bull:parse:failed", job.job_id) is not None,
        10,
        "the job in BullMQ's failed set",
    )
    client.close()
    assert status(gateway, job.job_id).attempt == MAX_ATTEMPTS


def test_cancel_queued_running_and_finished_jobs(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    # Fill every worker slot (3 replicas x 2) so the next job has to wait in the queue.
    # 150 pages at 100 ms each: far longer than this test needs them running.
    busy = [submit(gateway, make_pdf(150, f"busy{i}"), f"busy{i}.pdf") for i in range(6)]
    eventually(
        lambda: all(status(gateway, j.job_id).state == job_pb2.STATE_RUNNING for j in busy),
        60,
        "all slots busy",
    )
    queued = submit(gateway, make_pdf(3, "queued"), "queued.pdf")
    channel, s = stub(gateway)
    with channel:
        reply = s.CancelJob(parser_service_pb2.CancelJobRequest(job_id=queued.job_id), timeout=10)
        assert reply.job.state == job_pb2.STATE_CANCELLED
        assert reply.job.error.reason == "CANCELLED"

        running = busy[0]
        eventually(lambda: progressed(gateway, running.job_id, 3), 60, "3 pages parsed")
        s.CancelJob(parser_service_pb2.CancelJobRequest(job_id=running.job_id), timeout=10)
        stopped = Recorder(gateway, running.job_id).final()
        assert stopped.state == job_pb2.STATE_CANCELLED
        assert stopped.progress.done < 150

        again = rpc_error(
            lambda: s.CancelJob(
                parser_service_pb2.CancelJobRequest(job_id=running.job_id), timeout=10
            )
        )
        assert (again.code, again.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "JOB_ALREADY_ENDED",
        )
        for job in busy[1:]:  # free the slots again for the next tests
            s.CancelJob(parser_service_pb2.CancelJobRequest(job_id=job.job_id), timeout=10)
    for job in busy[1:]:
        assert Recorder(gateway, job.job_id).final().state == job_pb2.STATE_CANCELLED
    # The cancelled job never started, and the cancelled running one stopped for good.
    never = status(gateway, queued.job_id)
    assert (never.state, never.attempt) == (job_pb2.STATE_CANCELLED, 0)
    assert status(gateway, running.job_id) == stopped


def _concurrent_submits(stack: LocalStack, content: bytes, **fields: str) -> set[str]:
    addresses = stack.parser_addresses + stack.gateway_addresses

    async def one(address: str) -> str:
        async with grpc.aio.insecure_channel(address) as channel:
            reply = await parser_service_pb2_grpc.ParserServiceStub(channel).SubmitJob(
                parser_service_pb2.SubmitJobRequest(
                    file_name="same.pdf", content=content, **fields
                ),
                timeout=30,
            )
            return reply.job.job_id

    async def all_of_them() -> list[str]:
        return await asyncio.gather(*(one(addresses[i % len(addresses)]) for i in range(20)))

    return set(asyncio.run(all_of_them()))


def test_twenty_racing_submits_of_one_upload_make_one_job(stack: LocalStack) -> None:
    content = make_pdf(8, f"dedupe-{os.getpid()}")
    ids = _concurrent_submits(stack, content)
    assert len(ids) == 1
    (job_id,) = ids
    gateway = stack.gateway_addresses[0]
    assert Recorder(gateway, job_id).final().state == job_pb2.STATE_SUCCEEDED
    # Dedupe is active-only: the same upload after the job ended is a new job.
    later = _concurrent_submits(stack, content)
    assert len(later) == 1 and later != ids


def test_twenty_racing_submits_with_one_request_id_make_one_job(stack: LocalStack) -> None:
    # A password turns content dedupe off, so only the request_id gate is at work here.
    content = make_pdf(4, f"request-{os.getpid()}")
    request_id = f"req-{os.getpid()}"
    ids = _concurrent_submits(stack, content, request_id=request_id, password="unused")
    assert len(ids) == 1
    (job_id,) = ids
    assert Recorder(stack.gateway_addresses[0], job_id).final().state == job_pb2.STATE_SUCCEEDED
    # Retrying after the job finished still returns the first job (24 h window) ...
    assert _concurrent_submits(stack, content, request_id=request_id, password="unused") == ids
    # ... and reusing the id for other content is an error, not a silent new job.
    with Client(stack.gateway_addresses[0]) as client, pytest.raises(DocparseError) as reused:
        client.submit("other.pdf", make_pdf(1, "other"), request_id=request_id)
    assert (reused.value.code, reused.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "REQUEST_ID_REUSED",
    )


def test_redis_restart_loses_no_queued_or_running_job(stack: LocalStack) -> None:
    assert stack.redis is not None
    gateway = stack.gateway_addresses[0]
    pids = [child.pid for child in stack.parsers + stack.gateways]
    # 8 jobs of 6 s each for 6 worker slots, submitted together: some run, some wait.
    documents = [make_pdf(60, f"restart{i}") for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        jobs = list(pool.map(lambda i: submit(gateway, documents[i], f"restart{i}.pdf"), range(8)))

    def running_and_queued() -> bool:
        records = [status(gateway, job.job_id) for job in jobs]
        return any(
            r.state == job_pb2.STATE_RUNNING and r.progress.done >= 2 for r in records
        ) and any(r.state == job_pb2.STATE_QUEUED for r in records)

    eventually(running_and_queued, 60, "jobs running (with progress) and jobs queued")

    stack.redis.stop()  # SIGTERM: redis-server fsyncs its AOF on the way out
    stack.redis.start()

    recorders = [Recorder(gateway, job.job_id) for job in jobs]
    finals = [recorder.final(180) for recorder in recorders]
    not_done = [
        (job.job_id, job_pb2.State.Name(job.state), job.error.reason, job.error.message)
        for job in finals
        if job.state != job_pb2.STATE_SUCCEEDED
    ]
    assert not not_done, not_done
    for recorder in recorders:
        recorder.assert_monotonic()
    assert [child.pid for child in stack.parsers + stack.gateways] == pids  # no restarts
    for job in finals:
        assert len(result_blobs(stack, job.job_id)) == 1


def test_hundred_watchers_survive_killed_pubsub_connections(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    jobs = [submit(gateway, make_pdf(30, f"pubsub{i}"), f"pubsub{i}.pdf") for i in range(4)]
    addresses = stack.parser_addresses

    async def run() -> list[job_pb2.Job]:
        channels = [grpc.aio.insecure_channel(address) for address in addresses]
        calls = []
        for i in range(100):
            stub_ = parser_service_pb2_grpc.ParserServiceStub(channels[i % len(channels)])
            request = parser_service_pb2.WatchJobRequest(job_id=jobs[i % len(jobs)].job_id)
            calls.append(stub_.WatchJob(request, timeout=120))
        firsts = [await call.read() for call in calls]  # every stream is live
        admin = redis.asyncio.Redis.from_url(stack.redis_url)
        killed = await admin.client_kill_filter(_type="pubsub")
        await admin.aclose()
        assert killed >= len(addresses)

        async def last(call: Any, first: parser_service_pb2.WatchJobResponse) -> job_pb2.Job:
            latest = first.job
            while (event := await call.read()) is not grpc.aio.EOF:
                if event.HasField("job"):
                    assert event.job.version > latest.version
                    latest = event.job
            return latest

        finals = await asyncio.gather(*(last(c, f) for c, f in zip(calls, firsts, strict=True)))
        for channel in channels:
            await channel.close()
        return list(finals)

    finals = asyncio.run(run())
    assert len(finals) == 100
    assert all(job.state == job_pb2.STATE_SUCCEEDED for job in finals)


def test_sigterm_ends_streams_retryably_and_clients_resume_elsewhere(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    job = submit(gateway, make_pdf(40, "drain"), "drain.pdf")
    leaving = stack.parsers[0]
    channel, s = stub(leaving.address)
    with channel:
        streams = [
            s.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job.job_id), timeout=60)
            for _ in range(10)
        ]
        seen = [next(stream).job.version for stream in streams]
        leaving.signal(signal.SIGTERM)
        for index, stream in enumerate(streams):
            with pytest.raises(grpc.RpcError) as ended:
                for event in stream:
                    if event.HasField("job"):
                        seen[index] = event.job.version
            err = DocparseError.from_rpc_error(ended.value)
            assert (err.code, err.reason) == (grpc.StatusCode.UNAVAILABLE, "SERVER_SHUTTING_DOWN")
    assert leaving.proc is not None and leaving.proc.wait(30) == 0
    # Each client resumes where it was, on another replica, and gets the terminal record.
    other = stack.parsers[1].address
    for version in seen:
        channel, s = stub(other)
        with channel:
            rest = [
                e.job
                for e in s.WatchJob(
                    parser_service_pb2.WatchJobRequest(job_id=job.job_id, after_version=version),
                    timeout=120,
                )
                if e.HasField("job")
            ]
        assert rest[-1].state == job_pb2.STATE_SUCCEEDED
        assert all(j.version > version for j in rest)
