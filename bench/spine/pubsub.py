"""The raw Redis pub/sub baseline of WatchJob delivery: a redis-py asyncio subscriber process
on one connection holding one channel per stream (as the EventHub does), and messages of a job
record's size published at the same rate as the watch benchmark's writes."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from bench.harness.children import start_child, stop_child, stop_on_stdin_eof
from bench.harness.procfs import cpu_snapshot, machine_busy_seconds
from bench.harness.stacks import ENV_NAME
from bench.harness.stats import latency_stats
from bench.harness.timing import paced
from bench.spine.settings import CHILDREN


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
    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
    await client.aclose()
    return {"received": received}


async def bench_pubsub(
    redis_url: str, args: argparse.Namespace, work: Path, redis_pid: dict[str, int] | None = None
) -> dict[str, Any]:
    channels = [f"docparse:{ENV_NAME}:rawbench:{{{i}}}:events" for i in range(args.streams)]
    names = work / "pubsub-channels.json"
    names.write_text(json.dumps(channels))
    count = args.streams * args.writes_per_job
    out = work / "pubsub.json"
    sub = await start_child(
        CHILDREN, "_pubsub", "--redis-url", redis_url, "--expected", str(count), "--out", str(out),
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
