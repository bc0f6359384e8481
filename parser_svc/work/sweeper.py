"""The sweeper: repairs what a lost reply or a dead replica leaves between two writes.

Submitting is two writes, the create script and the queue add. Each is safe to repeat, and a
submit repeats the add whenever it answers with a job that is still QUEUED, but a replica can
die, or lose a reply, between the two. So every create also puts the job in a pending index
(a sorted set scored by create time), and the sweeper, on one worker replica at a time (a lease
in Redis), looks at entries older than `sweep_enqueue_after_s`:

- the record is QUEUED and the queue has no entry for it: enqueue it (idempotent: the queue
  job id is the job id), or, when the queue entry already finished, replace it;
- anything else (queued, ended, or gone): the entry is done.

It also deletes uploads older than `sweep_uploads_after_s` whose job was never created (a
create whose outcome was unknown keeps its upload until now) or has already ended, and, driven
by the retained index (every terminal write enters the job with its record's expiry), every
blob of a job whose record has expired: results, assets, the upload and its password file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import defaultdict
from dataclasses import dataclass
from typing import cast

from docparse.errors import DocparseError
from parser_svc import observability
from parser_svc.settings import Settings
from parser_svc.state.lifetimes import now_ms
from parser_svc.state.records import TERMINAL_STATES
from parser_svc.state.store import JobStore
from parser_svc.work.blobs import BlobStore
from parser_svc.work.queue import JobQueue

log = logging.getLogger(__name__)
BATCH = 500


@dataclass
class SweepReport:
    enqueued: int = 0
    confirmed: int = 0
    uploads_deleted: int = 0
    expired_jobs: int = 0


class Sweeper:
    def __init__(
        self, settings: Settings, store: JobStore, queue: JobQueue, blobs: BlobStore
    ) -> None:
        self.settings = settings
        self.store = store
        self.queue = queue
        self.blobs = blobs
        self.owner = f"{socket.gethostname()}/{os.getpid()}"

    async def run(self) -> None:
        """Sweeps every `sweep_interval_s` while this replica holds the lease; never raises."""
        while True:
            try:
                if await self.hold_lease():
                    report = await self.sweep_once()
                    if report.enqueued or report.uploads_deleted:
                        log.warning(
                            "sweeper repaired: %d jobs enqueued, %d uploads deleted",
                            report.enqueued,
                            report.uploads_deleted,
                            extra={"event": "sweeper.repaired"},
                        )
            except DocparseError as err:
                log.info("sweep skipped: %s", err)
            except Exception:
                log.exception("sweep failed")
            await asyncio.sleep(self.settings.sweep_interval_s)

    async def hold_lease(self) -> bool:
        ttl_ms = int(self.settings.sweep_interval_s * 3000)
        lease = self.store.keys.sweeper_lease
        return await self.store.hold_lease(lease, self.owner, ttl_ms)

    async def sweep_once(self) -> SweepReport:
        report = SweepReport()
        keys = self.store.keys
        for pending in keys.index_sets("pending"):  # one, or one per Redis Cluster cell
            await self._enqueue_pending(pending, report)
        await self._delete_orphan_uploads(report)
        for retained in keys.index_sets("retained"):
            await self._delete_expired_blobs(retained, report)
        return report

    async def _due(self, index: str, until_ms: int) -> list[str]:
        """Up to BATCH job ids of a time index (a sorted set scored in ms) due by `until_ms`."""
        client = self.store.client
        found = await self.store.call(
            lambda: client.zrangebyscore(index, "-inf", until_ms, start=0, num=BATCH)
        )
        return [i.decode() if isinstance(i, bytes) else str(i) for i in found]

    async def _delete_expired_blobs(self, retained: str, report: SweepReport) -> None:
        keys, client = self.store.keys, self.store.client
        now = now_ms()
        ids = await self._due(retained, now)
        if not ids:
            return

        async def read() -> list[int]:
            async with client.pipeline(transaction=False) as pipe:
                for job_id in ids:
                    pipe.pttl(keys.job(job_id))
                return [int(ttl) for ttl in await pipe.execute()]

        gone: list[str] = []
        later: dict[str, int] = {}
        for job_id, ttl_ms in zip(ids, await self.store.call(read), strict=True):
            if ttl_ms > 0:  # its life was extended (its batch ended later): look again then
                later[job_id] = now + ttl_ms
            else:
                await asyncio.to_thread(self.blobs.delete_job, job_id)
                gone.append(job_id)
        if later:
            await self.store.call(lambda: client.zadd(retained, later))
        if gone:
            await self.store.call(lambda: client.zrem(retained, *gone))
            observability.SWEEPER_REPAIRS.labels("expired_job_blobs").inc(len(gone))
            report.expired_jobs += len(gone)

    async def _enqueue_pending(self, pending: str, report: SweepReport) -> None:
        keys, client = self.store.keys, self.store.client
        cutoff = now_ms() - int(self.settings.sweep_enqueue_after_s * 1000)
        ids = await self._due(pending, cutoff)
        if not ids:
            return
        queue_name = self.settings.queue_name

        async def read() -> list[object]:
            async with client.pipeline(transaction=False) as pipe:
                for job_id in ids:
                    pipe.hmget(keys.job(job_id), "state", "tenant", "create_ms")
                    pipe.hmget(keys.queue_job(queue_name, job_id), "timestamp", "finishedOn")
                return list(await pipe.execute())

        replies = await self.store.call(read)
        done: list[str] = []
        owners: dict[str, tuple[bytes | None, bytes | None]] = {}  # job: tenant, create ms
        for index, job_id in enumerate(ids):
            state, tenant, create_ms = cast(list[bytes | None], replies[2 * index])
            owners[job_id] = (tenant, create_ms)
            queued_at, finished_at = cast(list[bytes | None], replies[2 * index + 1])
            if state != b"QUEUED" or (queued_at is not None and finished_at is None):
                done.append(job_id)
                report.confirmed += 1
                continue
            if finished_at is not None:  # the queue is done with it, the record is not
                await self.queue.discard(job_id)
            try:
                await self.queue.enqueue(job_id)
            except DocparseError as err:
                log.info("sweeper could not enqueue %s yet: %s", job_id, err.reason)
                continue
            log.warning(
                "job %s was created but never queued: enqueued now",
                job_id,
                extra={"event": "job.enqueued_by_sweeper", "job_id": job_id},
            )
            observability.SWEEPER_REPAIRS.labels("enqueued").inc()
            report.enqueued += 1
            done.append(job_id)
        if keys.cells:
            # Redis Cluster: a job leaves the pending set listed in its tenant's index (its
            # creator lists it right after the create, unless it died in between: one call
            # per tenant here, store.list_new).
            listed: dict[str, list[tuple[str, int]]] = defaultdict(list)
            for job_id in done:
                owner, made = owners[job_id]
                if owner is not None and made is not None:
                    listed[owner.decode()].append((job_id, int(made)))
            for name, entries in listed.items():
                await self.store.list_new(keys.tenant_jobs(name), entries)
        if done:
            await self.store.call(lambda: client.zrem(pending, *done))

    async def _delete_orphan_uploads(self, report: SweepReport) -> None:
        keys, client = self.store.keys, self.store.client
        ids = await asyncio.to_thread(
            self.blobs.uploads_older_than, self.settings.sweep_uploads_after_s, BATCH
        )
        if not ids:
            return

        async def read() -> list[object]:
            async with client.pipeline(transaction=False) as pipe:
                for job_id in ids:
                    pipe.hget(keys.job(job_id), "state")
                return list(await pipe.execute())

        states = await self.store.call(read)
        for job_id, state in zip(ids, states, strict=True):
            name = state.decode() if isinstance(state, bytes) else None
            if name is None or name in TERMINAL_STATES:
                await asyncio.to_thread(self.blobs.delete_upload, job_id)
                observability.SWEEPER_REPAIRS.labels("upload_deleted").inc()
                report.uploads_deleted += 1
