"""Turns at the gateway's render workers, shared fairly between tenants.

A result render (JSON, text, Markdown, HTML) is seconds of CPU for a big package. First come
first served with an unbounded queue let one tenant's six big renders hold every worker and
every place in line while another tenant's one-page result waited behind them. Here:

- at most `workers` renders run at once (one per worker process);
- each tenant has its own line; when a worker frees up, the waiting tenant served least
  recently goes next (round-robin between tenants, first come first served within one);
- a tenant holds at most `per_tenant` renders, running and waiting, and the gateway at most
  `max_waiting` waiting in all: beyond either, RESOURCE_EXHAUSTED TOO_MANY_RENDERS (HTTP 429
  with Retry-After) at once, before anything is fetched;
- a request takes its turn before it fetches the result (gateway/http/render_turns.py), so a
  waiting request holds no package in memory;
- small results (`http_render_small_bytes`, known from the job's ResultRef before the fetch)
  have a lane and a worker process of their own: a one-page result waits for other small
  renders (milliseconds), never for a big one (seconds), whatever the tenants.

Everything runs on the gateway's event loop: no lock, no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from docparse.reasons import ErrorReason
from docparse_server.errors import error
from gateway.http.rendering import Renderer
from gateway.observability import RENDERS_QUEUED, RENDERS_REFUSED, RENDERS_RUNNING


class Turn:
    """A worker held for one render; `release` (once is enough, more is harmless) gives it to
    the next in line as soon as the render is done, before the answer is written out."""

    def __init__(self, end: Callable[[], None]) -> None:
        self._end: Callable[[], None] | None = end

    def release(self) -> None:
        end, self._end = self._end, None
        if end is not None:
            end()


class RenderQueue:
    def __init__(self, workers: int, per_tenant: int, max_waiting: int) -> None:
        self.workers = max(1, workers)
        self.per_tenant = per_tenant  # 0: no per-tenant limit
        self.max_waiting = max_waiting  # 0: no overall limit on waiting renders
        self._running = 0
        self._held: dict[str, int] = {}  # running + waiting, per tenant
        self._lines: dict[str, deque[asyncio.Future[None]]] = {}
        self._served: dict[str, int] = {}  # when each tenant last got a turn
        self._clock = itertools.count(1)

    def waiting(self, tenant: str | None = None) -> int:
        if tenant is not None:
            return len(self._lines.get(tenant, ()))
        return sum(len(line) for line in self._lines.values())

    def _admit(self, tenant: str) -> None:
        held, waiting = self._held.get(tenant, 0), self.waiting()
        if self.per_tenant > 0 and held >= self.per_tenant:
            limit, what = self.per_tenant, f"this tenant already has {held} result renders"
        elif self.max_waiting > 0 and self._running >= self.workers and waiting >= self.max_waiting:
            limit, what = self.max_waiting, f"the gateway already has {waiting} renders"
        else:
            return
        RENDERS_REFUSED.labels(tenant).inc()
        raise error(
            ErrorReason.TOO_MANY_RENDERS,
            f"{what} running or waiting, its limit; retry in a moment, or ask for "
            "format=proto (never queued)",
            {"limit": str(limit), "retry_after_s": "1"},
        )

    @contextlib.asynccontextmanager
    async def turn(self, tenant: str) -> AsyncIterator[Turn]:
        """Holds one of the workers for `tenant` until the block ends or the turn is released;
        waits in the tenant's line for it; DocparseError TOO_MANY_RENDERS when over a limit."""
        self._admit(tenant)
        self._held[tenant] = self._held.get(tenant, 0) + 1
        try:
            await self._wait(tenant)
        except BaseException:
            self._drop(tenant)
            raise
        RENDERS_RUNNING.labels(tenant).inc()
        held = Turn(lambda: self._end(tenant))
        try:
            yield held
        finally:
            held.release()

    def _end(self, tenant: str) -> None:
        RENDERS_RUNNING.labels(tenant).dec()
        self._running -= 1
        self._drop(tenant)
        self._next()

    async def _wait(self, tenant: str) -> None:
        if self._running < self.workers and not self.waiting():
            self._running += 1
            self._served[tenant] = next(self._clock)
            return
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lines.setdefault(tenant, deque()).append(ticket)
        RENDERS_QUEUED.labels(tenant).inc()
        try:
            await ticket
        except BaseException:
            if ticket.done() and not ticket.cancelled():  # given a turn, then cancelled
                self._running -= 1
                self._next()
            else:
                self._leave(tenant, ticket)
            raise

    def _leave(self, tenant: str, ticket: asyncio.Future[None]) -> None:
        line = self._lines.get(tenant)
        if line is not None and any(t is ticket for t in line):
            line.remove(ticket)
            RENDERS_QUEUED.labels(tenant).dec()
            if not line:
                del self._lines[tenant]

    def _drop(self, tenant: str) -> None:
        left = self._held.get(tenant, 1) - 1
        if left > 0:
            self._held[tenant] = left
        else:
            self._held.pop(tenant, None)
            self._served.pop(tenant, None)

    def _next(self) -> None:
        """Gives free workers to the waiting tenants served least recently."""
        while self._running < self.workers and self._lines:
            tenant = min(self._lines, key=lambda t: self._served.get(t, 0))
            line = self._lines[tenant]
            ticket = line.popleft()
            if not line:
                del self._lines[tenant]
            RENDERS_QUEUED.labels(tenant).dec()
            if ticket.done():  # cancelled while waiting; its request is gone
                continue
            self._running += 1
            self._served[tenant] = next(self._clock)
            ticket.set_result(None)


@dataclass
class Lane:
    queue: RenderQueue
    renderer: Renderer


@dataclass
class Lanes:
    """Big results render in `big` (`http_render_workers` processes); results of at most
    `small_bytes` in `small`, a worker of their own, so a one-page result never waits behind
    another tenant's seconds-long renders (None: one lane for all)."""

    big: Lane
    small: Lane | None
    small_bytes: int

    def for_size(self, size_bytes: int) -> Lane:
        if self.small is not None and size_bytes <= self.small_bytes:
            return self.small
        return self.big

    def close(self) -> None:
        for lane in (self.big, self.small):
            if lane is not None:
                lane.renderer.close()
