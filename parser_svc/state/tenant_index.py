"""A tenant's job index (`Keys.tenant_jobs`): a sorted set of job ids by creation time (ms).

The create scripts add every job (batch files too) in the same step as its record; this class
owns every other read and write of the index: slices of it (lua/list_index.lua, one key,
atomic), the records its entries name (one pipeline), and dropping entries whose record is gone
(the retention ended). parser_svc.api.listing builds ListJobs pages on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from parser_svc.state.lua_scripts import LuaScript
from parser_svc.state.store import JobStore

LIST_INDEX = LuaScript("list_index.lua")


@dataclass(frozen=True)
class Window:
    """The part of the index a listing reads: create times (ms, inclusive) and an id prefix."""

    newest_ms: int | None = None
    oldest_ms: int | None = None
    prefix: str = ""


@dataclass(frozen=True)
class Cursor:
    """The last index entry a page examined: the next page starts after it."""

    create_ms: int
    job_id: str


@dataclass(frozen=True)
class Slice:
    """Entries (job id, create ms) after a cursor, how many entries were examined, the last of
    them, and whether the index ended there."""

    entries: list[tuple[str, int]]
    examined: int
    last: Cursor | None
    ended: bool


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class TenantIndex:
    def __init__(self, store: JobStore) -> None:
        self.store = store

    async def slice(
        self, tenant: str, cursor: Cursor | None, window: Window, want: int, budget: int
    ) -> Slice:
        """Up to `want` entries after `cursor` in `window`, newest first, examining at most
        `budget` entries."""
        keys = [self.store.keys.tenant_jobs(tenant)]
        newest = cursor.create_ms if cursor else window.newest_ms
        args: list[str | bytes | int] = [
            "+inf" if newest is None else str(newest),
            cursor.job_id if cursor else "",
            "-inf" if window.oldest_ms is None else str(window.oldest_ms),
            want,
            window.prefix,
            budget,
        ]
        reply = await self.store.call(lambda: LIST_INDEX(self.store._redis, keys, args))
        ended, examined, last_id, last_ms, *pairs = (text(item) for item in reply)
        last = Cursor(int(float(last_ms)), last_id) if last_id else None
        entries = [(pairs[i], int(float(pairs[i + 1]))) for i in range(0, len(pairs), 2)]
        return Slice(entries, int(examined), last, ended == "1")

    async def records(
        self, job_ids: Sequence[str], fields: Sequence[str] | None = None
    ) -> list[Any]:
        """The records of `job_ids` in one pipeline, in order: whole (HGETALL: {} when gone) or
        the named `fields` (HMGET: Nones when gone)."""
        client, keys = self.store._redis, self.store.keys

        async def read() -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                for job_id in job_ids:
                    if fields is None:
                        pipe.hgetall(keys.job(job_id))
                    else:
                        pipe.hmget(keys.job(job_id), list(fields))
                return list(await pipe.execute())

        return await self.store.call(read)

    async def whole_records(self, job_ids: Sequence[str]) -> list[dict[bytes, bytes]]:
        """The records of `job_ids` as Redis holds them, in order ({} when gone): sent at once
        on the store's pipelined reader where it has one (parser_svc/state/pipelined_reads.py),
        else in one pipeline."""
        reads = self.store._reads
        if reads is None:
            return await self.records(job_ids)
        keys = [self.store.keys.job(job_id) for job_id in job_ids]
        return await self.store.call(lambda: reads.hgetall_many(keys), timed=False)

    async def forget(self, tenant: str, gone: Sequence[str]) -> None:
        """Drops entries whose record is gone."""
        if gone:
            index = self.store.keys.tenant_jobs(tenant)
            await self.store.call(lambda: self.store._redis.zrem(index, *gone))
