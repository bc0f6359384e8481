"""A randomized run under lost and late Redis replies: many jobs, batches, cancels and repeated
uploads while the fault proxy drops or delays replies of every script call and transaction
commit at random (the service's and BullMQ's alike). After the faults stop, the invariants a
user relies on must hold:

- no zombie: every job ends (also the ones no client heard of), nothing stays pending;
- no SUCCEEDED job without a readable result whose sha256 matches the record;
- every batch completes, its counters matching its files;
- versions published for a job strictly increase, and each job ends exactly once;
- identical uploads afterwards complete.

LOST_REPLY_JOBS / LOST_REPLY_BATCHES / LOST_REPLY_FAULTS set the size (make test: 60 jobs,
2 batches, 15 faults of each kind; make soak: 200, 5, 50)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc
import pytest
import redis

from docparse.local.embedded_redis import EmbeddedRedis
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from parser_svc.state.lua_scripts import LEASE
from tests.conftest import make_stack
from tests.faultproxy import Command, FaultProxy, any_write
from tests.helpers import eventually, make_pdf

JOBS = int(os.environ.get("LOST_REPLY_JOBS", "60"))
BATCHES = int(os.environ.get("LOST_REPLY_BATCHES", "2"))
MIN_FAULTS = int(os.environ.get("LOST_REPLY_FAULTS", "15"))
LATE_S = 1.5  # past the stack's 1 s Redis timeout
RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
LEASE_SHA = LEASE.sha
T = TypeVar("T")


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, isolated_proxy: FaultProxy
) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("random"),
        replicas=2,
        gateways=1,
        redis_url=isolated_proxy.url,
        extra_env={
            "DOCPARSE_LOCK_DURATION_MS": "6000",
            "DOCPARSE_RETRY_BACKOFF_MS": "200",
            "DOCPARSE_MAX_ATTEMPTS": "5",
            "DOCPARSE_SWEEP_INTERVAL_S": "1",
            "DOCPARSE_SWEEP_ENQUEUE_AFTER_S": "3",
            "DOCPARSE_INLINE_RESULT_MAX_BYTES": "2000",  # some results inline, some blobs
        },
    ) as running:
        yield running


class VersionLog(threading.Thread):
    """Every record published on any job channel, read straight from Redis (not through the
    isolated_proxy): per job, the versions in order and the terminal records."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.pubsub = redis.Redis.from_url(url).pubsub()
        self.pubsub.psubscribe("docparse:test:job:*:events")
        self.versions: dict[str, list[int]] = defaultdict(list)
        self.terminal: dict[str, int] = defaultdict(int)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            message = self.pubsub.get_message(timeout=0.2)
            if message and message["type"] == "pmessage":
                record = json.loads(message["data"])
                self.versions[record["job_id"]].append(int(record["version"]))
                if record["state"] in TERMINAL:
                    self.terminal[record["job_id"]] += 1


def retried(call: Callable[[], T], deadline_s: float = 90) -> T:
    """What a client does after an unknown outcome (docs/operations.md): the same request
    again, for UNAVAILABLE and DEADLINE_EXCEEDED only."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except grpc.RpcError as err:
            if err.code() not in RETRYABLE or time.monotonic() > deadline:  # type: ignore[attr-defined]
                raise
        time.sleep(0.2)


def service_write(cmd: Command) -> bool:
    """Every script call and transaction commit but the sweeper's lease renewal (it runs every
    second and would take most of the faults)."""
    return any_write(cmd) and cmd.script_sha() != LEASE_SHA


def test_random_lost_and_late_replies_keep_every_invariant(
    stack: LocalStack, isolated_proxy: FaultProxy, isolated_redis: EmbeddedRedis
) -> None:
    rng = random.Random(1606)
    log = VersionLog(isolated_redis.url)
    log.start()
    channels = [
        grpc.insecure_channel(a) for a in [*stack.parser_addresses, *stack.gateway_addresses]
    ]
    stubs = [parser_service_pb2_grpc.ParserServiceStub(c) for c in channels]
    contents = [make_pdf(rng.randint(1, 3), f"doc {i}") for i in range(JOBS)]
    job_ids: set[str] = set()
    batch_ids: set[str] = set()
    lock = threading.Lock()

    def submit(index: int) -> None:
        s = rng.choice(stubs)
        # Each document once, then a fifth more of repeats: they join the job while it is
        # active, and make a new one after it ended.
        content = contents[index] if index < JOBS else rng.choice(contents)
        request_id = uuid.uuid4().hex
        request = parser_service_pb2.SubmitJobRequest(
            file_name=f"j{index}.pdf", content=content, request_id=request_id
        )
        job = retried(lambda: s.SubmitJob(request, timeout=10).job)
        with lock:
            job_ids.add(job.job_id)
        if rng.random() < 0.15:
            try:
                retried(
                    lambda: s.CancelJob(
                        parser_service_pb2.CancelJobRequest(job_id=job.job_id), timeout=10
                    )
                )
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err  # ended already

    def create_batch(index: int) -> None:
        s = rng.choice(stubs)
        files = [
            parser_service_pb2.BatchFile(file_name=f"b{index}-{i}.pdf", content=content)
            for i, content in enumerate(rng.sample(contents, rng.randint(3, 5)))
        ]
        request = parser_service_pb2.CreateBatchRequest(files=files, request_id=uuid.uuid4().hex)
        batch = retried(lambda: s.CreateBatch(request, timeout=20).batch)
        assert len(batch.jobs) == batch.total == len(files)
        with lock:
            batch_ids.add(batch.batch_id)
            job_ids.update(job.job_id for job in batch.jobs)

    started = time.monotonic()
    isolated_proxy.randomize(drop_p=0.06, delay_p=0.06, delay_s=LATE_S, match=service_write, seed=7)
    tasks: list[Callable[[], None]] = [lambda i=i: submit(i) for i in range(JOBS + JOBS // 5)]
    tasks += [lambda i=i: create_batch(i) for i in range(BATCHES)]
    rng.shuffle(tasks)
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        for future in [pool.submit(task) for task in tasks]:
            future.result()
    # Keep faulting while the work drains, until each kind fired often enough.
    eventually(
        lambda: min(isolated_proxy.fired.values()) >= MIN_FAULTS,
        300,
        f"{MIN_FAULTS} faults of each kind",
    )
    fired = dict(isolated_proxy.fired)
    isolated_proxy.calm()

    def record(s: parser_service_pb2_grpc.ParserServiceStub, job_id: str) -> job_pb2.Job:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        return retried(lambda: s.GetStatus(request, timeout=10).job)

    s = stubs[0]
    ended = {job_pb2.STATE_SUCCEEDED, job_pb2.STATE_FAILED, job_pb2.STATE_CANCELLED}
    eventually(lambda: all(record(s, j).state in ended for j in job_ids), 240, "every job ended")
    client = redis.Redis.from_url(isolated_redis.url)
    records = [
        client.hgetall(key)
        for key in client.scan_iter(match="docparse:test:job:*", count=1000)
        if key.count(b":") == 3  # the record itself, not one of its {job}:<part> keys
    ]
    zombies = [r[b"job_id"] for r in records if r[b"state"].decode() not in TERMINAL]
    eventually(lambda: client.zcard("docparse:test:pending") == 0, 60, "pending confirmed")

    missing_results = []
    for job_id in job_ids:
        job = record(s, job_id)
        if job.state != job_pb2.STATE_SUCCEEDED:
            continue
        request = parser_service_pb2.GetResultRequest(job_id=job_id)
        try:
            chunks = retried(lambda r=request: list(s.GetResult(r, timeout=30)))
            data = b"".join(chunk.chunk for chunk in chunks)
            if hashlib.sha256(data).hexdigest() != job.result.sha256:
                missing_results.append(job_id)
        except grpc.RpcError:
            missing_results.append(job_id)

    broken_batches = []
    for batch_id in batch_ids:
        request = parser_service_pb2.GetBatchRequest(batch_id=batch_id)
        batch = retried(lambda r=request: s.GetBatch(r, timeout=10).batch)
        counted = batch.succeeded + batch.failed + batch.cancelled
        if not (batch.completed == batch.total == counted == len(batch.jobs)) or any(
            job.state not in ended for job in batch.jobs
        ):
            broken_batches.append(batch_id)

    log.stop.set()
    log.join(5)
    regressions = [j for j, versions in log.versions.items() if versions != sorted(set(versions))]
    twice = [j for j, n in log.terminal.items() if n != 1]

    # Identical uploads afterwards complete.
    again = [
        retried(
            lambda c=c: (
                s.SubmitJob(
                    parser_service_pb2.SubmitJobRequest(file_name="again.pdf", content=c),
                    timeout=10,
                ).job
            )
        )
        for c in contents[:5]
    ]
    eventually(
        lambda: all(record(s, j.job_id).state == job_pb2.STATE_SUCCEEDED for j in again),
        120,
        "repeated uploads succeed",
    )
    states = [record(s, j).state for j in job_ids]
    print(
        f"\nlost-reply run: {len(job_ids)} jobs ({len(batch_ids)} batches), faults {fired}, "
        f"{time.monotonic() - started:.0f} s; "
        f"succeeded={states.count(job_pb2.STATE_SUCCEEDED)} "
        f"failed={states.count(job_pb2.STATE_FAILED)} "
        f"cancelled={states.count(job_pb2.STATE_CANCELLED)}; zombies={len(zombies)} "
        f"missing_results={len(missing_results)} broken_batches={len(broken_batches)} "
        f"version_regressions={len(regressions)} ended_twice={len(twice)}"
    )
    failed = [record(s, j) for j in job_ids if record(s, j).state == job_pb2.STATE_FAILED]
    client.close()
    for channel in channels:
        channel.close()
    assert min(fired.values()) >= MIN_FAULTS and len(job_ids) >= JOBS
    assert zombies == [] and missing_results == [] and broken_batches == []
    assert regressions == [] and twice == [], {  # what each such job published, in order
        j: log.versions[j] for j in [*regressions, *twice]
    }
    assert not failed, [(j.job_id, j.error.reason, j.error.message) for j in failed]
