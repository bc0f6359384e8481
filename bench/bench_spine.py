"""Spine benchmark (issue 2): GetStatus throughput/latency and WatchJob delivery latency.

    .venv/bin/python bench/bench_spine.py            # full run, a few minutes
    .venv/bin/python bench/bench_spine.py --quick    # short smoke run

What it measures, all in one run on this machine, everything on 127.0.0.1:

1. GetStatus at 50 concurrent callers (grpc.aio client, coroutines spread over a few channels,
   fixed duration after a warm-up) against
     bare     a grpc.aio server in its own process whose GetStatus handler returns pre-serialized
              bytes (same response size, no Redis, no interceptor: the floor of grpc.aio itself),
     direct   one parser_svc replica, GetStatus of one SUCCEEDED job,
     gateway  one gateway in front of that replica.
   The three targets are measured in interleaved rounds; ratios are taken within a round.
2. WatchJob delivery with N (1,000) open streams on ONE parser_svc replica. Watch clients run in
   separate processes (one process per `--watch-clients`, several channels each); each stream
   watches its own job. This process then writes state straight into Redis through
   parser_svc.store.JobStore (claim, progress, ..., finish, with the fencing token) at a fixed
   rate; latency = client receive time - time the Lua write returned ("commit acknowledged")
   and, more conservatively, - time the write was issued. Every stream must receive its
   terminal record. Next to it, raw Redis pub/sub on the same Redis: a redis-py asyncio
   subscriber process on one connection holding N channels, publishes at the same rate.
Timestamps that cross processes use time.time_ns() (CLOCK_REALTIME, one machine).

Results: a table on stdout and var/bench/spine.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import math
import os
import platform
import random
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
import redis.asyncio as aioredis

from docparse.local.embedded_redis import free_port
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from docparse_server import loops
from gateway.settings import GatewaySettings
from parser_svc.lua_scripts import WriteResult
from parser_svc.settings import Settings
from parser_svc.store import JobStore, connect

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parent.parent
OUT_DIR = ROOT / "var" / "bench"
SERVICE = "docparse.v1.ParserService"
ENV_NAME = "bench"
FENCE = "bench-token:0"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Separate TCP connections per channel (grpc otherwise shares subchannels between channels).
CHANNEL_OPTIONS: list[tuple[str, Any]] = [("grpc.use_local_subchannel_pool", 1)]

TIMELINE_S = 0.5
GOALS = {
    "direct_over_bare": 0.60,
    "gateway_over_bare": 0.30,
    "watch_p99_ms": 20.0,
    "watch_missed_terminal": 0,
}


# ---------------------------------------------------------------------------------------------
# Small helpers


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = min(max(1, math.ceil(q / 100 * len(ordered))), len(ordered))
    return ordered[rank - 1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_snapshot(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def machine_busy_seconds() -> float:
    """CPU time all CPUs spent busy so far (user, nice, system, irq, softirq, steal)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def make_pdf(pages: int) -> bytes:
    import pymupdf

    doc = pymupdf.open()  # type: ignore[no-untyped-call]
    for number in range(1, pages + 1):
        page = doc.new_page()
        page.insert_text((72, 72), f"benchmark page {number} of {pages}", fontsize=14)
    data: bytes = doc.tobytes()  # type: ignore[no-untyped-call]
    return data


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Part 1: GetStatus load


@dataclass
class LoadResult:
    """One measured slice of one target."""

    target: str
    cycle: int
    calls: int
    errors: int
    seconds: float
    calls_per_s: float
    # CPU seconds each process spent during the slice.
    cpu_s: dict[str, float] = field(default_factory=dict)
    # Cores busy with anything but the benchmark's processes during the slice (other tenants,
    # kernel softirq work): the noise this machine adds.
    other_cores: float = 0.0


class LoadClient:
    """`concurrency` callers on their own channels to one target. They call GetStatus back to
    back while the client is active and wait while it is not, so targets can take turns."""

    def __init__(self, name: str, address: str, job_id: str, concurrency: int, channels: int):
        self.name = name
        self._address = address
        self._request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        self._concurrency = concurrency
        self._channel_count = channels
        self._channels: list[grpc.aio.Channel] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._active = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._inflight = 0
        self._closed = False
        self._recording = False
        self._latencies: list[int] = []
        self._errors = 0
        self.all_latencies_ms: list[float] = []

    async def start(self) -> None:
        self._channels = [
            grpc.aio.insecure_channel(self._address, options=CHANNEL_OPTIONS)
            for _ in range(self._channel_count)
        ]
        async with asyncio.timeout(10):
            await asyncio.gather(*(c.channel_ready() for c in self._channels))
        stubs = [parser_service_pb2_grpc.ParserServiceStub(c) for c in self._channels]
        check = await stubs[0].GetStatus(self._request, timeout=5)
        if check.job.state != job_pb2.STATE_SUCCEEDED:
            raise RuntimeError(f"{self.name}: GetStatus answered {check.job!r}")
        self._tasks = [
            asyncio.create_task(self._caller(stubs[i % len(stubs)]))
            for i in range(self._concurrency)
        ]

    async def _caller(self, stub: parser_service_pb2_grpc.ParserServiceAsyncStub) -> None:
        while True:
            await self._active.wait()
            if self._closed:
                return
            self._inflight += 1
            self._idle.clear()
            t0 = time.perf_counter_ns()
            try:
                await stub.GetStatus(self._request, timeout=10)
                ok = True
            except grpc.aio.AioRpcError:
                ok = False
            elapsed = time.perf_counter_ns() - t0
            if self._recording:
                if ok:
                    self._latencies.append(elapsed)
                else:
                    self._errors += 1
            self._inflight -= 1
            if self._inflight == 0 and not self._active.is_set():
                self._idle.set()

    async def run(
        self, seconds: float, *, ramp_s: float, pids: dict[str, int], cycle: int
    ) -> LoadResult:
        """Calls for `ramp_s` unrecorded (steady state), then records `seconds`; then stops and
        waits for the calls in flight, so the next target starts on a quiet machine."""
        self._latencies, self._errors = [], 0
        self._active.set()
        await asyncio.sleep(ramp_s)
        cpu0, busy0 = cpu_snapshot(pids), machine_busy_seconds()
        start = time.perf_counter()
        self._recording = True
        await asyncio.sleep(seconds)
        self._recording = False
        elapsed = time.perf_counter() - start
        busy1, cpu1 = machine_busy_seconds(), cpu_snapshot(pids)
        self._active.clear()
        if self._inflight:
            await self._idle.wait()
        cpu_s = {name: cpu1[name] - cpu0[name] for name in pids}
        calls = len(self._latencies)
        self.all_latencies_ms += [ns / 1e6 for ns in self._latencies]
        return LoadResult(
            target=self.name,
            cycle=cycle,
            calls=calls,
            errors=self._errors,
            seconds=round(elapsed, 3),
            calls_per_s=round(calls / elapsed, 1),
            cpu_s={name: round(v, 4) for name, v in cpu_s.items()},
            other_cores=round((busy1 - busy0 - sum(cpu_s.values())) / elapsed, 2),
        )

    async def close(self) -> None:
        self._closed = True
        self._active.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self._channels))


async def serve_bare(port: int, response: bytes) -> None:
    """A grpc.aio server that answers GetStatus with fixed bytes and does nothing else."""

    async def get_status(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return response

    handler = grpc.method_handlers_generic_handler(
        SERVICE, {"GetStatus": grpc.unary_unary_rpc_method_handler(get_status)}
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("READY", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), stop.set)  # parent closes stdin (or exits): stop
    await stop.wait()
    await server.stop(1)


async def start_child(*args: str) -> asyncio.subprocess.Process:
    """This script in an internal role, with stdin/stdout pipes; returns after it says READY."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(180):
            line = await proc.stdout.readline()
    except TimeoutError:
        proc.kill()
        raise
    if not line.startswith(b"READY"):
        proc.kill()
        raise RuntimeError(f"child {args[0]} did not start: {line!r}")
    return proc


async def stop_child(proc: asyncio.subprocess.Process, grace_s: float = 30.0) -> None:
    """Closing stdin tells a child to finish; it is killed if it does not."""
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
    try:
        async with asyncio.timeout(grace_s):
            await proc.wait()
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def bench_get_status(
    stacks: dict[str, LocalStack], jobs: dict[str, job_pb2.Job], args: argparse.Namespace
) -> tuple[list[LoadResult], dict[str, Any]]:
    """Targets: `bare` (grpc.aio on asyncio's loop: the floor the goals are counted from),
    `bare_uvloop` when uvloop is measured, and per stack "P+G" (parser_svc's event loop P,
    the gateway's G): `direct_P` (parser_svc; once per P) and `gateway_G_on_P`."""
    first = next(iter(jobs.values()))
    response = parser_service_pb2.GetStatusResponse(job=first).SerializeToString()
    pids: dict[str, int] = {"client": os.getpid()}
    involved: dict[str, list[str]] = {}
    addresses: dict[str, str] = {}
    job_of: dict[str, job_pb2.Job] = {}
    bares = []
    measured = {loop for config in stacks for loop in config.split("+")}
    for loop in ("asyncio", *(["uvloop"] if "uvloop" in measured else [])):
        port = free_port()
        name = "bare" if loop == "asyncio" else f"bare_{loop}"
        bare = await start_child(
            "_bare", "--port", str(port), "--response", response.hex(), "--loop", loop
        )
        bares.append(bare)
        pids[f"{name}_server"] = bare.pid
        involved[name] = ["client", f"{name}_server"]
        addresses[name] = f"127.0.0.1:{port}"
        job_of[name] = first
    for config, stack in stacks.items():
        assert stack.redis is not None and stack.redis.proc is not None
        parser_loop, gateway_loop = config.split("+")
        gateway, parser, redis = f"gateway[{config}]", f"parser_svc[{config}]", f"redis[{config}]"
        pids |= {
            gateway: stack.gateways[0].pid,
            parser: stack.parsers[0].pid,
            redis: stack.redis.proc.pid,
        }
        # The processes each target's calls go through (the others idle meanwhile).
        if f"direct_{parser_loop}" not in addresses:
            involved[f"direct_{parser_loop}"] = ["client", parser, redis]
            addresses[f"direct_{parser_loop}"] = stack.parser_addresses[0]
            job_of[f"direct_{parser_loop}"] = jobs[config]
        target = f"gateway_{gateway_loop}_on_{parser_loop}"
        involved[target] = ["client", gateway, parser, redis]
        addresses[target] = stack.gateway_addresses[0]
        job_of[target] = jobs[config]
    clients = [
        LoadClient(name, address, job_of[name].job_id, args.concurrency, args.channels)
        for name, address in addresses.items()
    ]
    slices: list[LoadResult] = []
    try:
        for client in clients:
            await client.start()
            await client.run(args.warmup, ramp_s=0.0, pids={}, cycle=0)  # warm-up
            client.all_latencies_ms.clear()
        for cycle in range(1, args.cycles + 1):
            shift = (cycle - 1) % len(clients)  # rotate the order to spread drift
            for client in clients[shift:] + clients[:shift]:
                result = await client.run(args.slice, ramp_s=0.2, pids=pids, cycle=cycle)
                slices.append(result)
            row = {r.target: r for r in slices if r.cycle == cycle}
            log(
                f"GetStatus cycle {cycle:2d}: "
                + "  ".join(
                    f"{t} {r.calls_per_s:6.0f}/s (other {r.other_cores:.2f})"
                    for t, r in row.items()
                )
            )
        summary = summarize_get_status(slices, clients, involved, default_loop(stacks))
    finally:
        for client in clients:
            await client.close()
        for bare in bares:
            await stop_child(bare)
    return slices, summary


def default_config() -> str:
    """parser_svc's and the gateway's default event loops, as "P+G"."""
    return "+".join(
        str(cls.model_fields["event_loop"].default) for cls in (Settings, GatewaySettings)
    )


def default_loop(stacks: dict[str, LocalStack]) -> str:
    """The stack the goals are judged on: the settings' defaults when they were measured."""
    return default_config() if default_config() in stacks else next(iter(stacks))


def summarize_get_status(
    slices: list[LoadResult],
    clients: list[LoadClient],
    involved: dict[str, list[str]],
    default: str,
) -> dict[str, Any]:
    summary: dict[str, Any] = {"default_loop": default}
    for client in clients:
        rows = [r for r in slices if r.target == client.name]
        calls = sum(r.calls for r in rows)
        seconds = sum(r.seconds for r in rows)
        cpu = {
            name: round(sum(r.cpu_s[name] for r in rows) / max(calls, 1) * 1e6, 1)
            for name in involved[client.name]
        }
        summary[client.name] = {
            "calls": calls,
            "errors": sum(r.errors for r in rows),
            "seconds": round(seconds, 2),
            "calls_per_s": round(calls / seconds, 1),
            "calls_per_s_median_slice": statistics.median(r.calls_per_s for r in rows),
            "p50_ms": round(percentile(client.all_latencies_ms, 50), 3),
            "p99_ms": round(percentile(client.all_latencies_ms, 99), 3),
            "cpu_us_per_call": cpu,
            "cpu_us_per_call_total": round(sum(cpu.values()), 1),
            "other_cores": statistics.median(r.other_cores for r in rows),
        }
    targets = [c.name for c in clients if c.name != "bare"]
    cycles = sorted({r.cycle for r in slices})
    ratios: dict[str, list[float]] = {f"{t}_over_bare": [] for t in targets}
    for cycle in cycles:
        row = {r.target: r.calls_per_s for r in slices if r.cycle == cycle}
        for t in targets:
            ratios[f"{t}_over_bare"].append(row[t] / row["bare"])
    # The goals' names: the targets of the default stack.
    parser_loop, gateway_loop = default.split("+")
    goal_targets = {
        "direct": f"direct_{parser_loop}",
        "gateway": f"gateway_{gateway_loop}_on_{parser_loop}",
    }
    for kind, target in goal_targets.items():
        ratios[f"{kind}_over_bare"] = ratios[f"{target}_over_bare"]
    summary["ratios_per_cycle"] = {k: [round(x, 3) for x in v] for k, v in ratios.items()}
    # The result: median over cycles of the ratio within a cycle (adjacent slices).
    summary["ratios_median"] = {k: round(statistics.median(v), 3) for k, v in ratios.items()}
    summary["ratios_of_totals"] = {
        f"{t}_over_bare": round(summary[t]["calls_per_s"] / summary["bare"]["calls_per_s"], 3)
        for t in targets
    }
    # What the ratio would be if CPU were the only limit (all processes share the 2 cores):
    # total CPU per call of bare over that of the target. Steadier than throughput when other
    # tenants steal CPU, but only an estimate.
    bare_cpu = summary["bare"]["cpu_us_per_call_total"]
    summary["cpu_cost_ratios"] = {
        f"{t}_over_bare": round(bare_cpu / summary[t]["cpu_us_per_call_total"], 3) for t in targets
    }
    for table in ("ratios_of_totals", "cpu_cost_ratios"):
        for kind, target in goal_targets.items():
            summary[table][f"{kind}_over_bare"] = summary[table][f"{target}_over_bare"]
    # uvloop against asyncio within each cycle: the same target, adjacent slices.
    pairs = {
        "bare": ("bare_uvloop", "bare"),
        "direct": ("direct_uvloop", "direct_asyncio"),
        # The gateway's own loop, in front of the same parser_svc loop.
        "gateway": ("gateway_uvloop_on_asyncio", "gateway_asyncio_on_asyncio"),
    }
    pairs = {k: v for k, v in pairs.items() if v[0] in summary and v[1] in summary}
    if pairs:
        per_cycle: dict[str, list[float]] = {k: [] for k in pairs}
        for cycle in cycles:
            row = {r.target: r.calls_per_s for r in slices if r.cycle == cycle}
            for kind, (uv, aio) in pairs.items():
                per_cycle[kind].append(round(row[uv] / row[aio], 3))
        summary["uvloop_over_asyncio_per_cycle"] = per_cycle
        summary["uvloop_over_asyncio_median"] = {
            k: round(statistics.median(v), 3) for k, v in per_cycle.items()
        }
        summary["uvloop_over_asyncio_cpu"] = {
            kind: round(
                summary[aio]["cpu_us_per_call_total"] / summary[uv]["cpu_us_per_call_total"], 3
            )
            for kind, (uv, aio) in pairs.items()
        }
    return summary


# ---------------------------------------------------------------------------------------------
# Part 2: WatchJob delivery and raw pub/sub


@contextlib.contextmanager
def stop_on_stdin_eof(event: asyncio.Event) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), event.set)
    try:
        yield
    finally:
        loop.remove_reader(sys.stdin.fileno())


async def watch_client(target: str, job_ids: list[str], channels: int) -> dict[str, Any]:
    """Opens one WatchJob stream per job id, says READY once each has its first record, then
    records every record's receive time until all streams end (or stdin closes)."""
    chans = [grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) for _ in range(channels)]
    stubs = [parser_service_pb2_grpc.ParserServiceStub(c) for c in chans]
    events: list[tuple[str, int, int, int]] = []
    errors: list[str] = []
    heartbeats = 0
    opened = finished = terminal = 0
    all_open, all_done, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
    opening = asyncio.Semaphore(100)  # clients arrive in waves, not 1,000 in one instant

    async def watch(index: int, job_id: str) -> None:
        nonlocal opened, finished, terminal, heartbeats
        held = True
        await opening.acquire()
        try:
            call = stubs[index % channels].WatchJob(
                parser_service_pb2.WatchJobRequest(job_id=job_id)
            )
            async for event in call:
                now = time.time_ns()
                if not event.HasField("job"):
                    heartbeats += 1
                    continue
                job = event.job
                events.append((job_id, job.version, job.state, now))
                if held:
                    held = False
                    opening.release()
                    opened += 1
                    if opened == len(job_ids):
                        all_open.set()
                if job.state == job_pb2.STATE_SUCCEEDED:
                    terminal += 1
        except grpc.aio.AioRpcError as err:
            errors.append(f"{job_id}: {err.code().name} {err.details()}")
        finally:
            if held:
                opening.release()
            finished += 1
            if finished == len(job_ids):
                all_done.set()
                all_open.set()

    started = time.perf_counter()
    tasks = [asyncio.create_task(watch(i, j)) for i, j in enumerate(job_ids)]
    with stop_on_stdin_eof(stop):
        await asyncio.wait(
            [asyncio.create_task(all_open.wait()), asyncio.create_task(stop.wait())],
            return_when=asyncio.FIRST_COMPLETED,
        )
        open_s = time.perf_counter() - started
        # The measuring process must not add pauses of its own: a full collection here took
        # 40-120 ms with 500 streams open and showed up as delivery latency.
        gc.collect()
        gc.disable()
        print(f"READY {opened} {open_s:.3f}", flush=True)
        await asyncio.wait(
            [asyncio.create_task(all_done.wait()), asyncio.create_task(stop.wait())],
            return_when=asyncio.FIRST_COMPLETED,
        )
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.gather(*(c.close() for c in chans))
    return {
        "streams": len(job_ids),
        "opened": opened,
        "open_s": open_s,
        "terminal": terminal,
        "heartbeats": heartbeats,
        "errors": errors,
        "events": events,
    }


async def pubsub_client(redis_url: str, channels: list[str], expected: int) -> dict[str, Any]:
    """Raw Redis pub/sub: one redis-py asyncio connection subscribed to every channel (as the
    EventHub does), JSON-decodes each message and records its receive time."""
    client = aioredis.Redis.from_url(redis_url)
    pubsub = client.pubsub()
    for i in range(0, len(channels), 200):
        await pubsub.subscribe(*channels[i : i + 200])
    confirmed = 0
    while confirmed < len(channels):
        message = await pubsub.get_message(timeout=5)
        if message is not None and message["type"] == "subscribe":
            confirmed += 1
    gc.collect()
    gc.disable()  # as in watch_client: no collector pauses in the measuring process
    print("READY", flush=True)
    received: list[tuple[int, int]] = []
    stop = asyncio.Event()

    async def read() -> None:
        while len(received) < expected:
            message = await pubsub.get_message(timeout=None)
            if message is None or message["type"] != "message":
                continue
            now = time.time_ns()
            received.append((json.loads(message["data"])["seq"], now))

    with stop_on_stdin_eof(stop):
        reader = asyncio.create_task(read())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait([reader, stopper], return_when=asyncio.FIRST_COMPLETED)
        reader.cancel()
        stopper.cancel()
    await pubsub.aclose()  # type: ignore[no-untyped-call]
    await client.aclose()
    return {"received": received}


async def paced(
    count: int, rate: float, op: Callable[[int], Awaitable[Any]]
) -> list[tuple[int, int, Any]]:
    """Runs op(0..count-1) one after another at `rate` per second; returns, for each, the
    wall-clock ns it was issued and acknowledged and what it returned."""
    out: list[tuple[int, int, Any]] = []
    gc.collect()
    gc.disable()  # a collector pause here would delay writes and skew their timestamps
    try:
        start = time.perf_counter()
        for i in range(count):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sent = time.time_ns()
            value = await op(i)
            out.append((sent, time.time_ns(), value))
    finally:
        gc.enable()
    return out


def latency_stats(samples_ms: list[float]) -> dict[str, float]:
    return {
        "n": len(samples_ms),
        "p50_ms": round(percentile(samples_ms, 50), 3),
        "p90_ms": round(percentile(samples_ms, 90), 3),
        "p99_ms": round(percentile(samples_ms, 99), 3),
        "max_ms": round(max(samples_ms), 3) if samples_ms else float("nan"),
    }


async def bench_pubsub(
    redis_url: str, args: argparse.Namespace, work: Path, redis_pid: dict[str, int] | None = None
) -> dict[str, Any]:
    channels = [f"docparse:{ENV_NAME}:rawbench:{{{i}}}:events" for i in range(args.streams)]
    names = work / "pubsub-channels.json"
    names.write_text(json.dumps(channels))
    count = args.streams * args.writes_per_job
    out = work / "pubsub.json"
    sub = await start_child(
        "_pubsub", "--redis-url", redis_url, "--expected", str(count), "--out", str(out),
        "--names", str(names),
    )  # fmt: skip
    # A payload of the size of a published job record.
    filler = "x" * 420
    order = [i % args.streams for i in range(count)]
    random.Random(1).shuffle(order)
    client = aioredis.Redis.from_url(redis_url)

    async def publish(i: int) -> int:
        payload = json.dumps({"seq": i, "filler": filler})
        return int(await client.publish(channels[order[i]], payload))

    pids = {"bench": os.getpid(), "subscriber": sub.pid, **(redis_pid or {})}
    cpu0, busy0, started = cpu_snapshot(pids), machine_busy_seconds(), time.perf_counter()
    try:
        sent = await paced(count, args.watch_rate, publish)
    finally:
        await client.aclose()
    elapsed = time.perf_counter() - started
    cpu_s = sum(cpu_snapshot(pids)[n] - cpu0[n] for n in pids)
    other_cores = (machine_busy_seconds() - busy0 - cpu_s) / elapsed
    await stop_child(sub, grace_s=15)
    received = json.loads(out.read_text())["received"]
    from_ack = [(t - sent[seq][1]) / 1e6 for seq, t in received]
    from_send = [(t - sent[seq][0]) / 1e6 for seq, t in received]
    return {
        "channels": args.streams,
        "messages": count,
        "received": len(received),
        "rate_per_s": args.watch_rate,
        "other_cores": round(other_cores, 2),
        "bench_cores": round(cpu_s / elapsed, 2),
        "from_ack": latency_stats(from_ack),
        "from_send": latency_stats(from_send),
    }


async def bench_watch(stack: LocalStack, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    settings = Settings(redis_url=stack.redis_url, env=ENV_NAME)
    client = connect(settings)
    store = JobStore(client, settings)
    job_ids = [uuid.uuid4().hex for _ in range(args.streams)]
    fields = {"file_name": "bench.pdf", "content_type": "pdf", "size_bytes": "1000"}
    for i in range(0, len(job_ids), 100):
        created = await asyncio.gather(*(store.create(j, fields) for j in job_ids[i : i + 100]))
        if any(c.status != "OK" for c in created):
            raise RuntimeError(f"job creation failed: {[c.status for c in created]}")

    target = stack.parser_addresses[0]
    groups = [job_ids[i :: args.watch_clients] for i in range(args.watch_clients)]
    outs = [work / f"watch-{i}.json" for i in range(len(groups))]
    started = time.perf_counter()
    clients = []
    try:
        for i, group in enumerate(groups):
            jobs_file = work / f"watch-{i}-jobs.json"
            jobs_file.write_text(json.dumps(group))
            child_args = ["--target", target, "--jobs", str(jobs_file), "--out", str(outs[i])]
            child_args += ["--channels", str(args.watch_channels)]
            clients.append(await start_child("_watch", *child_args))
        open_s = time.perf_counter() - started
        log(f"WatchJob: {args.streams} streams open in {open_s:.1f} s")

        # Writes: round k touches every job once, in a shuffled order, so each job's writes
        # are spread out and every write lands on an otherwise idle stream.
        progress_writes = args.writes_per_job - 2
        schedule: list[tuple[str, int]] = []
        rng = random.Random(2)
        for step in range(args.writes_per_job):
            order = list(job_ids)
            rng.shuffle(order)
            schedule += [(job_id, step) for job_id in order]

        async def write(i: int) -> WriteResult:
            job_id, step = schedule[i]
            if step == 0:
                return await store.claim(job_id, FENCE)
            if step <= progress_writes:
                return await store.progress(
                    job_id, FENCE, done=step, total=progress_writes + 1, stage="text"
                )
            return await store.finish(
                job_id,
                FENCE,
                "SUCCEEDED",
                {"res_size": 100, "res_sha256": "ab" * 32, "res_storage": "inline"},
            )

        assert stack.redis is not None and stack.redis.proc is not None
        pids = {
            "bench": os.getpid(),
            "parser_svc": stack.parsers[0].pid,
            "gateway": stack.gateways[0].pid,
            "redis": stack.redis.proc.pid,
            **{f"watch_client_{i}": proc.pid for i, proc in enumerate(clients)},
        }
        conns0 = await redis_connections(client)
        cpu0, busy0 = cpu_snapshot(pids), machine_busy_seconds()
        write_started = time.perf_counter()
        written = await paced(len(schedule), args.watch_rate, write)
        write_s = time.perf_counter() - write_started
        # Deliveries lag the last write by a few ms at most; the window covers the writes.
        cpu1, busy1 = cpu_snapshot(pids), machine_busy_seconds()
        cpu_s = {name: cpu1[name] - cpu0[name] for name in pids}
        other_cores = (busy1 - busy0 - sum(cpu_s.values())) / write_s
        conns1 = await redis_connections(client)
        for proc in clients:
            # Streams end by themselves after their terminal record; stdin EOF is the backstop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(20):
                    await proc.wait()
    finally:
        for proc in clients:
            await stop_child(proc, grace_s=20)
        await client.aclose()

    failed_writes = [r.status for _, _, r in written if not r.ok]
    commits = {
        (schedule[i][0], r.version): (sent, acked)
        for i, (sent, acked, r) in enumerate(written)
        if r.ok
    }
    from_ack: list[float] = []
    from_send: list[float] = []
    first_write = written[0][0] if written else 0
    buckets: dict[int, list[float]] = {}
    streams = opened = terminal = heartbeats = 0
    errors: list[str] = []
    open_times: list[float] = []
    seen: dict[str, list[int]] = {}
    for out in outs:
        data = json.loads(out.read_text())
        streams += data["streams"]
        opened += data["opened"]
        terminal += data["terminal"]
        heartbeats += data["heartbeats"]
        errors += data["errors"]
        open_times.append(data["open_s"])
        for job_id, version, _state, received in data["events"]:
            seen.setdefault(job_id, []).append(version)
            commit = commits.get((job_id, version))
            if commit is not None:
                from_send.append((received - commit[0]) / 1e6)
                from_ack.append((received - commit[1]) / 1e6)
                bucket = int((commit[1] - first_write) / 1e9 / TIMELINE_S)
                buckets.setdefault(bucket, []).append(from_ack[-1])
    out_of_order = sum(
        1 for versions in seen.values() if any(b <= a for a, b in itertools.pairwise(versions))
    )
    delivered = len(from_ack)
    return {
        "streams": streams,
        "opened": opened,
        "open_s": round(max(open_times), 2),
        "client_processes": args.watch_clients,
        "channels_per_client": args.watch_channels,
        "writes": len(schedule),
        "failed_writes": len(failed_writes),
        "failed_write_statuses": sorted(set(failed_writes)),
        "write_seconds": round(write_s, 2),
        "rate_per_s": args.watch_rate,
        "first_write_unix": round(first_write / 1e9, 3),
        "delivered": delivered,
        # Versions written but never sent on their stream (superseded by a later one): allowed
        # by §5 (full records), but each one is a delivery without a latency sample.
        "superseded": len(commits) - delivered,
        "missed_terminal": streams - terminal,
        "out_of_order_streams": out_of_order,
        "stream_errors": len(errors),
        "stream_error_samples": errors[:5],
        "heartbeats": heartbeats,
        "parser_svc_cores": round(cpu_s["parser_svc"] / write_s, 2),
        "parser_svc_cpu_us_per_record": round(cpu_s["parser_svc"] / max(delivered, 1) * 1e6, 1),
        "other_cores": round(other_cores, 2),
        # Cores the benchmark's own processes (writer, watch clients, Redis, parser_svc) used:
        # with `other_cores`, how full the machine was.
        "bench_cores": round(sum(cpu_s.values()) / write_s, 2),
        # New Redis connections accepted while the writes ran, and clients connected after
        # (parser_svc's pools + the watch hub + this process): pool growth under load shows here.
        "redis_new_connections": conns1[0] - conns0[0],
        "redis_connected_clients": conns1[1],
        "from_ack": latency_stats(from_ack),
        "from_send": latency_stats(from_send),
        # Delivery latency (from ack) by the time the write was made, TIMELINE_S buckets.
        "timeline": [
            {"t_s": round(b * TIMELINE_S, 2), **latency_stats(v)}
            for b, v in sorted(buckets.items())
        ],
    }


_SUMMED = {
    "messages", "received", "opened", "writes", "failed_writes", "delivered", "superseded",
    "missed_terminal", "out_of_order_streams", "stream_errors", "heartbeats",
    "redis_new_connections",
}  # fmt: skip
_MEDIAN = {
    "open_s", "write_seconds", "parser_svc_cores", "parser_svc_cpu_us_per_record",
    "other_cores", "bench_cores", "redis_connected_clients",
}  # fmt: skip


def combine_reps(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """Repetitions of the watch (or pub/sub) measurement as one: counts summed, latency
    percentiles and loads as the median over repetitions, plus a short line per repetition."""
    out: dict[str, Any] = {
        k: v for k, v in reps[0].items() if k not in ("timeline", "first_write_unix")
    }
    out["repetitions"] = len(reps)
    for key in _SUMMED & out.keys():
        out[key] = sum(r[key] for r in reps)
    for key in _MEDIAN & out.keys():
        out[key] = statistics.median(r[key] for r in reps)
    if "streams" in out:
        out["streams_total"] = sum(r["streams"] for r in reps)
        out["stream_error_samples"] = [e for r in reps for e in r["stream_error_samples"]][:5]
    for basis in ("from_ack", "from_send"):
        out[basis] = {
            stat: (
                sum(r[basis][stat] for r in reps)
                if stat == "n"
                else round(statistics.median(r[basis][stat] for r in reps), 3)
            )
            for stat in reps[0][basis]
        }
    out["per_rep"] = [
        {
            "p50_ms": r["from_ack"]["p50_ms"],
            "p99_ms": r["from_ack"]["p99_ms"],
            "max_ms": r["from_ack"]["max_ms"],
            "other_cores": r["other_cores"],
            "bench_cores": r["bench_cores"],
        }
        for r in reps
    ]
    return out


async def redis_connections(client: aioredis.Redis) -> tuple[int, int]:
    """(connections Redis has accepted so far, clients connected now)."""
    stats = await client.info("stats")
    clients = await client.info("clients")
    return int(stats["total_connections_received"]), int(clients["connected_clients"])


# ---------------------------------------------------------------------------------------------
# Orchestration and report


async def submit_succeeded_job(address: str) -> job_pb2.Job:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = parser_service_pb2_grpc.ParserServiceStub(channel)
        reply = await stub.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name="bench.pdf", content=make_pdf(3), wait_timeout_ms=60_000
            ),
            timeout=70,
        )
        job = reply.job
        if job.state != job_pb2.STATE_SUCCEEDED:
            raise RuntimeError(f"benchmark job did not succeed: {job!r}")
        return job


def fmt(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}"


def report(results: dict[str, Any]) -> str:
    lines: list[str] = []
    gs = results.get("get_status")
    if gs:
        cfg = results["config"]
        lines.append(
            f"GetStatus, {cfg['concurrency']} concurrent callers over {cfg['channels']} channels; "
            f"targets take turns in {cfg['slice_s']} s slices, {cfg['cycles']} cycles"
        )
        lines.append(
            f"  {'target':26s} {'calls/s':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'vs bare':>8s} "
            f"{'other':>6s}  CPU us/call by process"
        )
        ratio = {"bare": 1.0, **{k.removesuffix("_over_bare"): v
                                 for k, v in gs["ratios_median"].items()}}  # fmt: skip
        targets = [t for t in gs if isinstance(gs[t], dict) and "calls_per_s" in gs[t]]
        for target in targets:
            row = gs[target]
            cpu = " ".join(f"{k}={v:.0f}" for k, v in row["cpu_us_per_call"].items())
            if row["errors"]:
                cpu += f" ERRORS={row['errors']}"
            lines.append(
                f"  {target:26s} {row['calls_per_s']:9.0f} {fmt(row['p50_ms']):>8s} "
                f"{fmt(row['p99_ms']):>8s} {fmt(ratio[target]):>8s} {row['other_cores']:6.2f}  "
                f"{cpu} (total {row['cpu_us_per_call_total']:.0f})"
            )
        spread = {k: f"{min(v):.2f}..{max(v):.2f}" for k, v in gs["ratios_per_cycle"].items()}
        totals, cost = gs["ratios_of_totals"], gs["cpu_cost_ratios"]
        for key, name in (
            ("direct_over_bare", "direct/bare "),
            ("gateway_over_bare", "gateway/bare"),
        ):
            lines.append(
                f"  {name} median of cycles {gs['ratios_median'][key]:.3f} (cycles {spread[key]}), "
                f"of totals {totals[key]:.3f}, CPU-cost {cost[key]:.3f}; goal >= {GOALS[key]}"
            )
        lines.append(
            f"  goals judged on the {gs['default_loop']} stack (parser_svc + gateway loops, "
            "the settings' defaults)"
        )
        if "uvloop_over_asyncio_median" in gs:
            for kind, median in gs["uvloop_over_asyncio_median"].items():
                cycles = gs["uvloop_over_asyncio_per_cycle"][kind]
                lines.append(
                    f"  uvloop/asyncio {kind:8s} median of cycles {median:.3f} "
                    f"(cycles {min(cycles):.2f}..{max(cycles):.2f}), "
                    f"CPU-cost {gs['uvloop_over_asyncio_cpu'][kind]:.3f}"
                )
        lines.append(
            "  vs bare = median over cycles of the ratio within a cycle; CPU-cost = bare's CPU "
            "per call over the target's (all processes involved)"
        )
        lines.append(
            "  other = cores busy outside the benchmark's processes (other tenants, softirq)"
        )
    watch = results.get("watch")
    raw = results.get("pubsub")
    if watch and raw:
        lines.append("")
        lines.append(
            f"Delivery latency, {watch['streams']} streams / channels, "
            f"{watch['writes'] // watch['repetitions']} writes at {watch['rate_per_s']:.0f}/s, "
            f"{watch['repetitions']} repetitions (n summed, the rest medians of repetitions)"
        )
        lines.append(
            f"  {'path':26s} {'n':>6s} {'p50 ms':>8s} {'p90 ms':>8s} {'p99 ms':>8s} {'max ms':>8s}"
        )
        for name, data in (("WatchJob (from ack)", watch), ("raw pub/sub (from ack)", raw)):
            for basis in ("from_ack", "from_send"):
                s = data[basis]
                label = name if basis == "from_ack" else name.replace("ack", "send")
                lines.append(
                    f"  {label:26s} {s['n']:6d} {fmt(s['p50_ms']):>8s} {fmt(s['p90_ms']):>8s} "
                    f"{fmt(s['p99_ms']):>8s} {fmt(s['max_ms']):>8s}"
                )
        for name, data in (("WatchJob", watch), ("raw pub/sub", raw)):
            lines.append(
                f"  {name} per repetition (p99 ms / other cores / benchmark cores): "
                + ", ".join(
                    f"{r['p99_ms']:.1f}/{r['other_cores']:.2f}/{r['bench_cores']:.2f}"
                    for r in data["per_rep"]
                )
            )
        lines.append(
            f"  WatchJob: opened {watch['opened']}/{watch['streams_total']} streams "
            f"(open in {watch['open_s']} s, median), "
            f"missed terminal {watch['missed_terminal']}, superseded {watch['superseded']}, "
            f"out-of-order streams {watch['out_of_order_streams']}, stream errors "
            f"{watch['stream_errors']}, failed writes {watch['failed_writes']}, "
            f"heartbeats {watch['heartbeats']}"
        )
        lines.append(
            f"  parser_svc during the writes: {watch['parser_svc_cores']} cores, "
            f"{watch['parser_svc_cpu_us_per_record']:.0f} us CPU per delivered record; "
            f"other {watch['other_cores']} cores; Redis accepted "
            f"{watch['redis_new_connections']} new connections during the writes, "
            f"{watch['redis_connected_clients']} connected after"
        )
        lines.append(
            f"  raw pub/sub: received {raw['received']}/{raw['messages']}; goal: WatchJob p99 <= "
            f"{GOALS['watch_p99_ms']} ms, 0 missed"
        )
    goals = results.get("goals_met")
    if goals:
        lines.append("")
        verdicts = (f"{k}={'MET' if v else 'MISSED'}" for k, v in goals.items())
        lines.append("Goals: " + ", ".join(verdicts))
    return "\n".join(lines)


def goals_met(results: dict[str, Any]) -> dict[str, bool]:
    met: dict[str, bool] = {}
    gs = results.get("get_status")
    if gs:
        for key in ("direct_over_bare", "gateway_over_bare"):
            met[key] = gs["ratios_median"][key] >= GOALS[key]
    watch = results.get("watch")
    if watch:
        met["watch_p99_ms"] = watch["from_ack"]["p99_ms"] <= GOALS["watch_p99_ms"]
        met["watch_missed_terminal"] = (
            watch["missed_terminal"] == 0 and watch["opened"] == watch["streams_total"]
        )
    return met


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = OUT_DIR / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "grpcio": grpc.__version__,
            "loadavg_before": loadavg(),
        },
        "config": {
            "quick": args.quick,
            "concurrency": args.concurrency,
            "channels": args.channels,
            "warmup_s": args.warmup,
            "slice_s": args.slice,
            "cycles": args.cycles,
            "streams": args.streams,
            "writes_per_job": args.writes_per_job,
            "watch_rate": args.watch_rate,
            "watch_reps": args.watch_reps,
            "watch_clients": args.watch_clients,
            "watch_channels": args.watch_channels,
            "loops": args.loops,
        },
        "goals": GOALS,
    }
    # One stack per "P+G" measured (each its own Redis, parser_svc on loop P, gateway on G).
    stacks = {
        config: LocalStack(
            work / f"stack-{config}",
            replicas=1,
            gateways=1,
            env=ENV_NAME,
            extra_env={
                "DOCPARSE_EVENT_LOOP": config.split("+")[0],
                "DOCPARSE_GATEWAY_EVENT_LOOP": config.split("+")[1],
                # One tenant opens every stream here: no per-tenant stream limit.
                "DOCPARSE_MAX_STREAMS_PER_TENANT": "0",
            },
        )
        for config in args.loops
    }
    stack = stacks[default_loop(stacks)]  # the WatchJob part's
    log(f"starting {len(stacks)} stacks (embedded Redis, 1 parser_svc, 1 gateway): {args.loops}")
    try:
        for each in stacks.values():
            await asyncio.to_thread(each.start)
        results["stack"] = {
            config: {
                "parser_svc": each.parser_addresses,
                "gateway": each.gateway_addresses,
                "redis": each.redis_url,
            }
            for config, each in stacks.items()
        }
        if not args.skip_get_status:
            jobs = {}
            for config, each in stacks.items():
                job = jobs[config] = await submit_succeeded_job(each.parser_addresses[0])
                log(f"GetStatus target job {job.job_id} ({job.ByteSize()} bytes)")
            slices, summary = await bench_get_status(stacks, jobs, args)
            results["get_status"] = summary
            results["get_status_slices"] = [asdict(r) for r in slices]
        if not args.skip_watch:
            assert stack.redis is not None and stack.redis.proc is not None
            redis_pid = {"redis": stack.redis.proc.pid}
            pubsub_reps: list[dict[str, Any]] = []
            watch_reps: list[dict[str, Any]] = []
            for rep in range(1, args.watch_reps + 1):
                # The baseline right before each WatchJob repetition, under the same noise.
                pubsub_reps.append(await bench_pubsub(stack.redis_url, args, work, redis_pid))
                log(f"raw pub/sub rep {rep}: {pubsub_reps[-1]['from_ack']}")
                watch_reps.append(await bench_watch(stack, args, work))
                log(
                    f"WatchJob rep {rep}: {watch_reps[-1]['from_ack']} "
                    f"other {watch_reps[-1]['other_cores']} cores"
                )
            results["pubsub"] = combine_reps(pubsub_reps)
            results["watch"] = combine_reps(watch_reps)
            results["pubsub_reps"] = pubsub_reps
            results["watch_reps"] = watch_reps
    finally:
        for each in stacks.values():
            await asyncio.to_thread(each.stop)
    results["machine"]["loadavg_after"] = loadavg()
    results["goals_met"] = goals_met(results)
    if not args.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return results


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (about 30 s)")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--channels", type=int, default=5, help="GetStatus client channels")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument(
        "--slice", type=float, default=1.0, help="GetStatus: seconds measured per target turn"
    )
    parser.add_argument(
        "--cycles", type=int, default=15, help="GetStatus: turns of bare, direct, gateway"
    )
    parser.add_argument("--streams", type=int, default=1000, help="WatchJob streams")
    parser.add_argument("--writes-per-job", type=int, default=6, help="claim, progress..., finish")
    parser.add_argument("--watch-rate", type=float, default=1000.0, help="state writes per second")
    parser.add_argument("--watch-reps", type=int, default=3, help="WatchJob repetitions")
    parser.add_argument("--watch-clients", type=int, default=2, help="watch client processes")
    parser.add_argument("--watch-channels", type=int, default=8, help="channels per client")
    parser.add_argument(
        "--loops",
        default="asyncio+asyncio,uvloop+uvloop,asyncio+uvloop",
        help="stacks measured, comma separated: P+G = parser_svc's event loop + the gateway's "
        "(asyncio or uvloop; one word for both)",
    )
    parser.add_argument("--skip-get-status", action="store_true")
    parser.add_argument("--skip-watch", action="store_true")
    parser.add_argument("--keep-work", action="store_true", help="keep var/bench/work (logs)")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "spine.json")
    args = parser.parse_args(argv)
    args.loops = [
        item if "+" in item else f"{item}+{item}"
        for item in (part.strip() for part in args.loops.split(","))
        if item
    ]
    if not args.loops or any(
        not set(config.split("+")) <= {"asyncio", "uvloop"} for config in args.loops
    ):
        parser.error("--loops: P+G with P, G each asyncio or uvloop")
    if args.quick:
        args.warmup, args.slice, args.cycles = 0.5, 1.0, 3
        args.streams, args.writes_per_job, args.watch_reps = min(args.streams, 300), 3, 1
    if args.writes_per_job < 2:
        parser.error("--writes-per-job must be at least 2 (claim and finish)")
    return args


def child_main(role: str, argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("--response")
    parser.add_argument("--target")
    parser.add_argument("--jobs", type=Path)
    parser.add_argument("--names", type=Path)
    parser.add_argument("--channels", type=int)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--redis-url")
    parser.add_argument("--expected", type=int)
    parser.add_argument("--loop", default="asyncio", choices=["asyncio", "uvloop"])
    args = parser.parse_args(argv)
    if role == "_bare":
        loops.run(serve_bare(args.port, bytes.fromhex(args.response)), args.loop)
        return
    if role == "_watch":
        job_ids = json.loads(args.jobs.read_text())
        result = asyncio.run(watch_client(args.target, job_ids, args.channels))
    elif role == "_pubsub":
        channels = json.loads(args.names.read_text())
        result = asyncio.run(pubsub_client(args.redis_url, channels, args.expected))
    else:
        raise SystemExit(f"unknown role {role}")
    args.out.write_text(json.dumps(result))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        child_main(sys.argv[1], sys.argv[2:])
        return
    args = parse_args(sys.argv[1:])
    results = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(report(results))
    print(f"\nJSON: {args.out}")


if __name__ == "__main__":
    main()
