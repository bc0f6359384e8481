"""Soak: thousands of jobs in bursts over 4 replicas while workers are killed every few seconds.
Every job ends exactly once, results match the SUCCEEDED jobs one for one, and once the
retention window has passed Redis holds only tombstones of them.

SOAK_JOBS sets the number of jobs (default 300; the acceptance run uses 2000)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import redis

from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2, parser_service_pb2_grpc
from tests.conftest import make_stack
from tests.helpers import eventually, make_pdf

JOBS = int(os.environ.get("SOAK_JOBS", "300"))
BURST = 100
RETENTION_S = 30
KILL_EVERY_S = 4.0
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("soak"),
        replicas=4,
        gateways=1,
        extra_env={
            "DOCPARSE_RETENTION_S": str(RETENTION_S),
            "DOCPARSE_LOCK_DURATION_MS": "3000",
            "DOCPARSE_INLINE_RESULT_MAX_BYTES": "0",
            "DOCPARSE_RETRY_BACKOFF_MS": "200",
            "DOCPARSE_MAX_ATTEMPTS": "5",
        },
    ) as running:
        yield running


class TerminalCounter(threading.Thread):
    """Counts terminal records per job straight from the job channels (pattern subscription)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(url)
        self.pubsub = self.client.pubsub()
        self.pubsub.psubscribe("docparse:test:job:*:events")
        self.terminal: Counter[str] = Counter()
        self.states: dict[str, str] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                message = self.pubsub.get_message(timeout=0.5)
            except redis.ConnectionError:
                return  # the stack is going away; the test reads what was counted
            if message and message["type"] == "pmessage":
                record = json.loads(message["data"])
                if record["state"] in TERMINAL:
                    self.terminal[record["job_id"]] += 1
                    self.states[record["job_id"]] = record["state"]


class Killer(threading.Thread):
    """SIGKILLs a random parser_svc replica every few seconds and starts it again."""

    def __init__(self, stack: LocalStack) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.kills = 0
        self.stop = threading.Event()
        self.rng = random.Random(7)

    def run(self) -> None:
        while not self.stop.wait(KILL_EVERY_S):
            victim = self.rng.choice(self.stack.parsers)
            victim.signal(signal.SIGKILL)
            self.kills += 1
            self.stack.restart(victim)


async def _submit_all(addresses: list[str]) -> list[str]:
    channels = [grpc.aio.insecure_channel(address) for address in addresses]
    stubs = [parser_service_pb2_grpc.ParserServiceStub(channel) for channel in channels]
    document = make_pdf(1, "soak")
    ids: list[str] = []

    async def one(index: int) -> str:
        # Unique bytes per job, so content dedupe does not fold them together.
        content = document + f"\n% soak {index}\n".encode()
        request = parser_service_pb2.SubmitJobRequest(file_name=f"{index}.pdf", content=content)
        for attempt in range(20):  # a replica may be down right now: retry UNAVAILABLE only
            stub = stubs[(index + attempt) % len(stubs)]
            try:
                return (await stub.SubmitJob(request, timeout=10, wait_for_ready=False)).job.job_id
            except grpc.aio.AioRpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                await asyncio.sleep(0.2)
        raise AssertionError(f"job {index} could not be submitted")

    for start in range(0, JOBS, BURST):
        ids += await asyncio.gather(*(one(i) for i in range(start, min(JOBS, start + BURST))))
    for channel in channels:
        await channel.close()
    return ids


@pytest.mark.timeout(300 + JOBS)
def test_soak_with_killed_workers(stack: LocalStack) -> None:
    counter = TerminalCounter(stack.redis_url)
    counter.start()
    killer = Killer(stack)
    started = time.monotonic()
    killer.start()
    try:
        # Submit straight to the replicas (the killer takes them down) and through the gateway.
        ids = asyncio.run(_submit_all(stack.parser_addresses + stack.gateway_addresses))
        assert len(set(ids)) == JOBS
        eventually(lambda: len(counter.terminal) >= JOBS, 1200, "every job to end")
    finally:
        killer.stop.set()
        killer.join()
    elapsed = time.monotonic() - started
    for child in stack.parsers:
        if not child.alive():
            stack.restart(child)
    counter.stop.set()
    counter.join()

    assert set(counter.terminal) == set(ids)
    repeated = {job: n for job, n in counter.terminal.items() if n != 1}
    assert not repeated, f"jobs that ended more than once: {repeated}"
    outcomes = Counter(counter.states.values())
    results_dir = stack.data_dir / "blobs" / "test" / "results"
    # One result per SUCCEEDED job, none for others; the sweeper already deleted those whose
    # retention ended during the run (checked to the end below).
    succeeded = {job for job, state in counter.states.items() if state == "SUCCEEDED"}
    per_job = Counter(path.parent.name for path in _result_files(results_dir))
    assert set(per_job) <= succeeded and max(per_job.values(), default=1) == 1, per_job
    assert outcomes["SUCCEEDED"] >= JOBS * 0.99, outcomes  # a few may be poisoned by kills
    print(f"\nsoak: {JOBS} jobs, {killer.kills} kills, {elapsed:.0f} s, outcomes {dict(outcomes)}")

    client = redis.Redis.from_url(stack.redis_url)

    def only_tombstones_left() -> bool:
        keys = [k.decode() for k in client.scan_iter(match="docparse:test:job:*", count=5000)]
        return bool(keys) and all(k.endswith(":tomb") for k in keys)

    eventually(only_tombstones_left, RETENTION_S + 60, "records to expire")
    tombs = list(client.scan_iter(match="docparse:test:job:*:tomb", count=5000))
    assert len(tombs) == JOBS
    assert not list(client.scan_iter(match="docparse:test:active:*"))
    client.close()
    # The blob lifecycle: with every record expired, the sweeper leaves no result on the volume.
    eventually(lambda: not _result_files(results_dir), 60, "results deleted")


def _result_files(results_dir: Path) -> list[Path]:
    """The stored results; the sweeper may delete folders while this walks (os.walk skips
    what vanished)."""
    return [
        Path(folder) / name
        for folder, _, names in os.walk(results_dir)
        for name in names
        if name.endswith(".pb.gz")
    ]
