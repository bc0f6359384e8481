"""Batches: many files submitted together, tracked as one.

Each file is an ordinary job with id `<batch_id>-<i>`; the batch meta record holds counters
that the update script moves in the same atomic step as each file's terminal transition, so
`completed k/n` is never out of step with the files. Nothing rewrites one big array.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import grpc

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.errors import cursor_ahead, error
from docparse_server.tenancy import DEFAULT_TENANT
from parser_svc import observability
from parser_svc.api.batch_watch import BatchFollowers, RawBatch
from parser_svc.api.job_options import page_cap
from parser_svc.api.submit import Submitter, check_languages, unsupported
from parser_svc.api.uploads import (
    MAX_FILES,
    StoredFile,
    file_error,
    sniff_stored,
)
from parser_svc.state.caller_scope import current_tenant
from parser_svc.state.events import EventHub
from parser_svc.state.keys import batch_file_id
from parser_svc.state.lua_scripts import CreateResult
from parser_svc.state.records import is_terminal
from parser_svc.state.store import JobStore
from parser_svc.webhooks.outbox import Hook


def batch_digest(records: list[dict[str, str]]) -> str:
    """What a request_id's retry must repeat: every file's name and content, in order. Other
    language hints are other content, and so is another page cap (a key of the same tenant
    with another `max_pages`), as for SubmitJob's request fingerprint."""
    return hashlib.sha256(
        "".join(
            f"{r['file_name']}\0{r['content_sha256']}"
            + (f"\0{r['languages']}" if r["languages"] else "")
            + (f"\0m={r['max_pages']}" if r.get("max_pages") else "")
            + "\n"
            for r in records
        ).encode()
    ).hexdigest()


def batch_not_found(batch_id: str) -> DocparseError:
    return error(
        ErrorReason.BATCH_NOT_FOUND,
        f"batch {batch_id} does not exist (or its retention ended)",
        {"batch_id": batch_id},
    )


def check_owner(batch_id: str, owner: str) -> None:
    tenant = current_tenant()
    if tenant is not None and owner != tenant:
        raise batch_not_found(batch_id)


class Batches:
    def __init__(self, store: JobStore, hub: EventHub, submitter: Submitter) -> None:
        self.store = store
        self.hub = hub
        self.submitter = submitter
        self.followers = BatchFollowers(hub, store.keys, self)

    def new_id(self, request_id: str) -> str:
        """A new batch id; on Redis Cluster in the cell of the caller's request_id (a retry
        finds the first batch there), else a random cell."""
        keys = self.store.keys
        cell = keys.place(current_tenant() or DEFAULT_TENANT, request_id) if request_id else ""
        return keys.new_id(cell)

    async def create(
        self,
        files: Sequence[parser_service_pb2.BatchFile],
        request_id: str = "",
        languages: Sequence[str] = (),
        callback: parser_service_pb2.Callback | None = None,
    ) -> parser_service_pb2.Batch:
        """CreateBatch: the language hints and every file's size, then the tenant's rate and
        the callback, checked before anything reads a file; then the uploads are stored and the
        batch created (`create_stored`). The hints apply to every file."""
        hints = ",".join(check_languages(list(languages)))
        if not files:
            raise error(ErrorReason.EMPTY_BATCH, "a batch needs at least one file")
        if len(files) > MAX_FILES:
            raise error(ErrorReason.TOO_MANY_FILES, f"a batch holds at most {MAX_FILES} files")
        for index, item in enumerate(files):  # all or nothing: reject before creating any
            try:
                self.submitter.check_size(item.content)
            except DocparseError as err:
                raise file_error(index, item.file_name, err) from None
        await self.submitter.check_rate(len(files))
        await self.submitter.check_queued(len(files))
        hook = await self.check_callback(callback)
        batch_id = self.new_id(request_id)
        stored: list[StoredFile] = []
        try:
            for index, item in enumerate(files):
                job_id = batch_file_id(batch_id, index)
                await asyncio.to_thread(self.submitter.blobs.put_input, job_id, item.content)
                size = len(item.content)
                sha256 = hashlib.sha256(item.content).hexdigest()
                stored.append(StoredFile(job_id, item.file_name[:512], size, sha256, size, hints))
        except BaseException:
            stored_ids = [item.job_id for item in stored]
            await asyncio.to_thread(self.submitter.blobs.delete_uploads, stored_ids)
            raise
        return await self.create_stored(batch_id, stored, request_id, hook)

    async def check_callback(self, callback: parser_service_pb2.Callback | None) -> Hook | None:
        """The batch's callback checked as a job's (parser_svc/webhooks/callbacks.py); None
        when it has none."""
        if callback is None:
            return None
        tenant = current_tenant() or DEFAULT_TENANT
        return await self.submitter.callbacks.check_callback(callback, tenant)

    async def create_stored(
        self,
        batch_id: str,
        files: list[StoredFile],
        request_id: str = "",
        hook: Hook | None = None,
    ) -> parser_service_pb2.Batch:
        """Sniffs the stored uploads of `files` (bounded), then creates the batch and all its
        file records in one atomic script and enqueues the files. A retry with the same
        request_id gets the whole first batch (never a part of one); see docs/operations.md.
        Whatever fails here, no upload of this call stays behind unless its outcome is unknown
        (the sweeper decides then)."""
        tenant = current_tenant() or DEFAULT_TENANT
        blobs = self.submitter.blobs
        job_ids = [item.job_id for item in files]

        async def drop_uploads() -> None:
            await asyncio.to_thread(blobs.delete_uploads, job_ids)

        if not files:
            raise error(ErrorReason.EMPTY_BATCH, "a batch needs at least one file")
        records = await self._file_records(files, drop_uploads)
        digest = batch_digest(records)
        request_key = self.store.keys.batch_request(tenant, request_id) if request_id else ""
        outbox = self.submitter.callbacks.outbox
        if hook:  # before the create, as a job's (parser_svc/webhooks/batch_deliveries.py)
            await outbox.add(batch_id, tenant, hook, batch=True)
        try:
            created = await self.store.create_batch(
                batch_id, tenant, records, request_key=request_key, digest=digest
            )
        except DocparseError as err:
            if err.code != grpc.StatusCode.UNAVAILABLE:  # else: the sweeper decides
                await drop_uploads()
                if hook:
                    await outbox.discard(batch_id, hook, batch=True)
            raise
        if not created.created:
            await drop_uploads()
            return await self._answer_earlier(batch_id, created, request_id, hook)
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

    async def _answer_earlier(
        self, batch_id: str, created: CreateResult, request_id: str, hook: Hook | None
    ) -> parser_service_pb2.Batch:
        """The batch an earlier call with the same request_id made (REPLAY), or
        REQUEST_ID_REUSED (CONFLICT); this call's callback follows the batch it answers with."""
        if hook:
            outbox, tenant = self.submitter.callbacks.outbox, current_tenant() or DEFAULT_TENANT
            if created.status != "CONFLICT":
                await outbox.add(created.job_id, tenant, hook, batch=True)
            await outbox.discard(batch_id, hook, batch=True)
        if created.status == "CONFLICT":
            raise error(
                ErrorReason.REQUEST_ID_REUSED,
                f"request_id {request_id[:200]!r} was used for other files "
                f"(batch {created.job_id})",
            )
        batch = await self.get(created.job_id)
        # The first call may have lost its reply before enqueueing: enqueue what waits.
        queued = [job.job_id for job in batch.jobs if job.state == job_pb2.STATE_QUEUED]
        await self.submitter.enqueue(queued)
        return batch

    async def _file_records(
        self, files: list[StoredFile], drop_uploads: Callable[[], Awaitable[None]]
    ) -> list[dict[str, str]]:
        """The file records of the batch, each upload's type sniffed from its stored bytes;
        UNSUPPORTED_FORMAT naming the file (and every upload dropped) for one that is none."""
        records: list[dict[str, str]] = []
        for index, item in enumerate(files):
            detected = await asyncio.to_thread(sniff_stored, self.submitter.blobs, item.job_id)
            if detected.kind is None:
                await drop_uploads()
                raise file_error(index, item.file_name, unsupported(detected.label))
            records.append(
                {
                    "file_name": item.file_name,
                    "content_sha256": item.sha256,
                    "content_type": detected.kind,
                    "size_bytes": str(item.size_bytes),
                    "languages": item.languages,
                }
            )
            if cap := page_cap(self.submitter.settings.parse_max_pages):
                records[-1]["max_pages"] = str(cap)
        return records

    async def get(self, batch_id: str) -> parser_service_pb2.Batch:
        """The batch, if it is the caller's tenant's (another tenant's reads as not found)."""
        owner, batch = await self.read(batch_id)
        check_owner(batch_id, owner)
        return batch

    async def read(self, batch_id: str) -> tuple[str, parser_service_pb2.Batch]:
        """The batch and its tenant, unscoped (the caller checks the tenant)."""
        raw = await self.read_raw(batch_id)
        return raw.tenant, raw.assemble()

    async def read_raw(self, batch_id: str, indexes: Sequence[int] | None = None) -> RawBatch:
        """The meta record and the file records (all, or those at `indexes`) as one snapshot
        (JobStore.read_batch); BATCH_NOT_FOUND once the batch is gone."""
        meta, files = await self.store.read_batch(batch_id, indexes)
        if not meta:
            raise batch_not_found(batch_id)
        return RawBatch(batch_id, meta, files)

    async def meta_version(self, batch_id: str) -> int | None:
        """The batch's version counter alone (one HGET): a cheap check that nothing changed."""
        return await self.store.batch_version(batch_id)

    async def watch(
        self,
        batch_id: str,
        after_version: int,
        *,
        heartbeat_s: float,
        resync_s: float,
    ) -> AsyncIterator[parser_service_pb2.WatchBatchResponse]:
        """Like WatchJob: strictly increasing snapshots, a heartbeat on idle, the end after all
        files are terminal. Every watcher of one batch on this replica shares one follower
        (batch_watch.py), so the Redis cost follows the batch's changes, not its watchers."""
        last = after_version
        last_sent = time.monotonic()
        async with self.followers.follow(batch_id, resync_s) as follower:
            seen, first = 0, True
            while True:
                wait = max(0.0, last_sent + heartbeat_s - time.monotonic())
                snapshot = await follower.next(seen, wait)
                if snapshot is None:
                    beat = parser_service_pb2.Heartbeat(last_version=last)
                    beat.server_time.GetCurrentTime()
                    yield parser_service_pb2.WatchBatchResponse(heartbeat=beat)
                    last_sent = time.monotonic()
                    continue
                seen, (owner, batch) = snapshot
                check_owner(batch_id, owner)
                if first and after_version > batch.version:
                    raise cursor_ahead(batch_id, after_version, batch.version, "batch")
                first = False
                if batch.version > last:
                    yield parser_service_pb2.WatchBatchResponse(batch=batch)
                    last, last_sent = batch.version, time.monotonic()
                if all(is_terminal(job) for job in batch.jobs):
                    return
