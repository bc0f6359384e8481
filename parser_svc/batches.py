"""Batches: many files submitted together, tracked as one.

Each file is an ordinary job with id `<batch_id>-<i>`; the batch meta record holds counters
that the update script moves in the same atomic step as each file's terminal transition, so
`completed k/n` is never out of step with the files. Nothing rewrites one big array.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc

from docparse.errors import DocparseError
from docparse.tenancy import DEFAULT_TENANT
from docparse.v1 import parser_service_pb2
from parser_svc.callers import current_tenant
from parser_svc.events import CLOSING, EventHub, shutting_down
from parser_svc.keys import batch_file_id
from parser_svc.records import decode_hash, is_terminal, record_to_job
from parser_svc.store import JobStore, now_ms
from parser_svc.submit import Submitter, invalid

MAX_FILES = 1000


def batch_not_found(batch_id: str) -> DocparseError:
    return DocparseError(
        grpc.StatusCode.NOT_FOUND,
        "BATCH_NOT_FOUND",
        f"batch {batch_id} does not exist (or its retention ended)",
        {"batch_id": batch_id},
    )


class Batches:
    def __init__(self, store: JobStore, hub: EventHub, submitter: Submitter) -> None:
        self.store = store
        self.hub = hub
        self.submitter = submitter

    async def create(
        self,
        files: Sequence[parser_service_pb2.BatchFile],
        request_id: str = "",
    ) -> parser_service_pb2.Batch:
        tenant = current_tenant() or DEFAULT_TENANT
        if not files:
            raise invalid("EMPTY_BATCH", "a batch needs at least one file")
        if len(files) > MAX_FILES:
            raise invalid("TOO_MANY_FILES", f"a batch holds at most {MAX_FILES} files")
        for index, item in enumerate(files):  # all or nothing: reject before creating any
            try:
                self.submitter.validate(item.content)
            except DocparseError as err:
                err.metadata.update({"file_index": str(index), "file_name": item.file_name})
                err.message = f"file {index} ({item.file_name!r}): {err.message}"
                raise
        await self.submitter.check_rate(len(files))
        batch_id = uuid.uuid4().hex
        if request_id:
            first = await self._claim_request(tenant, request_id, batch_id)
            if first != batch_id:
                return await self.get(first)
        await self._create_meta(batch_id, len(files), tenant)
        for index, item in enumerate(files):
            request = parser_service_pb2.SubmitJobRequest(
                file_name=item.file_name, content=item.content
            )
            await self.submitter.submit(
                request, batch_id=batch_id, job_id=batch_file_id(batch_id, index)
            )
        return await self.get(batch_id)

    async def _claim_request(self, tenant: str, request_id: str, batch_id: str) -> str:
        key = self.store.keys.batch_request(tenant, request_id)
        ttl_ms = self.store.settings.request_id_ttl_s * 1000

        async def claim() -> str:
            if await self.store.client.set(key, batch_id, nx=True, px=ttl_ms):
                return batch_id
            first = await self.store.client.get(key)
            return first.decode() if isinstance(first, bytes) else str(first)

        return await self.store.call(claim)

    async def _create_meta(self, batch_id: str, total: int, tenant: str) -> None:
        s = self.store.settings
        key = self.store.keys.batch_meta(batch_id)

        async def write() -> None:
            async with self.store.client.pipeline(transaction=True) as pipe:
                pipe.hset(
                    key,
                    mapping={
                        "batch_id": batch_id,
                        "tenant": tenant,
                        "total": total,
                        "completed": 0,
                        "succeeded": 0,
                        "failed": 0,
                        "cancelled": 0,
                        "create_ms": now_ms(),
                    },
                )
                pipe.pexpire(key, (s.queued_ttl_s + s.retention_s) * 1000)
                await pipe.execute()

        await self.store.call(write)

    async def get(self, batch_id: str) -> parser_service_pb2.Batch:
        keys = self.store.keys

        async def read() -> tuple[Any, list[Any]]:
            total = await self.store.client.hget(keys.batch_meta(batch_id), "total")
            if total is None:
                return {}, []
            # Counters and file records in one MULTI/EXEC: a snapshot where `completed` and
            # the files' states disagree cannot be read (the update script moves both at once).
            async with self.store.client.pipeline(transaction=True) as pipe:
                pipe.hgetall(keys.batch_meta(batch_id))
                for index in range(int(total)):
                    pipe.hgetall(keys.job(batch_file_id(batch_id, index)))
                meta, *files = await pipe.execute()
            return meta, files

        raw_meta, raw_files = await self.store.call(read)
        if not raw_meta:
            raise batch_not_found(batch_id)
        meta = decode_hash(raw_meta)
        tenant = current_tenant()
        if tenant is not None and meta.get("tenant", DEFAULT_TENANT) != tenant:
            raise batch_not_found(batch_id)
        batch = parser_service_pb2.Batch(
            batch_id=batch_id,
            total=int(meta["total"]),
            completed=int(meta["completed"]),
            succeeded=int(meta["succeeded"]),
            failed=int(meta["failed"]),
            cancelled=int(meta["cancelled"]),
        )
        batch.create_time.FromMilliseconds(int(meta["create_ms"]))
        for index, raw in enumerate(raw_files):
            job = record_to_job(decode_hash(raw))
            if not raw:  # expired ahead of the meta record: say which file it was
                job.job_id = batch_file_id(batch_id, index)
            batch.jobs.append(job)
        batch.version = sum(job.version for job in batch.jobs)
        return batch

    async def watch(
        self,
        batch_id: str,
        after_version: int,
        *,
        heartbeat_s: float,
        resync_s: float,
    ) -> AsyncIterator[parser_service_pb2.WatchBatchResponse]:
        """Like WatchJob: subscribe, snapshot, then a new snapshot on every change of any file
        (coalesced), strictly increasing versions, ending after all files are terminal."""
        last = after_version
        last_sent = time.monotonic()
        async with self.hub.subscribe(self.store.keys.batch_channel(batch_id)) as queue:
            while True:
                batch = await self.get(batch_id)
                if batch.version > last:
                    yield parser_service_pb2.WatchBatchResponse(batch=batch)
                    last, last_sent = batch.version, time.monotonic()
                if batch.completed >= batch.total and all(is_terminal(j) for j in batch.jobs):
                    return
                wait = max(0.0, min(resync_s, last_sent + heartbeat_s - time.monotonic()))
                try:
                    event = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    if time.monotonic() - last_sent >= heartbeat_s:
                        beat = parser_service_pb2.Heartbeat(last_version=last)
                        beat.server_time.GetCurrentTime()
                        yield parser_service_pb2.WatchBatchResponse(heartbeat=beat)
                        last_sent = time.monotonic()
                    continue
                if event is CLOSING:
                    raise shutting_down()
                # Coalesce a burst of file events into one snapshot.
                await asyncio.sleep(0.05)
                while not queue.empty():
                    if queue.get_nowait() is CLOSING:
                        raise shutting_down()
