"""Batches: many files submitted together, tracked as one.

Each file is an ordinary job with id `<batch_id>-<i>`; the batch meta record holds counters
that the update script moves in the same atomic step as each file's terminal transition, so
`completed k/n` is never out of step with the files. Nothing rewrites one big array.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc

from docparse import observability
from docparse.errors import DocparseError
from docparse.tenancy import DEFAULT_TENANT
from docparse.v1 import job_pb2, parser_service_pb2
from parser_svc.callers import current_tenant
from parser_svc.events import CLOSING, EventHub, shutting_down
from parser_svc.keys import batch_file_id
from parser_svc.records import decode_hash, is_terminal, record_to_job
from parser_svc.store import JobStore
from parser_svc.submit import Submitter, invalid, unsupported
from parser_svc.uploads import (
    MAX_FILES,
    StoredFile,
    file_error,
    sniff_stored,
)


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
        """CreateBatch: every file's size, then the tenant's rate, checked before anything reads
        a file; then the uploads are stored and the batch created (`create_stored`)."""
        if not files:
            raise invalid("EMPTY_BATCH", "a batch needs at least one file")
        if len(files) > MAX_FILES:
            raise invalid("TOO_MANY_FILES", f"a batch holds at most {MAX_FILES} files")
        for index, item in enumerate(files):  # all or nothing: reject before creating any
            try:
                self.submitter.check_size(item.content)
            except DocparseError as err:
                raise file_error(index, item.file_name, err) from None
        await self.submitter.check_rate(len(files))
        batch_id = uuid.uuid4().hex
        stored: list[StoredFile] = []
        try:
            for index, item in enumerate(files):
                job_id = batch_file_id(batch_id, index)
                await asyncio.to_thread(self.submitter.blobs.put_input, job_id, item.content)
                size = len(item.content)
                sha256 = hashlib.sha256(item.content).hexdigest()
                stored.append(StoredFile(job_id, item.file_name[:512], size, sha256, size))
        except BaseException:
            for done in stored:
                self.submitter.blobs.delete_upload(done.job_id)
            raise
        return await self.create_stored(batch_id, stored, request_id)

    async def create_stored(
        self, batch_id: str, files: list[StoredFile], request_id: str = ""
    ) -> parser_service_pb2.Batch:
        """Sniffs the stored uploads of `files` (bounded), then creates the batch and all its
        file records in one atomic script and enqueues the files. A retry with the same
        request_id gets the whole first batch (never a part of one); see docs/operations.md.
        Whatever fails here, no upload of this call stays behind unless its outcome is unknown
        (the sweeper decides then)."""
        tenant = current_tenant() or DEFAULT_TENANT
        blobs = self.submitter.blobs
        job_ids = [item.job_id for item in files]

        def drop_uploads() -> None:
            for job_id in job_ids:
                blobs.delete_upload(job_id)

        if not files:
            raise invalid("EMPTY_BATCH", "a batch needs at least one file")
        records: list[dict[str, str]] = []
        for index, item in enumerate(files):
            detected = await asyncio.to_thread(sniff_stored, blobs, item.job_id)
            if detected.kind is None:
                drop_uploads()
                raise file_error(index, item.file_name, unsupported(detected.label))
            records.append(
                {
                    "file_name": item.file_name,
                    "content_sha256": item.sha256,
                    "content_type": detected.kind,
                    "size_bytes": str(item.size_bytes),
                }
            )
        digest = hashlib.sha256(
            "".join(f"{r['file_name']}\0{r['content_sha256']}\n" for r in records).encode()
        ).hexdigest()
        request_key = self.store.keys.batch_request(tenant, request_id) if request_id else ""
        try:
            created = await self.store.create_batch(
                batch_id, tenant, records, request_key=request_key, digest=digest
            )
        except DocparseError as err:
            if err.code != grpc.StatusCode.UNAVAILABLE:  # else: the sweeper decides
                drop_uploads()
            raise
        if not created.created:
            drop_uploads()
            if created.status == "CONFLICT":
                raise invalid(
                    "REQUEST_ID_REUSED",
                    f"request_id {request_id[:200]!r} was used for other files "
                    f"(batch {created.job_id})",
                )
            batch = await self.get(created.job_id)
            # The first call may have lost its reply before enqueueing: enqueue what waits.
            queued = [job.job_id for job in batch.jobs if job.state == job_pb2.STATE_QUEUED]
            await self.submitter.enqueue(queued)
            return batch
        for job_id, record in zip(job_ids, records, strict=True):
            observability.job_created(
                job_id,
                tenant=tenant,
                content_type=record["content_type"],
                size_bytes=int(record["size_bytes"]),
                batch_id=batch_id,
                file_name=record["file_name"],
            )
        await self.submitter.enqueue(job_ids)
        return await self.get(batch_id)

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
            if raw:
                batch.jobs.append(record_to_job(decode_hash(raw)))
                continue
            # A file record gone while its batch lives: it waited in the queue past its TTL
            # (files of a batch otherwise live as long as the batch). It will never end, so
            # the batch reports it as ended: FAILED JOB_EXPIRED.
            job = batch.jobs.add(job_id=batch_file_id(batch_id, index), batch_id=batch_id)
            job.state = job_pb2.STATE_FAILED
            job.error.reason = "JOB_EXPIRED"
            job.error.message = "the file's record expired before it ran"
            batch.completed += 1
            batch.failed += 1
        # The batch's own version counter moves with every file write (same script), so it
        # never goes back when files expire; older batches without it sum their files'.
        batch.version = int(meta.get("version") or sum(job.version for job in batch.jobs))
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
                if all(is_terminal(job) for job in batch.jobs):
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
