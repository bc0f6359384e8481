"""Failover without lost jobs: a Sentinel-guarded primary with two replicas (so the
promoted one still has a replica to WAIT for) and a Sentinel trio, all real redis-server
processes, each refusing writes as a primary without a replica (`min-replicas-to-write 1`, what
the operations guide asks for); a stack of 2 parser_svc replicas and a gateway on the
redis+sentinel:// URL with DOCPARSE_REDIS_MIN_REPLICAS_ACK=1. 300 jobs are submitted (each
with its request_id; the SDK retries UNAVAILABLE with the same one) while watchers record every
version of a sample, and the primary is SIGKILLed mid-run. Sentinel promotes a replica; the
stack follows it by itself. Every job ends SUCCEEDED exactly once with a readable result, no
watcher sees a version go back or a terminal record followed by anything, and no request_id
made two jobs.

A second test pins what the run may or may not hit: a wake-up marker the failover lost (BullMQ
wakes an idle worker with it) costs one idle wait, never the job."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
from bullmq import Worker

from docparse.client import Client
from docparse.local.embedded_redis import EmbeddedRedis
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2
from docparse.waiting import TERMINAL
from parser_svc.settings import Settings
from parser_svc.state.keys import Keys
from parser_svc.state.queue_store import bullmq_options
from parser_svc.work.queue import JobQueue
from tests.conftest import make_stack
from tests.helpers import Recorder, eventually, make_pdf
from tests.redis_servers import SentinelSet, sentinel_set

JOBS = 300
WATCHED = range(0, JOBS, 5)  # every fifth job is watched from its submit to its end
KILL_AFTER = 100  # submitted jobs before the primary dies (and some ended): most not


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[SentinelSet]:
    with sentinel_set(
        tmp_path / "redis",
        replicas=2,
        down_after_ms=1000,
        failover_timeout_ms=5000,
        min_replicas_to_write=1,
    ) as running:
        yield running


# Every create and terminal write waits for a replica; the sweeper repairs a lost queue write
# within seconds; pages are slow enough that the kill finds parses running.
STACK_ENV = {
    "DOCPARSE_REDIS_MIN_REPLICAS_ACK": "1",
    "DOCPARSE_PARSE_PAGE_DELAY_MS": "100",
    "DOCPARSE_LOCK_DURATION_MS": "5000",
    "DOCPARSE_SWEEP_INTERVAL_S": "1",
    "DOCPARSE_SWEEP_ENQUEUE_AFTER_S": "3",
}


@pytest.fixture
def stack(tmp_path: Path, servers: SentinelSet) -> Iterator[LocalStack]:
    options = {"replicas": 2, "gateways": 1, "redis_url": servers.url, "extra_env": STACK_ENV}
    with make_stack(tmp_path / "stack", **options) as running:
        yield running


def job_keys(port: int) -> list[str]:
    """The job records in the Redis on `port` (not their results, tombstones or channels)."""
    with redis.Redis(port=port, decode_responses=True) as client:
        found = client.scan_iter(match=f"{Keys('test').job_key_prefix}*", count=1000)
        return [key for key in found if key.endswith("}")]


def ended_watched(recorders: dict[int, Recorder]) -> int:
    return sum(any(job.state in TERMINAL for job in r.records) for r in list(recorders.values()))


def test_a_primary_killed_mid_run_loses_no_job(stack: LocalStack, servers: SentinelSet) -> None:
    gateway = stack.gateway_addresses[0]
    documents = [make_pdf(1, f"failover {i}") for i in range(JOBS)]
    submitted: dict[int, str] = {}
    recorders: dict[int, Recorder] = {}
    enough = threading.Event()

    def submit(index: int) -> None:
        with Client(gateway) as client:
            job = client.submit(f"{index}.pdf", documents[index], request_id=f"req-{index}").job
        submitted[index] = job.job_id
        if index in WATCHED:
            recorders[index] = Recorder(gateway, job.job_id)
        if len(submitted) >= KILL_AFTER:
            enough.set()

    old_primary = servers.primary
    with ThreadPoolExecutor(8) as pool:
        submits = [pool.submit(submit, index) for index in range(JOBS)]
        assert enough.wait(60), f"{KILL_AFTER} submits before the kill"
        eventually(lambda: ended_watched(recorders) >= 5, 60, "5 watched jobs ended")
        old_primary.proc.kill()  # SIGKILL: whatever it had not sent to a replica is gone
        old_primary.proc.wait()
        for done in submits:
            done.result()  # each submit ended with a job (the SDK retried through the failover)

    # Sentinel promoted a replica, and the stack works on it.
    new_port = eventually(
        lambda: (port := servers.primary_port()) != old_primary.port and port, 30, "a promotion"
    )
    assert new_port in {replica.port for replica in servers.replicas}

    finals = {index: recorder.final(120) for index, recorder in recorders.items()}
    with Client(gateway) as client:
        ended = {index: client.wait(job_id) for index, job_id in submitted.items()}
        for index, job in ended.items():
            assert job.state == job_pb2.STATE_SUCCEEDED, (index, job)
            package = client.result(job.job_id)
            assert [page.number for page in package.pages] == [1]
            assert package.pages[0].text.startswith(f"failover {index} 1 of 1")
        # No request_id made a second job: a repeat of each answers with the job it made.
        for index in range(JOBS):
            again = client.submit(f"{index}.pdf", documents[index], request_id=f"req-{index}")
            assert again.job.job_id == submitted[index]
        # Nothing moved after the end: each record reads the terminal version it ended with.
        for index, final in finals.items():
            assert client.status(submitted[index]).job.version == final.version
    assert len(set(submitted.values())) == JOBS
    assert len(job_keys(new_port)) == JOBS
    for recorder in recorders.values():
        recorder.assert_ends_once()


async def until(check: Callable[[], object], seconds: float, what: str) -> None:
    """`eventually` off the event loop, which goes on serving the worker meanwhile."""
    await asyncio.to_thread(eventually, check, seconds, what)


async def test_a_lost_wake_up_costs_one_idle_wait_not_the_job(redis_server: EmbeddedRedis) -> None:
    """An idle worker blocks (BZPOPMIN, 5 s) on the queue's marker, and looks at the wait list
    whenever the wait ends. Here another client, blocked first, takes the marker of a new job
    (as a wait whose reply died with a primary does): the worker must still take the job when
    its wait times out. Its reads must outlast the wait for that (redis-py's default socket
    timeout, 5 s, cut every idle wait short and the job waited for the next submit)."""
    settings = Settings(redis_url=redis_server.url, env=f"m{uuid.uuid4().hex[:8]}")
    marker = f"{Keys(settings.env).queue_prefix}:{settings.queue_name}:marker"
    probe = redis.Redis(port=redis_server.port)
    blocked = probe.info("clients")["blocked_clients"]
    thief = aioredis.Redis(port=redis_server.port)
    stolen = asyncio.ensure_future(thief.bzpopmin(marker, 30))
    await until(lambda: probe.info("clients")["blocked_clients"] > blocked, 10, "the thief waits")
    taken: list[str] = []

    async def process(job: object, token: str) -> str:
        taken.append(str(getattr(job, "id", "")))
        return "ok"

    worker = Worker(settings.queue_name, process, {**bullmq_options(settings), "concurrency": 1})
    queue = JobQueue(settings)
    try:
        await until(
            lambda: probe.info("clients")["blocked_clients"] > blocked + 1, 10, "the worker idle"
        )
        await queue.enqueue("lost-wake-up")
        assert await stolen  # the marker went to the thief
        await until(lambda: taken == ["lost-wake-up"], 15, "the worker took the job")
    finally:
        await worker.close(force=True)
        await queue.close()
        await thief.aclose()
        probe.close()
