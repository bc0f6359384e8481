"""Soak: thousands of jobs in bursts over 4 replicas while workers are killed every few seconds.
Every job ends exactly once, results match the SUCCEEDED jobs one for one, and once the
retention window has passed Redis holds only tombstones of them.

The killer kills a replica only while it runs a parse (one of its parse children is alive), and
counts a kill only when a job that child parsed is still not terminal once the replica is dead:
at least MIN_KILLS such kills, each such job run again and ended exactly once.

SOAK_JOBS sets the number of jobs (default 300; the acceptance run uses 2000). SOAK_KILLER=off
disables the killer, only to see the test fail without kills."""

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
from parser_svc.state.keys import Keys
from tests.conftest import make_stack
from tests.helpers import eventually, make_pdf

JOBS = int(os.environ.get("SOAK_JOBS", "300"))
BURST = 100
RETENTION_S = 30
KILL_EVERY_S = 2.0
MAX_DOWN = 2  # of the 4 replicas
MIN_KILLS = max(3, JOBS // 100)
MAX_KILLS = 2 * MIN_KILLS  # then the jobs finish at the pace of a run without kills
KILLER_ON = os.environ.get("SOAK_KILLER", "on") != "off"
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
        self.attempts: dict[str, int] = {}
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
                    self.attempts[record["job_id"]] = int(record.get("attempt") or 0)


def running_parses(server_pid: int) -> dict[int, str]:
    """The parse children of a parser_svc process (forked with CLONE_PARENT or spawned, they
    are its own children) and the job each reads: {child pid: job_id}."""
    found: dict[int, str] = {}
    pids: list[int] = []
    for task in Path(f"/proc/{server_pid}/task").glob("*"):  # each thread's children
        try:
            pids += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    for pid in pids:
        try:  # python -m parser_svc.child.parse_child TYPE INPUT OUTPUT CPU_S MEMORY_MB
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except (OSError, UnicodeDecodeError):
            continue  # it ended meanwhile
        inputs = [arg for arg in args if "/inputs/" in arg]
        if any(arg.endswith(".parse_child") for arg in args) and inputs:
            found[pid] = Path(inputs[0].strip()).name
    return found


class Killer(threading.Thread):
    """Every KILL_EVERY_S, SIGKILLs a parser_svc replica that is running a parse and starts it
    again in the background (a start takes seconds on a loaded machine), while at most
    MAX_DOWN replicas are down, MAX_KILLS times. `interrupted` holds, per kill, the jobs the
    dead replica was parsing that were still not terminal after it died, with the attempt they
    were on."""

    def __init__(self, stack: LocalStack) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.kills = 0
        self.interrupted: list[dict[str, int]] = []
        self.stop = threading.Event()
        self.rng = random.Random(7)
        self.client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
        self.keys = Keys("test")
        self.restarts: dict[int, threading.Thread] = {}  # by replica index

    def run(self) -> None:
        while self.kills < MAX_KILLS and not self.stop.wait(KILL_EVERY_S):
            while not self.stop.is_set():  # until some replica that is up is parsing
                up = [i for i in range(len(self.stack.parsers)) if not self._restarting(i)]
                if len(self.stack.parsers) - len(up) < MAX_DOWN:
                    self.rng.shuffle(up)
                    busy = ((i, running_parses(self.stack.parsers[i].pid)) for i in up)
                    victim, jobs = next(((i, j) for i, j in busy if j), (None, {}))
                    if victim is not None:
                        self._kill(victim, set(jobs.values()))
                        break
                time.sleep(0.01)
        for restart in self.restarts.values():
            restart.join()

    def _restarting(self, index: int) -> bool:
        restart = self.restarts.get(index)
        return restart is not None and restart.is_alive()

    def _kill(self, index: int, jobs: set[str]) -> None:
        victim = self.stack.parsers[index]
        victim.signal(signal.SIGKILL)
        assert victim.proc is not None
        victim.proc.wait()
        self.kills += 1
        # The replica wrote nothing after it died: a job it was parsing that is not terminal now
        # was interrupted mid-parse.
        records = {job: self.client.hmget(self.keys.job(job), "state", "attempt") for job in jobs}
        running = {job: int(r[1] or 0) for job, r in records.items() if r[0] not in TERMINAL}
        if running:
            self.interrupted.append(running)
        restart = threading.Thread(target=self.stack.restart, args=(victim,), daemon=True)
        restart.start()
        self.restarts[index] = restart


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
    if KILLER_ON:
        killer.start()
    try:
        # Submit straight to the replicas (the killer takes them down) and through the gateway.
        ids = asyncio.run(_submit_all(stack.parser_addresses + stack.gateway_addresses))
        assert len(set(ids)) == JOBS
        eventually(lambda: len(counter.terminal) >= JOBS, 1200, "every job to end")
    finally:
        killer.stop.set()
        if KILLER_ON:
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
    interrupted = {job: attempt for kill in killer.interrupted for job, attempt in kill.items()}
    print(
        f"\nsoak: {JOBS} jobs, {killer.kills} kills, {len(killer.interrupted)} during a parse"
        f" ({len(interrupted)} jobs interrupted), {elapsed:.0f} s, outcomes {dict(outcomes)}"
    )
    assert len(killer.interrupted) >= MIN_KILLS, (
        f"{len(killer.interrupted)} kills during a running parse (of {killer.kills}),"
        f" at least {MIN_KILLS} expected"
    )
    # Each interrupted job ran again on a later attempt (or ran out of attempts) and ended once.
    for job, attempt in interrupted.items():
        assert counter.terminal[job] == 1, (job, counter.terminal[job])
        assert counter.attempts[job] > attempt or counter.states[job] == "FAILED", (job, attempt)

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
