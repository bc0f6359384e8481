"""The spine benchmark's printed report and its verdict on the goals."""

from __future__ import annotations

from typing import Any

from bench.spine.settings import GOALS


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
        if "floor_over_bare" in gs["ratios_median"]:
            for key, name, what in (
                ("floor_over_bare", "floor/bare  ", "grpc + one redis-py read + protobuf"),
                ("direct_over_floor", "direct/floor", "parser_svc's own layers"),
            ):
                lines.append(
                    f"  {name} median of cycles {gs['ratios_median'][key]:.3f} "
                    f"(cycles {spread[key]}), CPU-cost {cost[key]:.3f} ({what})"
                )
        lines.append(
            f"  goals judged on the {gs['default_loop']} stack (parser_svc + gateway loops, "
            f"the settings' defaults); bare runs on {gs.get('bare_loop', 'asyncio')}, as "
            "parser_svc does"
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
        if "rss_kb_per_stream" in watch:
            replica_kb = sum(
                kb for name, kb in watch["rss_kb_after_open"].items() if name.startswith("parser")
            )
            lines.append(
                f"  resident memory per open stream (first repetition): parser_svc "
                f"{watch['rss_kb_per_stream']['parser_svc']} kB "
                f"(parser_svc at {replica_kb // 1024} MB with the "
                f"streams open; per repetition in per_rep)"
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
