"""Percentiles and medians of measured samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = min(max(1, math.ceil(q / 100 * len(ordered))), len(ordered))
    return ordered[rank - 1]


def latency_stats(samples_ms: list[float]) -> dict[str, float]:
    """n, p50, p90, p99 and max of latencies in ms (rounded to µs)."""
    return {
        "n": len(samples_ms),
        "p50_ms": round(percentile(samples_ms, 50), 3),
        "p90_ms": round(percentile(samples_ms, 90), 3),
        "p99_ms": round(percentile(samples_ms, 99), 3),
        "max_ms": round(max(samples_ms), 3) if samples_ms else float("nan"),
    }


def median_or_zero(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0
