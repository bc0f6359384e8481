"""The durable work queue: one queue entry per job, on BullMQ (its Redis side, connections and
errors: parser_svc/state/queue_store.py), behind fair admission between tenants
(parser_svc/state/admission.py) unless `fair_admission` is off."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from docparse.errors import DocparseError
from parser_svc import observability
from parser_svc.settings import Settings
from parser_svc.state.admission import Push
from parser_svc.state.queue_store import QueueStore

log = logging.getLogger(__name__)


class JobQueue:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._entries = QueueStore(settings)
        self.admission = self._entries.admission
        self._background: set[asyncio.Task[None]] = set()

    async def enqueue(self, job_id: str, push: Push | None = None) -> None:
        """Queues the job once. With fair admission it goes onto its tenant's pending list
        (`push`, else the default tenant's bulk lane; a no-op when it is there or in the queue
        already), and whatever admission lets in now is added to the queue, often this very
        job; without, it is added at once. STATE_STORE_UNAVAILABLE when Redis does not answer
        in time: the sweeper enqueues it later."""
        if not self.settings.fair_admission:
            await self.add(job_id)
            return
        _, admitted = await self.admission.run(push or Push(job_id, "default"))
        await self._add_admitted(admitted)

    async def admit(
        self, claimed: Sequence[str] = (), register: tuple[str, int, int] | None = None
    ) -> None:
        """Runs admission (after workers claimed `claimed`: they leave its indexes; `register`:
        a worker replica's bulk slots, Admission.run) and adds what it lets in to the queue.
        Also with fair admission off: the sweeper's tick drains what its lists still hold."""
        _, admitted = await self.admission.run(claimed=claimed, register=register)
        await self._add_admitted(admitted)

    def admit_soon(self, claimed: str = "") -> None:
        """`admit` in the background (a worker's claim or a job's end: its parse does not wait
        for it); a failure is left to the next admission (the sweeper's loop runs one)."""
        if not self.settings.fair_admission:
            return

        async def run() -> None:
            try:
                await self.admit([claimed] if claimed else [])
            except DocparseError as err:
                log.info("admission failed (it runs again at the next claim): %s", err.reason)

        task = asyncio.get_running_loop().create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _add_admitted(self, admitted: Sequence[tuple[str, str]]) -> None:
        for job_id, lane in admitted:
            await self.add(job_id)
            observability.ADMISSIONS.labels(lane).inc()

    async def add(self, job_id: str) -> None:
        """Adds the job to the queue once: the BullMQ job id is the docparse job id."""
        opts = {
            "attempts": self.settings.max_attempts,
            "backoff": {"type": "exponential", "delay": self.settings.retry_backoff_ms},
            "removeOnComplete": {"count": 1000},
            "removeOnFail": {"count": 10000},
        }
        await self._entries.add(job_id, {"job_id": job_id}, opts)

    async def discard(self, job_id: str) -> None:
        """Best effort: drops a job that no worker holds (a cancelled one). A worker that
        still picks it up finds the record terminal and skips it."""
        await self._entries.remove(job_id)

    async def counts(self) -> dict[str, int]:
        """Jobs per queue state (waiting, active, delayed, failed), for the queue depth gauge."""
        return await self._entries.counts("waiting", "active", "delayed", "failed")

    async def waiting(self) -> int | None:
        """Jobs waiting for a worker now: in the queue, and on fair admission's pending lists
        (the backlog); None when the queue cannot say (in time)."""
        queued = await self._entries.waiting()
        if queued is None or not self.settings.fair_admission:
            return queued
        try:
            return queued + await self.admission.backlog()
        except DocparseError:
            return None

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await self._entries.close()
