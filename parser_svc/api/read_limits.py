"""Per-tenant rate limits on the heavier reads: ListJobs (a page of records), GetResult and
GetAsset (megabytes from Redis or the blob store).

A tenant flooding ListJobs made every other tenant's GetStatus wait behind its Redis reads and
encoding (B's GetStatus p99 went from 8.5 ms to 511 ms). Each replica keeps a token bucket per
tenant and kind of read, in memory: a refill and a comparison per call, no Redis round trip, so
a refusal costs next to nothing and GetStatus (never limited: it is the cheap poll the SDK
waits with, parser_svc/api/status_answers.py) keeps its speed; an allowed ListJobs page is
itself cheap (its records read at once, its jobs' encodings kept, the same module). Beyond
the rate: RESOURCE_EXHAUSTED RATE_LIMITED with `retry_after_s` (and RetryInfo) for when the
next token is due. The rate is per replica: a deployment of N replicas lets a tenant N times
as much.

A call whose token is due within `max_wait_s` waits for it (`take`) instead of being refused,
as nginx's limit_req queues a burst: the token is promised to it at once, so at most rate x
max_wait_s of a tenant's calls wait, and a client looping faster than its rate is slowed to
the rate. A refusal is itself a call to answer: four processes looping on refusals (~850 a
second on 2 cores) still cost other tenants' GetStatus its p99 (bench/README.md, "Fair
sharing"); waiting turns them into the rate's trickle of answers.
"""

from __future__ import annotations

import asyncio
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
        max_wait_s: float = 0.0,
    ) -> None:
        self.what = what
        self.rate = per_second
        self.burst = burst or max(1.0, per_second)
        self.clock = clock
        self.max_wait_s = max_wait_s
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, when)

    def check(self, tenant: str) -> None:
        """Takes one token of `tenant`'s bucket; DocparseError RATE_LIMITED when it is empty."""
        self._take(tenant, 0.0)

    async def take(self, tenant: str) -> None:
        """Takes one token of `tenant`'s bucket, waiting for it when it is due within
        `max_wait_s`; DocparseError RATE_LIMITED when it is due later."""
        wait = self._take(tenant, self.max_wait_s)
        if wait > 0:
            await asyncio.sleep(wait)

    def _take(self, tenant: str, patience_s: float) -> float:
        """Seconds until the token taken is due (0: now); refuses past `patience_s`."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        tokens, when = self._buckets.pop(tenant, (self.burst, now))
        tokens = min(self.burst, tokens + (now - when) * self.rate)
        if len(self._buckets) >= MAX_TENANTS:
            del self._buckets[next(iter(self._buckets))]
        due_s = max(0.0, (1.0 - tokens) / self.rate)
        if due_s <= patience_s:
            self._buckets[tenant] = (tokens - 1.0, now)  # promised: later calls wait longer
            return due_s
        self._buckets[tenant] = (tokens, now)
        READS_THROTTLED.labels(tenant, self.what).inc()
        wait = max(1, math.ceil((1.0 - tokens) / self.rate))
        raise error(
            ErrorReason.RATE_LIMITED,
            f"tenant {tenant} may make {self.rate:g} {self.what} calls a second on each "
            f"replica; retry in {wait} s",
            {"retry_after_s": str(wait), "limit_per_s": f"{self.rate:g}", "method": self.what},
        )
