"""Per-tenant rate limits on the heavier reads: ListJobs (a page of records), GetResult and
GetAsset (megabytes from Redis or the blob store).

A tenant flooding ListJobs made every other tenant's GetStatus wait behind its Redis reads and
encoding (B's GetStatus p99 went from 8.5 ms to 511 ms). Each replica keeps a token bucket per
tenant and kind of read, in memory: a refill and a comparison per call, no Redis round trip, so
a refusal costs next to nothing and GetStatus (never limited: it is the cheap poll the SDK
waits with, parser_svc/api/status_answers.py) keeps its speed. Beyond the rate:
RESOURCE_EXHAUSTED RATE_LIMITED with `retry_after_s` (and RetryInfo) for when the next token
is due. The rate is per replica: a deployment of N replicas lets a tenant N times as much.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from docparse.reasons import ErrorReason
from docparse_server.errors import error
from parser_svc.observability import READS_THROTTLED

# Buckets kept per limiter; the least recently refilled goes when a new tenant comes past it.
MAX_TENANTS = 4096


class ReadLimit:
    """At most `per_second` calls of `what` a second per tenant, bursts up to `burst`
    (`per_second` when 0); `per_second` 0 = unlimited."""

    def __init__(
        self,
        what: str,
        per_second: float,
        burst: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.rate = per_second
        self.burst = burst or max(1.0, per_second)
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, when)

    def check(self, tenant: str) -> None:
        """Takes one token of `tenant`'s bucket; DocparseError RATE_LIMITED when it is empty."""
        if self.rate <= 0:
            return
        now = self.clock()
        tokens, when = self._buckets.pop(tenant, (self.burst, now))
        tokens = min(self.burst, tokens + (now - when) * self.rate)
        if len(self._buckets) >= MAX_TENANTS:
            del self._buckets[next(iter(self._buckets))]
        if tokens >= 1.0:
            self._buckets[tenant] = (tokens - 1.0, now)
            return
        self._buckets[tenant] = (tokens, now)
        READS_THROTTLED.labels(tenant, self.what).inc()
        wait = max(1, math.ceil((1.0 - tokens) / self.rate))
        raise error(
            ErrorReason.RATE_LIMITED,
            f"tenant {tenant} may make {self.rate:g} {self.what} calls a second on each "
            f"replica; retry in {wait} s",
            {"retry_after_s": str(wait), "limit_per_s": f"{self.rate:g}", "method": self.what},
        )
