"""The durable work queue: one queue entry per job, on BullMQ (its Redis side, connections and
errors: parser_svc/state/queue_store.py)."""

from __future__ import annotations

from parser_svc.settings import Settings
from parser_svc.state.queue_store import QueueStore


class JobQueue:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._entries = QueueStore(settings)

    async def enqueue(self, job_id: str) -> None:
        """Adds the job once: the BullMQ job id is the docparse job id. STATE_STORE_UNAVAILABLE
        when the queue does not answer in time."""
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
        """Jobs waiting for a worker now; None when the queue cannot say (in time)."""
        return await self._entries.waiting()

    async def close(self) -> None:
        await self._entries.close()
