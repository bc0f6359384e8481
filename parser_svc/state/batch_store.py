"""The batch side of JobStore (parser_svc/state/store.py): a batch's create in one step, and its
records read together."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import redis.asyncio as aioredis

from parser_svc.state.keys import Keys, batch_file_id
from parser_svc.state.lifetimes import Lifetimes, now_ms
from parser_svc.state.lua_scripts import CREATE_BATCH, CreateResult
from parser_svc.state.records import decode_hash

T = TypeVar("T")


class _Store(Protocol):
    """What the batch methods use of JobStore."""

    _redis: aioredis.Redis
    keys: Keys
    ttl: Lifetimes
    _durable: dict[str, int]

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T: ...

    async def list_new(self, index: str, entries: Sequence[tuple[str, int]]) -> None: ...

    async def _fields(self, key: str, names: Sequence[str]) -> dict[str, str]: ...


class BatchRecords:
    """Mixed into JobStore."""

    async def create_batch(
        self: _Store,
        batch_id: str,
        tenant: str,
        files: list[dict[str, str]],
        *,
        request_key: str = "",
        digest: str = "",
    ) -> CreateResult:
        """Creates the batch meta record and one QUEUED record per file in one step, or answers
        with the batch an earlier request with the same request key made (REPLAY, or CONFLICT
        for other content). Each file dict holds file_name, content_sha256, content_type and
        size_bytes, and may hold languages (OCR hints, comma separated) and max_pages (the
        tenant's page cap)."""
        ttl = self.ttl
        args: list[str | bytes | int] = [
            now_ms(),
            ttl.queued_ms,
            ttl.retention_ms,
            ttl.tombstone_ms,
            ttl.request_ms,
            digest,
            self.keys.batch_files(batch_id),
            batch_id,
            self.keys.batch_key_prefix,
            tenant,
            len(files),
        ]
        for item in files:
            args += [item["file_name"], item["content_sha256"], item["content_type"]]
            args += [item["size_bytes"], item.get("languages", ""), item.get("max_pages", "")]
        args.append(ttl.listed_ms)  # the last argument, after the files
        index = self.keys.tenant_jobs(tenant)
        keys = [
            self.keys.batch_meta(batch_id),
            request_key,
            self.keys.pending(batch_id),
            "" if self.keys.cells else index,
        ]
        reply = await self.call(lambda: CREATE_BATCH(self._redis, keys, args, **self._durable))
        result = CreateResult.of(reply, batch_id)
        if self.keys.cells and result.created:
            made = int(args[0])
            await self.list_new(
                index, [(batch_file_id(batch_id, i), made) for i in range(len(files))]
            )
        return result

    async def batch_fields(self: _Store, batch_id: str, names: Sequence[str]) -> dict[str, str]:
        """The named fields of the batch's meta record, as job_fields."""
        return await self._fields(self.keys.batch_meta(batch_id), names)

    async def read_batch(
        self: _Store, batch_id: str, indexes: Sequence[int] | None = None
    ) -> tuple[dict[str, str], dict[int, dict[str, str]]]:
        """The batch meta record and its file records by index (all, or those at `indexes`)
        in one MULTI/EXEC: a snapshot where `completed` and the files' states disagree cannot
        be read (the update script moves both at once). The meta is {} once the batch is gone."""
        meta_key = self.keys.batch_meta(batch_id)

        async def read() -> tuple[Any, list[Any], list[int]]:
            wanted = list(indexes) if indexes is not None else None
            if wanted is None:
                total = await self._redis.hget(meta_key, "total")
                if total is None:
                    return {}, [], []
                wanted = list(range(int(total)))
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hgetall(meta_key)
                for index in wanted:
                    pipe.hgetall(self.keys.job(batch_file_id(batch_id, index)))
                meta, *files = await pipe.execute()
            return meta, files, wanted

        meta, files, wanted = await self.call(read)
        return decode_hash(meta), {i: decode_hash(f) for i, f in zip(wanted, files, strict=True)}

    async def batch_version(self: _Store, batch_id: str) -> int | None:
        """The batch's version counter alone (one HGET), None once the batch is gone."""
        value = await self.call(lambda: self._redis.hget(self.keys.batch_meta(batch_id), "version"))
        return int(value) if value is not None else None
