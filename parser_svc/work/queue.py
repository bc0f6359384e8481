"""The durable work queue: BullMQ on the state store's Redis, one queue entry per job."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from bullmq import Queue
from redis.exceptions import RedisClusterException, RedisError

from docparse.errors import store_unavailable
from parser_svc.settings import Settings
from parser_svc.state.keys import Keys
from parser_svc.state.redis_conn import RedisTarget
from parser_svc.state.store import connect
from parser_svc.state.store_errors import store_error, unavailable_detail


def bullmq_options(settings: Settings) -> dict[str, Any]:
    """BullMQ's options: its connections reach Redis as every client of ours does (TLS, ACL
    user, Sentinel: parser_svc/state/redis_conn.py)."""
    return {
        "connection": RedisTarget.of(settings).bullmq_connection(),
        "prefix": Keys.of(settings).queue_prefix,
    }


class JobQueue:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Our own client, not BullMQ's default (one connection retried for minutes): an add
        # during an outage must fail within the call's budget, and work again right after.
        self._client = connect(settings, decode_responses=True)
        options = {**bullmq_options(settings), "connection": self._client}
        self._queue = Queue(settings.queue_name, options)

    async def enqueue(self, job_id: str) -> None:
        """Adds the job once: the BullMQ job id is the docparse job id."""
        opts = {
            "jobId": job_id,
            "attempts": self.settings.max_attempts,
            "backoff": {"type": "exponential", "delay": self.settings.retry_backoff_ms},
            "removeOnComplete": {"count": 1000},
            "removeOnFail": {"count": 10000},
        }
        try:
            async with asyncio.timeout(self.settings.redis_timeout_s):
                await self._queue.add("parse", {"job_id": job_id}, opts)
        except (TimeoutError, OSError, RedisError, RedisClusterException) as err:
            if isinstance(err, RedisError) and "OOM command not allowed" in str(err):
                raise store_error(err) from err
            raise store_unavailable(f"enqueue failed: {unavailable_detail(err)}") from err

    async def discard(self, job_id: str) -> None:
        """Best effort: drops a job that no worker holds (a cancelled one). A worker that
        still picks it up finds the record terminal and skips it."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.settings.redis_timeout_s):
                await self._queue.remove(job_id)

    async def counts(self) -> dict[str, int]:
        """Jobs per queue state (waiting, active, delayed, failed), for the queue depth gauge."""
        async with asyncio.timeout(self.settings.redis_timeout_s):
            counts = await self._queue.getJobCounts("waiting", "active", "delayed", "failed")
        return {str(state): int(n) for state, n in counts.items()}

    async def waiting(self) -> int | None:
        """Jobs waiting for a worker now; None when the queue cannot say (in time)."""
        try:
            async with asyncio.timeout(self.settings.redis_timeout_s):
                return int(await self._queue.getWaitingCount())
        except (TimeoutError, OSError, RedisError, RedisClusterException):
            return None

    async def close(self) -> None:
        await self._queue.close()
        await self._client.aclose()
