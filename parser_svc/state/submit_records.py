"""The submit side of JobStore (parser_svc/state/store.py): what a submit counts and remembers
before its create (a tenant's rate window, the first content of a request id on Redis Cluster)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import redis.asyncio as aioredis

from parser_svc.state.keys import Keys
from parser_svc.state.lifetimes import Lifetimes

T = TypeVar("T")


class _Store(Protocol):
    """What the submit methods use of JobStore."""

    _redis: aioredis.Redis
    keys: Keys
    ttl: Lifetimes

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T: ...


class SubmitRecords:
    """Mixed into JobStore."""

    async def count_submits(self: _Store, tenant: str, minute: int, files: int) -> int:
        """Adds `files` to the tenant's submits in `minute` (epoch minutes), counted in Redis so
        every replica shares the count, and answers the new count. A count lives 2 minutes."""
        key = self.keys.submit_count(tenant, minute)

        async def count() -> int:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.incrby(key, files)
                pipe.expire(key, 120)
                used, _ = await pipe.execute()
            return int(used)

        return await self.call(count)

    async def first_content(self: _Store, tenant: str, request_id: str, sha256: str) -> str:
        """The sha256 of the content (tenant, request_id) was first used with: `sha256` itself
        when this is its first use, which it then records (SET NX, kept as long as the
        request's idempotency record, in the request's own cell: `Keys.request_content`)."""
        key = self.keys.request_content(tenant, request_id)
        ttl_ms = self.ttl.request_ms
        first = await self.call(lambda: self._redis.set(key, sha256, nx=True, px=ttl_ms, get=True))
        if first is None:
            return sha256
        return first.decode() if isinstance(first, bytes) else str(first)
