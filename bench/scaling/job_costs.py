"""What one job costs a stack: jobs of a given page count submitted through the gateway and
followed to their terminal record (SubmitJob + WatchJob, as a client runs them), a few at a
time; CPU of every process (a replica's parse children count once reaped by the worker) and
Redis's commands and bytes, minus the same stack's idle rate measured right before."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.harness.documents import book_pdf
from bench.harness.jobs import run_job
from bench.harness.procfs import cpu_seconds, reaped_children_cpu_seconds
from bench.harness.redis_stats import COUNTERS, delta, redis_counters
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2

ROLES = ("parser_svc", "parse", "gateway", "redis")


def role_cpu(stack: LocalStack) -> dict[str, float]:
    """CPU seconds so far: parser_svc processes, their reaped parse children (and fork
    servers), the gateways, Redis."""
    assert stack.redis is not None and stack.redis.proc is not None
    return {
        "parser_svc": sum(cpu_seconds(p.pid) for p in stack.parsers),
        "parse": sum(reaped_children_cpu_seconds(p.pid) for p in stack.parsers),
        "gateway": sum(cpu_seconds(g.pid) for g in stack.gateways),
        "redis": cpu_seconds(stack.redis.proc.pid),
    }


def snapshot(stack: LocalStack) -> tuple[float, dict[str, float], dict[str, int]]:
    assert stack.redis_url is not None
    return time.perf_counter(), role_cpu(stack), redis_counters(stack.redis_url)


def rates(
    before: tuple[float, dict[str, float], dict[str, int]],
    after: tuple[float, dict[str, float], dict[str, int]],
) -> tuple[float, dict[str, float]]:
    """Seconds between two snapshots and what was used in between (CPU s, Redis counts)."""
    used: dict[str, float] = {role: after[1][role] - before[1][role] for role in ROLES}
    used.update({k: float(v) for k, v in delta(before[2], after[2]).items()})
    return after[0] - before[0], used


def job_costs(
    stack: LocalStack, pages: int, jobs: int, clients: int, idle_s: float
) -> dict[str, Any]:
    """Per job of `pages` book pages: CPU µs by role and Redis commands, PUBLISH calls and
    bytes in and out, after subtracting the idle rate (BullMQ's polling, the sweeper)."""
    address = stack.gateway_addresses[0]
    # A distinct document per job (the seed): identical active submits would be joined.
    documents = [book_pdf(pages, seed=1000 * pages + i) for i in range(jobs)]

    def one(index: int) -> job_pb2.Job:
        request = parser_service_pb2.SubmitJobRequest(
            file_name=f"capacity-{pages}-{index}.pdf", content=documents[index]
        )
        return run_job(address, request, resume=True)

    first = snapshot(stack)
    time.sleep(idle_s)
    idle_seconds, idle = rates(first, snapshot(stack))
    start = snapshot(stack)
    with ThreadPoolExecutor(max_workers=clients) as pool:
        done = list(pool.map(one, range(jobs)))
    busy_seconds, busy = rates(start, snapshot(stack))
    failed = [j.job_id for j in done if j.state != job_pb2.STATE_SUCCEEDED]
    if failed:
        raise RuntimeError(f"{len(failed)} of {jobs} jobs did not succeed: {failed[:3]}")

    def per_job(name: str) -> float:
        return (busy[name] - idle[name] * busy_seconds / idle_seconds) / jobs

    return {
        "pages": pages,
        "jobs": jobs,
        "clients": clients,
        "seconds": round(busy_seconds, 2),
        "jobs_per_s": round(jobs / busy_seconds, 2),
        "document_bytes": round(sum(len(d) for d in documents) / jobs),
        "cpu_us_per_job": {role: round(per_job(role) * 1e6, 1) for role in ROLES},
        # `memory`: what Redis still holds per job (record, inline result) after it ended.
        "redis_per_job": {name: round(per_job(name), 1) for name in COUNTERS},
        "idle_per_s": {
            **{role: round(idle[role] / idle_seconds, 4) for role in ROLES},
            "redis_commands": round(idle["commands"] / idle_seconds, 1),
        },
    }
