"""The spine benchmark's numbers from its measurements: the GetStatus slices as per-target
rows and ratios to bare, and repetitions of the watch (or pub/sub) measurement as one."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from bench.harness.stats import percentile

if TYPE_CHECKING:
    from bench.spine.get_status import LoadClient, LoadResult

LOOPS = ("asyncio", "uvloop")


def summarize_get_status(
    slices: list[LoadResult],
    clients: list[LoadClient],
    involved: dict[str, list[str]],
    default: str,
) -> dict[str, Any]:
    # `bare` runs on the loop of the default stack's parser_svc (bench.spine.get_status).
    summary: dict[str, Any] = {"default_loop": default, "bare_loop": default.split("+")[0]}
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
    if "floor" in summary:
        # parser_svc over the floor (the same Redis and job, on parser_svc's loop): what its
        # own layers cost, apart from grpc, redis-py and protobuf.
        direct = goal_targets["direct"]
        over_floor = []
        for cycle in cycles:
            row = {r.target: r.calls_per_s for r in slices if r.cycle == cycle}
            over_floor.append(row[direct] / row["floor"])
        summary["ratios_per_cycle"]["direct_over_floor"] = [round(x, 3) for x in over_floor]
        summary["ratios_median"]["direct_over_floor"] = round(statistics.median(over_floor), 3)
        summary["cpu_cost_ratios"]["direct_over_floor"] = round(
            summary["floor"]["cpu_us_per_call_total"] / summary[direct]["cpu_us_per_call_total"], 3
        )
    # uvloop against asyncio within each cycle: the same target, adjacent slices.
    bare = {loop: "bare" if loop == summary["bare_loop"] else f"bare_{loop}" for loop in LOOPS}
    pairs = {
        "bare": (bare["uvloop"], bare["asyncio"]),
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
            **({"rss_kb_per_stream": r["rss_kb_per_stream"]} if "rss_kb_per_stream" in r else {}),
        }
        for r in reps
    ]
    return out
