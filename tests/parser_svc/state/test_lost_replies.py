"""A lost or late Redis reply never leaves a zombie job, a SUCCEEDED job without its result,
a batch that is partly made, or a job that costs attempts it never used.

The stack talks to a real Redis through tests/faultproxy.py, which lets a command run and then
drops its reply (the connection closes, as on a network cut: redis-py re-runs the command) or
delays it past the service's Redis timeout (the caller gives up and retries itself). Each
test targets one script by its sha and asserts the fault fired."""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import time
import uuid
from collections.abc import Iterator

import grpc
import pytest
import redis

from docparse.errors import DocparseError
from docparse.local.embedded_redis import EmbeddedRedis
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from parser_svc.state.lua_scripts import CREATE_BATCH, CREATE_JOB, UPDATE_JOB
from tests.conftest import make_stack
from tests.faultproxy import Command, FaultProxy
from tests.helpers import eventually, make_pdf, stub, wait_terminal

PDFS: dict[bytes, bytes] = {}
LATE_S = 2.5  # past DOCPARSE_REDIS_TIMEOUT_S=1.0 of the stack: the caller gives up waiting


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, isolated_proxy: FaultProxy
) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("lost"),
        replicas=2,
        gateways=1,
        redis_url=isolated_proxy.url,
        extra_env={
            "DOCPARSE_INLINE_RESULT_MAX_BYTES": "0",  # results in blobs: a deletion would show
            "DOCPARSE_LOCK_DURATION_MS": "6000",
            "DOCPARSE_RETRY_BACKOFF_MS": "200",
            "DOCPARSE_SWEEP_INTERVAL_S": "0.5",
            "DOCPARSE_SWEEP_ENQUEUE_AFTER_S": "2",
            "DOCPARSE_SWEEP_UPLOADS_AFTER_S": "5",
        },
    ) as running:
        # Scripts loaded and the queue warm, so the faults below hit real runs (not NOSCRIPT).
        assert wait_terminal(running.parser_addresses[0], _submit(running, b"warm").job_id)
        yield running


@pytest.fixture(autouse=True)
def calm_after(isolated_proxy: FaultProxy) -> Iterator[None]:
    yield
    isolated_proxy.calm()


def script(sha: str, *, op: bytes = b"") -> object:
    def match(cmd: Command) -> bool:
        return cmd.script_sha() == sha and (not op or op in cmd.args)

    return match


def _submit(
    stack: LocalStack, label: bytes, *, request_id: str = "", address: str = ""
) -> job_pb2.Job:
    channel, s = stub(address or stack.parser_addresses[0])
    with channel:
        content = PDFS.setdefault(label, make_pdf(1, label.decode()))  # same bytes each time
        request = parser_service_pb2.SubmitJobRequest(
            file_name="doc.pdf", content=content, request_id=request_id
        )
        return s.SubmitJob(request, timeout=30).job


def _result_sha(address: str, job_id: str) -> str:
    channel, s = stub(address)
    with channel:
        chunks = list(s.GetResult(parser_service_pb2.GetResultRequest(job_id=job_id), timeout=30))
    return hashlib.sha256(b"".join(c.chunk for c in chunks)).hexdigest()


def _succeeded_with_result(stack: LocalStack, job_id: str) -> job_pb2.Job:
    address = stack.parser_addresses[1]
    job = wait_terminal(address, job_id, timeout=60)
    assert job.state == job_pb2.STATE_SUCCEEDED, job
    assert _result_sha(address, job_id) == job.result.sha256
    return job


def test_lost_create_reply_the_rerun_continues(
    stack: LocalStack, isolated_proxy: FaultProxy
) -> None:
    """Point 1: the create ran, its reply was lost, redis-py re-ran it; the re-run's REPLAY
    (with a request_id) or JOINED (without) names this call's own job, which gets queued."""
    for request_id in (uuid.uuid4().hex, ""):
        fault = isolated_proxy.arm("drop", script(CREATE_JOB.sha))
        job = _submit(stack, uuid.uuid4().hex.encode(), request_id=request_id)
        assert fault.fired == 1
        assert job.state == job_pb2.STATE_QUEUED or job.state == job_pb2.STATE_RUNNING
        assert _succeeded_with_result(stack, job.job_id).attempt == 1


def test_late_create_reply_a_client_retry_gets_the_job(
    stack: LocalStack, isolated_proxy: FaultProxy
) -> None:
    """Point 1, the caller's side: the create ran but answered too late, so the call failed
    UNAVAILABLE; the documented retry (same request_id) returns that job and it runs."""
    request_id, label = uuid.uuid4().hex, uuid.uuid4().hex.encode()
    fault = isolated_proxy.arm("delay", script(CREATE_JOB.sha), delay_s=LATE_S)
    with pytest.raises(grpc.RpcError) as failed:
        _submit(stack, label, request_id=request_id)
    error = DocparseError.from_rpc_error(failed.value)
    assert (error.code, error.reason) == (grpc.StatusCode.UNAVAILABLE, "STATE_STORE_UNAVAILABLE")
    assert fault.fired == 1
    retried = _submit(stack, label, request_id=request_id, address=stack.parser_addresses[1])
    again = _submit(stack, label, request_id=request_id)
    assert again.job_id == retried.job_id  # one job, whoever answers
    _succeeded_with_result(stack, retried.job_id)


def test_sweeper_enqueues_a_job_a_dead_replica_never_queued(
    stack: LocalStack, isolated_redis: EmbeddedRedis
) -> None:
    """Point 1, the replica that died between create and enqueue: the record exists, the
    upload is stored, the queue has nothing. The sweeper enqueues it; it runs. An upload
    whose job was never created is deleted."""
    from parser_svc.settings import Settings
    from parser_svc.state.store import JobStore, connect
    from parser_svc.work.blobs import BlobStore

    settings = Settings(redis_url=isolated_redis.url, env="test")
    blobs = BlobStore(stack.data_dir / "blobs", "test")
    job_id, orphan = uuid.uuid4().hex, uuid.uuid4().hex
    content = make_pdf(1, "never queued")
    blobs.put_input(job_id, content)
    orphan_path = blobs.path(blobs.put_input(orphan, b"%PDF-1.7 never created"))
    os.utime(orphan_path, (time.time() - 60, time.time() - 60))

    async def create() -> None:
        store = JobStore(connect(settings), settings)
        fields = {"file_name": "z.pdf", "content_type": "pdf", "tenant": "default",
                  "content_sha256": hashlib.sha256(content).hexdigest()}  # fmt: skip
        assert (await store.create(job_id, fields)).created
        await store.aclose()

    import asyncio

    asyncio.run(create())
    _succeeded_with_result(stack, job_id)
    eventually(lambda: not orphan_path.exists(), 30, "the orphan upload deleted")
    assert not blobs.path(blobs.input_key(job_id)).exists()  # the job's own, after its parse


def test_late_finish_reply_keeps_the_result(
    stack: LocalStack, isolated_proxy: FaultProxy, isolated_redis: EmbeddedRedis
) -> None:
    """Point 2: the SUCCEEDED write went in, its reply came too late; the worker's retry is
    told DONE and the result blob stays (before: deleted, GetResult said RESULT_EXPIRED)."""
    fault = isolated_proxy.arm("delay", script(UPDATE_JOB.sha, op=b"finish"), delay_s=LATE_S)
    job = _submit(stack, uuid.uuid4().hex.encode())
    # The record reads SUCCEEDED as soon as the write went in; the worker is done with the job
    # only when the queue has it finished (after its retry of the late write).
    client = redis.Redis.from_url(isolated_redis.url)
    bull_job = f"docparse:test:bull:parse:{job.job_id}"
    eventually(lambda: client.hget(bull_job, "finishedOn"), 60, "the worker done with it")
    client.close()
    done = _succeeded_with_result(stack, job.job_id)
    assert fault.fired == 1 and done.attempt == 1


def test_late_claim_replies_cost_no_attempt(stack: LocalStack, isolated_proxy: FaultProxy) -> None:
    """Point 6: three claims in a row answered too late: the worker re-runs the claim, which
    finds itself (DONE); the job runs once, at attempt 1 (before: three failed attempts and
    a record RUNNING forever)."""
    fault = isolated_proxy.arm(
        "delay", script(UPDATE_JOB.sha, op=b"claim"), count=3, delay_s=LATE_S
    )
    job = _submit(stack, uuid.uuid4().hex.encode())
    done = _succeeded_with_result(stack, job.job_id)
    assert fault.fired == 3 and done.attempt == 1


def test_a_job_the_queue_gives_up_on_ends_failed(
    stack: LocalStack, isolated_proxy: FaultProxy
) -> None:
    """Point 6: every claim answers too late, attempt after attempt, until the queue gives up
    on the job: its record ends FAILED with the reason, not RUNNING forever. (Armed before the
    submit: a one-page job is claimed within milliseconds.)"""
    fault = isolated_proxy.arm(
        "delay", script(UPDATE_JOB.sha, op=b"claim"), count=1000, delay_s=LATE_S
    )
    job = _submit(stack, uuid.uuid4().hex.encode())
    ended = wait_terminal(stack.parser_addresses[0], job.job_id, timeout=120)
    assert fault.fired >= 3
    assert (ended.state, ended.error.reason) == (job_pb2.STATE_FAILED, "STATE_STORE_UNAVAILABLE")


def test_create_batch_retries_see_the_whole_batch(
    stack: LocalStack, isolated_proxy: FaultProxy
) -> None:
    """Point 5: two CreateBatch calls racing with one request_id, and a retry after a late
    reply, each get the whole batch; it completes."""
    files = [
        parser_service_pb2.BatchFile(file_name=f"f{i}.pdf", content=make_pdf(1, f"file {i}"))
        for i in range(40)
    ]
    request_id = uuid.uuid4().hex

    def create(address: str) -> parser_service_pb2.Batch:
        channel, s = stub(address)
        with channel:
            request = parser_service_pb2.CreateBatchRequest(files=files, request_id=request_id)
            return s.CreateBatch(request, timeout=60).batch

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        racing = list(pool.map(create, stack.parser_addresses))
    assert racing[0].batch_id == racing[1].batch_id
    assert [len(b.jobs) for b in racing] == [40, 40]

    request_id = uuid.uuid4().hex
    fault = isolated_proxy.arm("delay", script(CREATE_BATCH.sha), delay_s=LATE_S)
    with pytest.raises(grpc.RpcError) as failed:
        create(stack.parser_addresses[0])
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE and fault.fired == 1
    batch = create(stack.parser_addresses[1])
    assert len(batch.jobs) == batch.total == 40
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        final = parser_service_pb2.Batch()
        request = parser_service_pb2.WatchBatchRequest(batch_id=batch.batch_id)
        for event in s.WatchBatch(request, timeout=120):
            if event.HasField("batch"):
                final = event.batch
    assert (final.completed, final.succeeded) == (40, 40)


def test_no_zombie_is_left_behind(stack: LocalStack, isolated_redis: EmbeddedRedis) -> None:
    """After the faults above, every job record in Redis has ended and the pending-enqueue
    index holds nothing the sweeper has not confirmed."""
    client = redis.Redis.from_url(isolated_redis.url)

    def all_ended() -> bool:
        states = [
            client.hget(key, "state")
            for key in client.scan_iter(match="docparse:test:job:*", count=1000)
            if key.count(b":") == 3  # the record itself, not one of its {job}:<part> keys
        ]
        return bool(states) and all(s in (b"SUCCEEDED", b"FAILED", b"CANCELLED") for s in states)

    eventually(all_ended, 60, "every job ended")
    eventually(lambda: client.zcard("docparse:test:pending") == 0, 30, "pending confirmed")
    client.close()
