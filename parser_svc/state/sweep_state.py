"""What the sweeper (parser_svc/work/sweeper.py) reads and writes in Redis: its lease, the time
indexes it works through (pending: created, not yet seen in the queue; retained: ended, by the
time their record expires), the records and queue entries of the jobs they name, and, on Redis
Cluster, the tenant's job index a creator may have left a job out of."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from parser_svc.state.store import JobStore


def _text(value: object) -> str | None:
    return value.decode() if isinstance(value, bytes) else None if value is None else str(value)


class PendingJob(NamedTuple):
    """A pending job as the sweeper sees it: its record's state, tenant and create time (None
    where the record has none), and whether the queue has an entry for it and has finished it."""

    job_id: str
    state: str | None
    tenant: str | None
    create_ms: int | None
    queued: bool
    finished: bool


class SweepState:
    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.keys = store.keys

    async def hold_lease(self, owner: str, ttl_ms: int) -> bool:
        """The sweeper's lease (`JobStore.hold_lease`): one replica sweeps at a time."""
        return await self.store.hold_lease(self.keys.sweeper_lease, owner, ttl_ms)

    def indexes(self, name: str) -> list[str]:
        """Every `pending` or `retained` index: one, or one per Redis Cluster cell."""
        return self.keys.index_sets(name)

    async def due(self, index: str, until_ms: int, limit: int) -> list[str]:
        """Up to `limit` job ids of a time index due by `until_ms`, earliest first."""
        redis = self.store._redis
        found = await self.store.call(
            lambda: redis.zrangebyscore(index, "-inf", until_ms, start=0, num=limit)
        )
        return [_text(i) or "" for i in found]

    async def reschedule(self, index: str, due: dict[str, int]) -> None:
        """Moves these entries of a time index to new times (job id -> ms)."""
        if due:
            await self.store.call(lambda: self.store._redis.zadd(index, due))

    async def done(self, index: str, job_ids: Sequence[str]) -> None:
        """Takes these entries out of a time index."""
        if job_ids:
            await self.store.call(lambda: self.store._redis.zrem(index, *job_ids))

    async def record_ttls(self, job_ids: Sequence[str]) -> list[int]:
        """How long each job's record lives on (ms; Redis' PTTL: < 0 when it is gone)."""

        async def read() -> list[int]:
            async with self.store._redis.pipeline(transaction=False) as pipe:
                for job_id in job_ids:
                    pipe.pttl(self.keys.job(job_id))
                return [int(ttl) for ttl in await pipe.execute()]

        return await self.store.call(read)

    async def job_states(self, job_ids: Sequence[str]) -> list[str | None]:
        """Each job's state, None when it has no record."""

        async def read() -> list[object]:
            async with self.store._redis.pipeline(transaction=False) as pipe:
                for job_id in job_ids:
                    pipe.hget(self.keys.job(job_id), "state")
                return list(await pipe.execute())

        return [_text(state) for state in await self.store.call(read)]

    async def pending_jobs(self, job_ids: Sequence[str], queue: str) -> list[PendingJob]:
        """Each job's record and its entry in the queue named `queue`, read in one pipeline."""

        async def read() -> list[list[object]]:
            async with self.store._redis.pipeline(transaction=False) as pipe:
                for job_id in job_ids:
                    pipe.hmget(self.keys.job(job_id), "state", "tenant", "create_ms")
                    pipe.hmget(self.keys.queue_job(queue, job_id), "timestamp", "finishedOn")
                return list(await pipe.execute())

        replies = await self.store.call(read)
        found = []
        for job_id, record, entry in zip(job_ids, replies[::2], replies[1::2], strict=True):
            state, tenant, create_ms = (_text(value) for value in record)
            queued_at, finished_at = entry
            made = int(create_ms) if create_ms is not None else None
            queued = queued_at is not None
            found.append(PendingJob(job_id, state, tenant, made, queued, finished_at is not None))
        return found

    @property
    def lists_after_create(self) -> bool:
        """Redis Cluster: a job enters its tenant's job index in a step after its create
        (`JobStore.list_new`), which the sweeper repeats for a creator that died in between."""
        return bool(self.keys.cells)

    async def list_new(self, tenant: str, entries: Sequence[tuple[str, int]]) -> None:
        """Lists jobs (id, create ms) in their tenant's job index (`JobStore.list_new`)."""
        await self.store.list_new(self.keys.tenant_jobs(tenant), entries)
