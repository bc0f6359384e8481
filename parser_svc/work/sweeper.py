"""The sweeper: repairs what a lost reply or a dead replica leaves between two writes.

Submitting is two writes, the create script and the queue add. Each is safe to repeat, and a
submit repeats the add whenever it answers with a job that is still QUEUED, but a replica can
die, or lose a reply, between the two. So every create also puts the job in a pending index
(a sorted set scored by create time), and the sweeper, on one worker replica at a time (a lease
in Redis), looks at entries older than `sweep_enqueue_after_s`:

- the record is QUEUED and the queue has no entry for it: enqueue it (idempotent: the queue
  job id is the job id), or, when the queue entry already finished, replace it;
- anything else (queued, ended, or gone): the entry is done.

With fair admission (parser_svc/state/admission.py) "enqueue" is a push onto the tenant's
pending list, a no-op for a job already there. A job admitted from there whose queue add never
happened (its admitter died, or lost the reply) waits in the admitting set: the sweeper adds it
to the queue once it is `sweep_enqueue_after_s` old and still QUEUED without a queue entry, and
forgets entries whose job a worker claimed (or that ended) without saying so. It also runs
admission itself every tick (a safety net for a missed one) and reads the per-tenant counts of
queued jobs for their gauge.

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

from docparse.errors import DocparseError
from parser_svc import observability
from parser_svc.settings import Settings
from parser_svc.state.admission import Push, slots
from parser_svc.state.lifetimes import now_ms
from parser_svc.state.records import TERMINAL_STATES
from parser_svc.state.store import JobStore
from parser_svc.state.sweep_state import PendingJob, SweepState
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
        self.state = SweepState(store)
        self.queue = queue
        self.blobs = blobs
        self.owner = f"{socket.gethostname()}/{os.getpid()}"

    async def run(self) -> None:
        """Sweeps every `sweep_interval_s` while this replica holds the lease; never raises."""
        while True:
            try:
                await self.register()
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

    async def register(self) -> None:
        """Every worker replica, every tick: its bulk slots for admission (they hold three
        ticks), and an admission run (a safety net for a missed one)."""
        if self.settings.fair_admission:
            ttl_ms = int(self.settings.sweep_interval_s * 3000)
            await self.queue.admit(register=(self.owner, slots(self.settings), ttl_ms))

    async def hold_lease(self) -> bool:
        ttl_ms = int(self.settings.sweep_interval_s * 3000)
        return await self.state.hold_lease(self.owner, ttl_ms)

    async def sweep_once(self) -> SweepReport:
        report = SweepReport()
        for pending in self.state.indexes("pending"):  # one, or one per Redis Cluster cell
            await self._enqueue_pending(pending, report)
        await self._repair_admitting(report)  # fair admission off: it drains the lists left
        await self._delete_orphan_uploads(report)
        for retained in self.state.indexes("retained"):
            await self._delete_expired_blobs(retained, report)
        return report

    async def _delete_expired_blobs(self, retained: str, report: SweepReport) -> None:
        now = now_ms()
        ids = await self.state.due(retained, now, BATCH)
        if not ids:
            return
        gone: list[str] = []
        later: dict[str, int] = {}
        for job_id, ttl_ms in zip(ids, await self.state.record_ttls(ids), strict=True):
            if ttl_ms > 0:  # its life was extended (its batch ended later): look again then
                later[job_id] = now + ttl_ms
            else:
                await asyncio.to_thread(self.blobs.delete_job, job_id)
                gone.append(job_id)
        await self.state.reschedule(retained, later)
        if gone:
            await self.state.done(retained, gone)
            observability.SWEEPER_REPAIRS.labels("expired_job_blobs").inc(len(gone))
            report.expired_jobs += len(gone)

    async def _enqueue_pending(self, pending: str, report: SweepReport) -> None:
        cutoff = now_ms() - int(self.settings.sweep_enqueue_after_s * 1000)
        ids = await self.state.due(pending, cutoff, BATCH)
        if not ids:
            return
        done: list[PendingJob] = []
        for job in await self.state.pending_jobs(ids, self.settings.queue_name):
            if job.state != "QUEUED" or (job.queued and not job.finished):
                done.append(job)
                report.confirmed += 1
                continue
            if job.finished:  # the queue is done with it, the record is not
                await self.queue.discard(job.job_id)
            try:
                await self.queue.enqueue(job.job_id, Push(job.job_id, job.tenant or "default"))
            except DocparseError as err:
                log.info("sweeper could not enqueue %s yet: %s", job.job_id, err.reason)
                continue
            log.warning(
                "job %s was created but never queued: enqueued now",
                job.job_id,
                extra={"event": "job.enqueued_by_sweeper", "job_id": job.job_id},
            )
            observability.SWEEPER_REPAIRS.labels("enqueued").inc()
            report.enqueued += 1
            done.append(job)
        if self.state.lists_after_create:
            # Redis Cluster: a job leaves the pending set listed in its tenant's index (its
            # creator lists it right after the create, unless it died in between: one call
            # per tenant here).
            listed: dict[str, list[tuple[str, int]]] = defaultdict(list)
            for job in done:
                if job.tenant is not None and job.create_ms is not None:
                    listed[job.tenant].append((job.job_id, job.create_ms))
            for tenant, entries in listed.items():
                await self.state.list_new(tenant, entries)
        await self.state.done(pending, [job.job_id for job in done])

    async def _repair_admitting(self, report: SweepReport) -> None:
        """Adds admitted jobs their admitter never added to the queue, forgets admitted jobs
        that are no longer QUEUED, runs admission, and refreshes the per-tenant gauges (queued,
        running)."""
        admission = self.queue.admission
        cutoff = now_ms() - int(self.settings.sweep_enqueue_after_s * 1000)
        ids = await admission.admitting_due(cutoff, BATCH)
        forget: list[str] = []
        for job in await self.state.pending_jobs(ids, self.settings.queue_name) if ids else []:
            if job.state != "QUEUED":
                forget.append(job.job_id)
            elif not job.queued or job.finished:
                if job.finished:
                    await self.queue.discard(job.job_id)
                await self.queue.add(job.job_id)
                log.warning(
                    "job %s was admitted but never queued: queued now",
                    job.job_id,
                    extra={"event": "job.enqueued_by_sweeper", "job_id": job.job_id},
                )
                observability.SWEEPER_REPAIRS.labels("admitted").inc()
                report.enqueued += 1
        await self.queue.admit(claimed=forget)
        shares = await admission.shares()
        observability.tenant_jobs((t.tenant, t.queued, t.running) for t in shares.tenants)

    async def _delete_orphan_uploads(self, report: SweepReport) -> None:
        ids = await asyncio.to_thread(
            self.blobs.uploads_older_than, self.settings.sweep_uploads_after_s, BATCH
        )
        if not ids:
            return
        for job_id, state in zip(ids, await self.state.job_states(ids), strict=True):
            if state is None or state in TERMINAL_STATES:
                await asyncio.to_thread(self.blobs.delete_upload, job_id)
                observability.SWEEPER_REPAIRS.labels("upload_deleted").inc()
                report.uploads_deleted += 1
