"""WatchJob delivery: one stream per job on one parser_svc replica, opened by watch client
processes; this process writes the jobs' states through parser_svc.state.store.JobStore at a fixed
rate and the latency is client receive time minus the write's (see bench/README.md)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
import redis.asyncio as aioredis

from bench.harness.children import start_child, stop_child, stop_on_stdin_eof
from bench.harness.output import log
from bench.harness.procfs import cpu_snapshot, machine_busy_seconds, rss_kb
from bench.harness.redis_stats import delta, redis_counters
from bench.harness.stacks import ENV_NAME, KEY_METADATA, TENANT, TOKEN_METADATA
from bench.harness.stats import latency_stats
from bench.harness.timing import paced
from bench.spine.settings import CHANNEL_OPTIONS, CHILDREN, FENCE, TIMELINE_S
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from parser_svc.settings import Settings
from parser_svc.state.lua_scripts import WriteResult
from parser_svc.state.store import JobStore, connect

# What a stack needs for `bench_watch`: one tenant opens every stream (no per-tenant limit), and
# the jobs, created straight in Redis and never queued, must not be queued (and run) by the
# sweeper in the middle of the measured writes (it queues what is QUEUED after 10 s).
STACK_ENV = {
    "DOCPARSE_MAX_STREAMS_PER_TENANT": "0",
    "DOCPARSE_SWEEP_ENQUEUE_AFTER_S": "3600",
}


def add_watch_options(
    parser: argparse.ArgumentParser, *, streams: int, writes_per_job: int, rate: float
) -> None:
    """The options `bench_watch` reads from its namespace, with the caller's defaults."""
    parser.add_argument("--streams", type=int, default=streams, help="WatchJob streams")
    parser.add_argument(
        "--writes-per-job", type=int, default=writes_per_job, help="claim, progress..., finish"
    )
    parser.add_argument("--watch-rate", type=float, default=rate, help="state writes per second")
    parser.add_argument("--watch-clients", type=int, default=2, help="watch client processes")
    parser.add_argument("--watch-channels", type=int, default=8, help="channels per client")
    parser.add_argument(
        "--watch-via",
        choices=("parser", "gateway"),
        default="parser",
        help="open the streams on the parser_svc replica or through the gateway",
    )


async def watch_client(
    target: str, job_ids: list[str], channels: int, metadata: list[tuple[str, str]]
) -> dict[str, Any]:
    """Opens one WatchJob stream per job id (each sending `metadata`), says READY once each has
    its first record, then records every record's receive time until all streams end (or
    stdin closes)."""
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
                parser_service_pb2.WatchJobRequest(job_id=job_id), metadata=tuple(metadata)
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


async def bench_watch(
    stack: LocalStack,
    args: argparse.Namespace,
    work: Path,
    *,
    targets: list[str] | None = None,
    idle_s: float = 0.0,
    auth: bool = False,
) -> dict[str, Any]:
    """`targets`: where the streams open, spread over the client processes (default: the
    first parser_svc replica). `idle_s`: seconds measured with every stream open and no
    writes (resyncs and heartbeats only) before the writes start. `auth`: the stack runs with
    API keys (bench.harness.stacks): the jobs are its key's tenant's, and the streams send the
    key (to a gateway) or the internal token (to parser_svc)."""
    targets = targets or stack.parser_addresses[:1]
    settings = Settings(redis_url=stack.redis_url, env=ENV_NAME)
    client = connect(settings)
    store = JobStore(client, settings)
    job_ids = [uuid.uuid4().hex for _ in range(args.streams)]
    fields = {"file_name": "bench.pdf", "content_type": "pdf", "size_bytes": "1000"}
    metadata: tuple[tuple[str, str], ...] = ()
    if auth:
        fields["tenant"] = TENANT
        via_gateway = set(targets) <= set(stack.gateway_addresses)
        metadata = KEY_METADATA if via_gateway else TOKEN_METADATA
    for i in range(0, len(job_ids), 100):
        created = await asyncio.gather(*(store.create(j, fields) for j in job_ids[i : i + 100]))
        if any(c.status != "OK" for c in created):
            raise RuntimeError(f"job creation failed: {[c.status for c in created]}")

    assert stack.redis is not None and stack.redis.proc is not None and stack.redis_url
    pids = {
        "bench": os.getpid(),
        **{f"parser_svc_{i}": child.pid for i, child in enumerate(stack.parsers)},
        **{f"gateway_{i}": child.pid for i, child in enumerate(stack.gateways)},
        "redis": stack.redis.proc.pid,
    }
    servers = [name for name in pids if name.startswith(("parser_svc", "gateway"))]
    rss0 = {name: rss_kb(pids[name])[0] for name in servers}
    groups = [job_ids[i :: args.watch_clients] for i in range(args.watch_clients)]
    outs = [work / f"watch-{i}.json" for i in range(len(groups))]
    started = time.perf_counter()
    clients = []
    try:
        for i, group in enumerate(groups):
            jobs_file = work / f"watch-{i}-jobs.json"
            jobs_file.write_text(json.dumps(group))
            target = targets[i % len(targets)]
            child_args = ["--target", target, "--jobs", str(jobs_file), "--out", str(outs[i])]
            child_args += ["--channels", str(args.watch_channels)]
            child_args += ["--metadata", json.dumps(metadata)]
            clients.append(await start_child(CHILDREN, "_watch", *child_args))
        open_s = time.perf_counter() - started
        log(f"WatchJob: {args.streams} streams open in {open_s:.1f} s")
        pids.update({f"watch_client_{i}": proc.pid for i, proc in enumerate(clients)})
        gc_settle = 1.0  # the servers' first collection after the burst of new streams
        await asyncio.sleep(gc_settle)
        rss1 = {name: rss_kb(pids[name])[0] for name in servers}
        idle_cpu: dict[str, float] = {}
        if idle_s > 0:
            idle0 = cpu_snapshot(pids)
            await asyncio.sleep(idle_s)
            idle1 = cpu_snapshot(pids)
            idle_cpu = {name: idle1[name] - idle0[name] for name in pids}

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

        conns0 = await redis_connections(client)
        traffic0 = await asyncio.to_thread(redis_counters, stack.redis_url)
        cpu0, busy0 = cpu_snapshot(pids), machine_busy_seconds()
        write_started = time.perf_counter()
        written = await paced(len(schedule), args.watch_rate, write)
        write_s = time.perf_counter() - write_started
        # Deliveries lag the last write by a few ms at most; the window covers the writes.
        cpu1, busy1 = cpu_snapshot(pids), machine_busy_seconds()
        cpu_s = {name: cpu1[name] - cpu0[name] for name in pids}
        other_cores = (busy1 - busy0 - sum(cpu_s.values())) / write_s
        traffic = delta(traffic0, await asyncio.to_thread(redis_counters, stack.redis_url))
        conns1 = await redis_connections(client)
        record_bytes = await published_size(client, store, job_ids[0])
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
    role_cpu = {
        role: sum(v for n, v in cpu_s.items() if n.startswith(role))
        for role in ("parser_svc", "gateway", "redis")
    }

    def per_record(seconds: float) -> float:
        return round(seconds / max(delivered, 1) * 1e6, 1)

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
        # (records are full, a watcher needs only the latest), but each one is a delivery
        # without a latency sample.
        "superseded": len(commits) - delivered,
        "missed_terminal": streams - terminal,
        "out_of_order_streams": out_of_order,
        "stream_errors": len(errors),
        "stream_error_samples": errors[:5],
        "heartbeats": heartbeats,
        "replicas": len(stack.parsers),
        "targets": targets,
        "parser_svc_cores": round(role_cpu["parser_svc"] / write_s, 2),
        "parser_svc_cpu_us_per_record": per_record(role_cpu["parser_svc"]),
        "gateway_cores": round(role_cpu["gateway"] / write_s, 2),
        "gateway_cpu_us_per_record": per_record(role_cpu["gateway"]),
        "redis_cpu_us_per_record": per_record(role_cpu["redis"]),
        # Redis INFO deltas over the writes: per write (a Lua script call and its PUBLISH)
        # and the bytes Redis sent per delivered record (pub/sub pushes to the replicas' hubs).
        "redis_traffic": traffic,
        "redis_commands_per_write": round(traffic["commands"] / len(schedule), 2),
        "redis_in_bytes_per_write": round(traffic["net_in_bytes"] / len(schedule), 1),
        "record_json_bytes": record_bytes,
        "redis_out_bytes_per_record": round(traffic["net_out_bytes"] / max(delivered, 1), 1),
        # Opening the streams (measured 1 s after the last opened): resident kB per stream of
        # each server role (summed over its processes).
        "rss_kb_after_open": rss1,
        "rss_kb_per_stream": {
            role: round(sum(rss1[n] - rss0[n] for n in rss1 if n.startswith(role)) / streams, 2)
            for role in ("parser_svc", "gateway")
        },
        # With every stream open and no writes (resync reads, heartbeats): µs of CPU per open
        # stream per second, by role.
        "idle_s": idle_s,
        "idle_cpu_us_per_stream_s": {
            role: round(
                sum(v for n, v in idle_cpu.items() if n.startswith(role))
                / idle_s
                / max(streams, 1)
                * 1e6,
                3,
            )
            for role in ("parser_svc", "gateway", "redis")
        }
        if idle_s > 0
        else {},
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


async def redis_connections(client: aioredis.Redis) -> tuple[int, int]:
    """(connections Redis has accepted so far, clients connected now)."""
    stats = await client.info("stats")
    clients = await client.info("clients")
    return int(stats["total_connections_received"]), int(clients["connected_clients"])


async def published_size(client: aioredis.Redis, store: JobStore, job_id: str) -> int:
    """Bytes of a job's record as PUBLISH sends it (lib/publish.lua: the fields as one JSON
    object without the fence and the dedupe pointer)."""
    record = await client.hgetall(store.keys.job(job_id))

    def text(value: bytes | str) -> str:
        return value.decode() if isinstance(value, bytes) else value

    fields = {text(k): text(v) for k, v in record.items()}
    fields.pop("fence", None)
    fields.pop("dedupe_key", None)
    return len(json.dumps(fields, separators=(",", ":")))
