"""Capacity benchmark: measures the per-operation costs the capacity model
(bench.capacity) projects from, and checks the model against a scaled-down run.

    .venv/bin/python -m bench.bench_capacity measure    # costs -> var/bench/capacity.json
    .venv/bin/python -m bench.bench_capacity validate --replicas 2 --streams 3000

`measure` starts a local stack (embedded Redis, 1 parser_svc replica, 1 gateway) and runs:
1. jobs of 1 and of 10 book pages through the gateway (SubmitJob, then WatchJob to the terminal
   record), a few at a time: CPU per job of parser_svc, its parse children, the gateway and
   Redis; Redis commands, PUBLISH calls and bytes in and out per job (INFO deltas), minus the
   idle rate measured just before. Two page counts give a fixed and a per-page part.
2. WatchJob streams opened through the gateway (bench.spine.watch): resident memory per open
   stream (parser_svc, gateway, Redis), CPU per open stream per second while nothing is
   written, and CPU and Redis bytes per delivered record at a fixed write rate.

`validate` starts a stack with `--replicas` replicas, predicts the CPU (cores of parser_svc,
gateway, Redis during the writes) and memory per stream of a WatchJob run with the model and
the measured costs, runs it and prints predicted against measured (goal: within 25 %).
Both write their JSON to var/bench/ (capacity.json, capacity-validate.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Any

from bench.capacity import COSTS_FILE, Costs, load_costs
from bench.harness.output import OUT_DIR, log, write_text
from bench.harness.procfs import loadavg
from bench.harness.redis_stats import subscription_bytes
from bench.harness.stacks import ENV_NAME, bench_stack, running, running_async
from bench.scaling.job_costs import job_costs
from bench.spine.watch import STACK_ENV, add_watch_options, bench_watch
from parser_svc.settings import Settings
from parser_svc.state.keys import Keys

ROLES = ("parser_svc", "gateway", "redis")


def linear(small: dict[str, Any], big: dict[str, Any], value: Any) -> tuple[float, float]:
    """(fixed per job, per page) through the two page counts' per-job values."""
    low, high = float(value(small)), float(value(big))
    per_page = (high - low) / (big["pages"] - small["pages"])
    return low - per_page * small["pages"], per_page


def costs_from(small: dict[str, Any], big: dict[str, Any], watch: dict[str, Any]) -> Costs:
    """The model's inputs from a measuring run: two job sizes and one watch run."""
    out: dict[str, float] = {}
    for name, role in (("parser_svc_us", "parser_svc"), ("parse_us", "parse")):
        out[f"{name}_job"], out[f"{name}_page"] = linear(
            small, big, lambda r, role=role: r["cpu_us_per_job"][role]
        )
    for role in ("gateway", "redis"):
        out[f"{role}_us_job"], out[f"{role}_us_page"] = linear(
            small, big, lambda r, role=role: r["cpu_us_per_job"][role]
        )
    for name, key in (
        ("redis_commands", "commands"),
        ("redis_in_bytes", "net_in_bytes"),
        ("redis_out_bytes", "net_out_bytes"),
        ("records", "publish"),
        ("redis_memory_bytes", "memory"),
    ):
        out[f"{name}_job"], out[f"{name}_page"] = linear(
            small, big, lambda r, key=key: r["redis_per_job"][key]
        )
    out["document_bytes_page"] = big["document_bytes"] / big["pages"]
    streams, delivered, seconds = watch["streams"], watch["delivered"], watch["write_seconds"]
    idle = watch["idle_cpu_us_per_stream_s"]
    for role in ROLES:
        out[f"{role}_us_stream_s"] = idle[role]
        # CPU in the write window beyond what the open streams cost anyway, per record.
        busy_us = watch[f"{role}_cpu_us_per_record"] * delivered
        out[f"{role}_us_record"] = (busy_us - idle[role] * streams * seconds) / delivered
    out["record_bytes"] = watch["record_json_bytes"]
    out["redis_out_bytes_record"] = watch["redis_out_bytes_per_record"]
    out["parser_svc_kb_stream"] = watch["rss_kb_per_stream"]["parser_svc"]
    out["gateway_kb_stream"] = watch["rss_kb_per_stream"]["gateway"]
    # Per stream: one channel subscribed by the replica's hub (measured alone: the memory
    # Redis holds around a watch run moves by megabytes with other things).
    out["redis_bytes_stream"] = watch["redis_bytes_per_subscription"]
    # One resync read per DOCPARSE_WATCH_RESYNC_S.
    out["redis_commands_stream_s"] = 1 / float(Settings.model_fields["watch_resync_s"].default)
    return Costs(**{k: round(v, 3) for k, v in out.items()})


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    stack = bench_stack(work / "measure", replicas=1, extra_env=STACK_ENV)
    results: dict[str, Any] = {"loadavg_before": loadavg(), "config": dict(vars(args))}
    with running([stack]):
        rounds: list[list[dict[str, Any]]] = []
        for number in range(args.rounds):
            # Both sizes in each round, the order alternating: a change in the machine's
            # load falls on both.
            sizes = args.pages if number % 2 == 0 else args.pages[::-1]
            done = {pages: job_costs(stack, pages, args.jobs, args.clients, 2.0) for pages in sizes}
            rounds.append([done[pages] for pages in args.pages])
            log(f"round {number + 1}: {[r['cpu_us_per_job'] for r in rounds[-1]]}")
        watch = asyncio.run(
            bench_watch(stack, args, work, targets=stack.gateway_addresses, idle_s=args.idle)
        )
        assert stack.redis_url is not None
        keys = Keys(ENV_NAME)
        channels = [keys.job_channel(uuid.uuid4().hex) for _ in range(args.streams)]
        watch["redis_bytes_per_subscription"] = subscription_bytes(stack.redis_url, channels)
    results["loadavg_after"] = loadavg()
    results["jobs"] = rounds
    results["watch"] = watch
    each = [costs_from(small, big, watch) for small, big in rounds]
    # The median of the rounds, cost by cost.
    results["costs"] = {
        f.name: statistics.median(float(getattr(c, f.name)) for c in each) for f in fields(Costs)
    }
    return results


def predicted_watch(costs: Costs, streams: int, records_per_s: float) -> dict[str, Any]:
    """Cores per role during a watch run's writes and memory per stream, by the model."""
    cores = {
        role: (
            records_per_s * float(getattr(costs, f"{role}_us_record"))
            + streams * float(getattr(costs, f"{role}_us_stream_s"))
        )
        / 1e6
        for role in ROLES
    }
    rss = {"parser_svc": costs.parser_svc_kb_stream, "gateway": costs.gateway_kb_stream}
    return {"cores": cores, "rss_kb_per_stream": rss}


def validate(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    costs = load_costs(args.costs)
    stack = bench_stack(work / "validate", replicas=args.replicas, extra_env=STACK_ENV)
    results: dict[str, Any] = {"loadavg_before": loadavg(), "config": dict(vars(args))}

    async def go() -> dict[str, Any]:
        async with running_async([stack]):
            return await bench_watch(stack, args, work, targets=stack.gateway_addresses)

    watch = asyncio.run(go())
    rate = watch["delivered"] / watch["write_seconds"]
    predicted = predicted_watch(costs, watch["streams"], rate)
    measured = {
        "cores": {role: watch[f"{role}_cpu_us_per_record"] * rate / 1e6 for role in ROLES},
        "rss_kb_per_stream": watch["rss_kb_per_stream"],
    }
    results["loadavg_after"] = loadavg()
    results["watch"] = watch
    results["records_per_s"] = round(rate, 1)
    results["predicted"] = predicted
    results["measured"] = measured
    results["measured_over_predicted"] = {
        kind: {
            role: round(value / predicted[kind][role], 3) if predicted[kind][role] else None
            for role, value in measured[kind].items()
        }
        for kind in ("cores", "rss_kb_per_stream")
    }
    return results


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("mode", choices=["measure", "validate"])
    parser.add_argument("--pages", type=int, nargs=2, default=[1, 10], help="two job sizes")
    parser.add_argument("--jobs", type=int, default=40, help="jobs per size and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both job sizes")
    parser.add_argument("--clients", type=int, default=4, help="concurrent submitters")
    parser.add_argument(
        "--idle", type=float, default=5.0, help="seconds measured with the streams open, idle"
    )
    parser.add_argument("--replicas", type=int, default=2, help="validate: parser_svc replicas")
    add_watch_options(parser, streams=1000, writes_per_job=4, rate=500.0)
    parser.add_argument("--costs", type=Path, help=f"validate: default {COSTS_FILE}")
    parser.add_argument("--keep-work", action="store_true", help="keep the stacks' logs")
    parser.add_argument("--out", type=Path)
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args(sys.argv[1:])
    work = OUT_DIR / "work-capacity"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results = measure(args, work) if args.mode == "measure" else validate(args, work)
    results["started"] = started
    out = args.out or (COSTS_FILE if args.mode == "measure" else OUT_DIR / "capacity-validate.json")
    write_text(out, json.dumps(results, indent=2, default=str) + "\n")
    if not args.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    shown = ("costs", "predicted", "measured", "measured_over_predicted")
    summary = {key: results[key] for key in shown if key in results}
    print(json.dumps(summary, indent=2))
    print(f"\nJSON: {out}")


if __name__ == "__main__":
    main()
