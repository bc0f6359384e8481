"""The work queue's Redis side: BullMQ on the state store's Redis, its connections and errors.

parser_svc/work/queue.py decides what an entry is (attempts, backoff, how long finished entries
stay) and parser_svc/work/worker.py what a queue job does; both get BullMQ objects from here,
which owns the connections: nothing outside this package opens one or sees a Redis error (an
outage is STATE_STORE_UNAVAILABLE, as for every store call).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from bullmq import Queue, Worker
from bullmq.custom_errors import UnrecoverableError
from redis.exceptions import RedisClusterException, RedisError

from docparse_server.errors import store_unavailable
from parser_svc.settings import Settings
from parser_svc.state.admission import Admission
from parser_svc.state.keys import Keys
from parser_svc.state.redis_conn import RedisTarget
from parser_svc.state.store import connect
from parser_svc.state.store_errors import store_error, unavailable_detail

_UNAVAILABLE = (TimeoutError, OSError, RedisError, RedisClusterException)


class FinalFailure(UnrecoverableError):  # type: ignore[misc]  # bullmq is untyped
    """Raised by a queue job's processor when no other attempt must follow: BullMQ fails the
    queue job at once instead of scheduling a retry."""


def bullmq_options(settings: Settings) -> dict[str, Any]:
    """BullMQ's options: its connections reach Redis as every client of ours does (TLS, ACL
    user, Sentinel: parser_svc/state/redis_conn.py)."""
    return {
        "connection": RedisTarget.of(settings).bullmq_connection(),
        "prefix": Keys.of(settings).queue_prefix,
    }


def queue_worker(
    settings: Settings, process: Callable[[Any, str], Awaitable[Any]], options: dict[str, Any]
) -> Worker:
    """A BullMQ worker of the deployment's queue, running `process(queue_job, token)` for each
    queue job it takes, with `options` (concurrency, lock duration...) on our connections."""
    return Worker(settings.queue_name, process, {**bullmq_options(settings), **options})


class QueueStore:
    """The entries of the deployment's queue (BullMQ's Queue) on a client of ours, not BullMQ's
    default (one connection retried for minutes): an add during an outage must fail within
    the call's budget, and work again right after."""

    def __init__(self, settings: Settings) -> None:
        self._timeout_s = settings.redis_timeout_s
        self._redis = connect(settings, decode_responses=True)
        options = {**bullmq_options(settings), "connection": self._redis}
        self._queue = Queue(settings.queue_name, options)
        # Fair admission in front of the queue, on the same connections.
        self.admission = Admission(self._redis, settings)

    async def add(self, job_id: str, data: dict[str, str], opts: dict[str, Any]) -> None:
        """Adds a queue job named 'parse' with BullMQ's job options `opts`; a Redis that does
        not answer in time is STATE_STORE_UNAVAILABLE, a full one (OOM) STATE_STORE_ERROR."""
        try:
            async with asyncio.timeout(self._timeout_s):
                await self._queue.add("parse", data, {**opts, "jobId": job_id})
        except _UNAVAILABLE as err:
            if isinstance(err, RedisError) and "OOM command not allowed" in str(err):
                raise store_error(err) from err
            raise store_unavailable(f"enqueue failed: {unavailable_detail(err)}") from err

    async def remove(self, job_id: str) -> None:
        """Best effort: drops a queue job that no worker holds; any failure is ignored."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self._timeout_s):
                await self._queue.remove(job_id)

    async def counts(self, *states: str) -> dict[str, int]:
        """Queue jobs per BullMQ state; STATE_STORE_UNAVAILABLE when the queue cannot say."""
        try:
            async with asyncio.timeout(self._timeout_s):
                counts = await self._queue.getJobCounts(*states)
        except _UNAVAILABLE as err:
            raise store_unavailable(f"queue counts failed: {unavailable_detail(err)}") from err
        return {str(state): int(n) for state, n in counts.items()}

    async def waiting(self) -> int | None:
        """Queue jobs waiting for a worker now; None when the queue cannot say (in time)."""
        try:
            async with asyncio.timeout(self._timeout_s):
                return int(await self._queue.getWaitingCount())
        except _UNAVAILABLE:
            return None

    async def close(self) -> None:
        await self._queue.close()
        await self._redis.aclose()
