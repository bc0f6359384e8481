"""Fair admission's Redis side: the tenants' pending lists in front of BullMQ (lua/fair_admit.lua).

A created job is not added to BullMQ at once: it is pushed onto its tenant's pending list of its
lane, and admission moves job ids from those lists into BullMQ while fewer than a window of jobs
wait there unclaimed, taking the interactive lane first (one bulk job after every `bulk_every`
interactive ones while bulk waits) and, within a lane, tenants by weighted fair queuing. The
script answers with the ids it admitted and the caller adds them to BullMQ (parser_svc/work/
queue.py): the queue job id is the job id, so an add repeated after a lost reply is a no-op, and
an id the caller never added (it died, or lost the reply) waits in the admitting set, where the
sweeper finds it (parser_svc/work/sweeper.py).

Every key is in the queue's slot (`{bull}` on Redis Cluster: parser_svc/state/keys.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisClusterException, RedisError

from docparse_server.cpus import usable_cpus
from docparse_server.errors import store_unavailable
from parser_svc.settings import Settings
from parser_svc.state.keys import Keys
from parser_svc.state.lifetimes import now_ms
from parser_svc.state.lua_scripts import FAIR_ADMIT, FAIR_SHARES
from parser_svc.state.store_errors import store_error, unavailable_detail

Lane = Literal["interactive", "bulk"]
T = TypeVar("T")
_UNAVAILABLE = (TimeoutError, OSError, RedisError, RedisClusterException)


@dataclass(frozen=True)
class Push:
    """A created job for its tenant's pending list."""

    job_id: str
    tenant: str
    lane: Lane = "bulk"
    # The tenant's weight (its key's); None leaves the one its last push set (the sweeper's).
    weight: float | None = None
    # The tenant's cap on jobs in flight (its key's max_running_jobs; 0: none); None leaves
    # the one its last push set.
    cap: int | None = None


@dataclass(frozen=True)
class TenantShare:
    """One tenant's jobs under fair admission now."""

    tenant: str
    queued: int  # pushed, not yet claimed by a worker (on a pending list or waiting in BullMQ)
    pending_interactive: int  # on its pending list of the interactive lane
    pending_bulk: int  # on its pending list of the bulk lane
    running: int  # claimed, and active in BullMQ
    weight: float  # the weight its last push carried (1 when none did)


@dataclass(frozen=True)
class Shares:
    """The tenants with jobs queued or running, and what the lanes let into BullMQ."""

    tenants: list[TenantShare]
    bulk_slots: int  # the worker replicas' registered bulk slots (0: none registered)
    window: int  # jobs admitted to BullMQ and not yet claimed, at most (the interactive cap)
    bulk_every: int  # one bulk admission after this many interactive ones while bulk waits
    waiting: int  # jobs waiting in BullMQ for a worker
    active: int  # jobs active in BullMQ


def slots(settings: Settings) -> int:
    """The replica's parse slots for bulk jobs (its queue worker runs `admit_reserve` more, for
    the interactive lane, with fair admission)."""
    return settings.worker_concurrency or usable_cpus()


def window(settings: Settings) -> int:
    """Jobs admitted to BullMQ and not yet claimed, at most: `admit_window`, or twice the
    replica's parse slots."""
    return settings.admit_window or 2 * slots(settings)


class Admission:
    def __init__(self, client: aioredis.Redis, settings: Settings) -> None:
        self._redis = client
        self._timeout_s = settings.redis_timeout_s
        keys = Keys.of(settings)
        queue = settings.queue_name
        self._prefix = keys.fair(queue)
        self._keys = [
            f"{self._prefix}queued",
            keys.queue_list(queue, "wait"),
            keys.queue_list(queue, "prioritized"),
            keys.queue_list(queue, "active"),
        ]
        self._jobs = keys.queue_job(queue, "")
        self._share_keys = [
            f"{self._prefix}running",
            f"{self._prefix}counts",
            *self._keys[3:4],
            *self._keys[1:3],
        ]
        self._window = window(settings)
        self._bulk_every = settings.admit_bulk_every

    @property
    def admitting(self) -> str:
        """The sorted set of admitted job ids (score: when, ms) until a worker claims them."""
        return f"{self._prefix}admitting"

    async def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self._timeout_s):
                return await fn()
        except _UNAVAILABLE as err:
            if isinstance(err, RedisError) and "OOM command not allowed" in str(err):
                raise store_error(err) from err
            raise store_unavailable(f"admission failed: {unavailable_detail(err)}") from err

    async def run(
        self,
        push: Push | None = None,
        claimed: Sequence[str] = (),
        register: tuple[str, int, int] | None = None,
    ) -> tuple[bool, list[tuple[str, str]]]:
        """Forgets the `claimed` jobs (out of the queued and admitting indexes), pushes `push`
        (False when it was queued already: a no-op), registers a worker replica's bulk slots
        (`register`: its name, its slots, 0 when it leaves, and how long the entry holds, ms),
        then admits: the (job id, lane) pairs the caller now adds to BullMQ."""
        name, slots, ttl_ms = register or ("", 0, 0)
        args: list[str | bytes | int] = [
            self._prefix,
            self._window,
            self._bulk_every,
            now_ms(),
            push.job_id if push else "",
            push.tenant if push else "",
            push.lane if push else "",
            repr(max(push.weight, 0.001)) if push and push.weight else "",
            self._jobs,
            " ".join(claimed),
            name,
            slots,
            now_ms() + ttl_ms,
            "" if push is None or push.cap is None else max(push.cap, 0),
        ]
        reply = await self._call(lambda: FAIR_ADMIT(self._redis, self._keys, args))
        ids = [str(item) for item in reply[1:]]
        admitted = [(job, lane) for job, lane in zip(ids[::2], ids[1::2], strict=True)]
        return bool(int(reply[0])), admitted

    async def queued(self, tenant: str) -> int:
        """The tenant's jobs pushed and not yet claimed by a worker."""
        count = await self._call(lambda: self._redis.hget(f"{self._prefix}counts", tenant))
        return int(count or 0)

    async def queued_by_tenant(self) -> dict[str, int]:
        """Every tenant's count of jobs pushed and not yet claimed (the per-tenant gauge)."""
        counts = await self._call(lambda: self._redis.hgetall(f"{self._prefix}counts"))
        return {str(tenant): int(n) for tenant, n in counts.items()}

    async def backlog(self) -> int:
        """Jobs on the pending lists (the `backlog` list's length: what an autoscaler reads)."""
        return int(await self._call(lambda: self._redis.llen(f"{self._prefix}backlog")))

    async def admitting_due(self, until_ms: int, limit: int) -> list[str]:
        """Up to `limit` ids admitted by `until_ms` and not yet claimed, earliest first."""
        found = await self._call(
            lambda: self._redis.zrangebyscore(self.admitting, "-inf", until_ms, start=0, num=limit)
        )
        return [str(job) for job in found]

    async def shares(self) -> Shares:
        """Every tenant's jobs queued and running now, with its weight, and the lanes' caps
        (lua/fair_shares.lua, which also forgets the running index's finished jobs): the
        per-tenant gauges and the admin read of the current share."""
        args: list[str | bytes | int] = [self._prefix, self._jobs, now_ms()]
        reply = await self._call(lambda: FAIR_SHARES(self._redis, self._share_keys, args))
        slots_, waiting, active = (int(n) for n in reply[:3])
        rows = reply[3:]
        tenants = [
            TenantShare(
                _text(rows[i]),
                int(rows[i + 1]),
                int(rows[i + 2]),
                int(rows[i + 3]),
                int(rows[i + 4]),
                float(_text(rows[i + 5]) or 1),
            )
            for i in range(0, len(rows), 6)
        ]
        return Shares(tenants, slots_, self._window, self._bulk_every, waiting, active)


def _text(value: bytes | int | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
