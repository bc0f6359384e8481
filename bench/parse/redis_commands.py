"""Redis commands (round trips) and PUBLISH messages per one-page job, counted with MONITOR."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path

import redis

from bench.parse.through_stack import Made, concurrent_sdk_jobs
from docparse.client import Client
from docparse.local.stack import LocalStack


def redis_per_job(
    stack: LocalStack, paths: list[Path], clients: int, api_key: str = "", made: Made | None = None
) -> dict[str, float]:
    """Redis commands from clients (round trips; `bullmq_*`: those of BullMQ's queue, whose
    workers poll per parse slot), commands run inside scripts, and PUBLISH messages per
    one-page job, minus the same window's idle rate. Twice: the jobs one after another
    (`sequential_*`), then with `clients` concurrent SDK clients (`concurrent_*`). The clients
    send `api_key`; (file, job id) of every job goes to `made` when given."""
    assert stack.redis_url is not None
    client = redis.Redis.from_url(stack.redis_url)
    counts: Counter[str] = Counter()
    marker = f"bench-stop-{os.getpid()}"

    def watch() -> None:
        with client.monitor() as monitor:  # type: ignore[no-untyped-call]
            for command in monitor.listen():
                text = command["command"]
                if marker in text:
                    return
                kind = "script" if command["client_type"] == "lua" else "client"
                counts[kind] += 1
                words = text.split(" ", 4)
                first_key = words[3:4] if words[0].upper() in ("EVALSHA", "EVAL") else words[1:2]
                if kind == "client" and ":bull:" in str(first_key):
                    counts["bullmq"] += 1
                if text.split(" ", 1)[0].upper() == "PUBLISH":
                    counts["publish"] += 1

    def window(action: object) -> tuple[Counter[str], float]:
        counts.clear()
        thread = threading.Thread(target=watch)
        thread.start()
        time.sleep(0.2)  # MONITOR is on before the window starts
        counts.clear()
        started = time.perf_counter()
        action() if callable(action) else time.sleep(float(str(action)))
        seconds = time.perf_counter() - started
        time.sleep(1.5)  # what a job's end leaves (the event hub's batched UNSUBSCRIBE)
        client.echo(marker)
        thread.join(10)
        return Counter(counts), seconds + 1.5

    half = len(paths) // 2
    address = stack.gateway_addresses[0]
    seen: Made = made if made is not None else []
    with Client(address, api_key=api_key) as sdk:
        sequential = window(lambda: seen.extend((p, sdk.parse(p).job_id) for p in paths[:half]))
    concurrent = window(lambda: concurrent_sdk_jobs(address, paths[half:], clients, api_key, seen))
    idle, idle_s = window(sequential[1] - 1.5)
    client.close()
    per_job = {}
    for name, (busy, busy_s), jobs in (
        ("sequential", sequential, half),
        ("concurrent", concurrent, len(paths) - half),
    ):
        for kind in ("client", "bullmq", "script", "publish"):
            extra = busy[kind] - idle[kind] * busy_s / idle_s
            per_job[f"{name}_{kind}_per_job"] = round(extra / jobs, 1)
    per_job["idle_client_per_s"] = round(idle["client"] / idle_s, 1)
    return per_job
