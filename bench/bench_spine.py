"""Spine benchmark: GetStatus throughput/latency and WatchJob delivery latency.

    .venv/bin/python -m bench.bench_spine            # full run, a few minutes
    .venv/bin/python -m bench.bench_spine --quick    # short smoke run

(from the repository root). What it measures, all in one run on this machine, everything on
127.0.0.1:

1. GetStatus at 50 concurrent callers (grpc.aio client, coroutines spread over a few channels,
   fixed duration after a warm-up) against
     bare     a grpc.aio server in its own process whose GetStatus handler returns pre-serialized
              bytes (same response size, no Redis, no interceptor: the floor of grpc.aio itself),
              on the event loop parser_svc runs on (docparse_server/loops.py; uvloop by default),
     direct   one parser_svc replica, GetStatus of one SUCCEEDED job,
     gateway  one gateway in front of that replica.
   The three targets are measured in interleaved rounds; ratios are taken within a round.
2. WatchJob delivery with N (1,000) open streams on ONE parser_svc replica. Watch clients run in
   separate processes (one process per `--watch-clients`, several channels each); each stream
   watches its own job. This process then writes state straight into Redis through
   parser_svc.state.store.JobStore (claim, progress, ..., finish, with the fencing token) at a fixed
   rate; latency = client receive time - time the Lua write returned ("commit acknowledged")
   and, more conservatively, - time the write was issued. Every stream must receive its
   terminal record. Next to it, raw Redis pub/sub on the same Redis: a redis-py asyncio
   subscriber process on one connection holding N channels, publishes at the same rate.
Timestamps that cross processes use time.time_ns() (CLOCK_REALTIME, one machine). The stacks
run as production does, with API keys and the internal token (bench.harness.stacks): every
client sends the key to a gateway, the internal token and tenant to parser_svc.

Results: a table on stdout and var/bench/spine.json.

The scenarios are in bench.spine (get_status, watch, pubsub; their helper processes in
bench.spine.children), what the benchmarks share in bench.harness.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import grpc

from bench.harness.output import OUT_DIR, log, write_text
from bench.harness.procfs import loadavg
from bench.harness.stacks import TOKEN_METADATA, bench_stack, running_async
from bench.spine.get_status import bench_get_status
from bench.spine.pubsub import bench_pubsub
from bench.spine.report import goals_met, report
from bench.spine.settings import GOALS, default_loop
from bench.spine.summary import combine_reps
from bench.spine.watch import STACK_ENV, add_watch_options, bench_watch
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from tests.helpers import make_pdf


async def submit_succeeded_job(address: str) -> job_pb2.Job:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = parser_service_pb2_grpc.ParserServiceStub(channel)
        reply = await stub.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name="bench.pdf", content=make_pdf(3, "benchmark page"), wait_timeout_ms=60_000
            ),
            timeout=70,
            metadata=TOKEN_METADATA,
        )
        job = reply.job
        if job.state != job_pb2.STATE_SUCCEEDED:
            raise RuntimeError(f"benchmark job did not succeed: {job!r}")
        return job


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
        config: bench_stack(
            work / f"stack-{config}",
            replicas=1,
            extra_env={
                "DOCPARSE_EVENT_LOOP": config.split("+")[0],
                "DOCPARSE_GATEWAY_EVENT_LOOP": config.split("+")[1],
                **STACK_ENV,
            },
            auth=True,
        )
        for config in args.loops
    }
    stack = stacks[default_loop(stacks)]  # the WatchJob part's
    log(f"starting {len(stacks)} stacks (embedded Redis, 1 parser_svc, 1 gateway): {args.loops}")
    async with running_async(stacks.values()):
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
                via = stack.gateway_addresses if args.watch_via == "gateway" else None
                watch_reps.append(await bench_watch(stack, args, work, targets=via, auth=True))
                log(
                    f"WatchJob rep {rep}: {watch_reps[-1]['from_ack']} "
                    f"other {watch_reps[-1]['other_cores']} cores"
                )
            results["pubsub"] = combine_reps(pubsub_reps)
            results["watch"] = combine_reps(watch_reps)
            results["pubsub_reps"] = pubsub_reps
            results["watch_reps"] = watch_reps
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
    add_watch_options(parser, streams=1000, writes_per_job=6, rate=1000.0)
    parser.add_argument("--watch-reps", type=int, default=3, help="WatchJob repetitions")
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


def main() -> None:
    args = parse_args(sys.argv[1:])
    results = asyncio.run(run(args))
    write_text(args.out, json.dumps(results, indent=2) + "\n")
    print(report(results))
    print(f"\nJSON: {args.out}")


if __name__ == "__main__":
    main()
