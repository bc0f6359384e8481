"""The WatchJob algorithm, kept apart from gRPC so it can be reasoned about alone:
subscribe first, then read the snapshot, then forward only strictly newer versions; re-read on
resync markers and on a timer; heartbeat on idle; stop right after the terminal record.
A cursor beyond the job's current version is answered at once with OUT_OF_RANGE
AFTER_VERSION_AHEAD (no version it could wait for is promised to come)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncGenerator

import grpc

from docparse.errors import DocparseError
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.errors import cursor_ahead
from parser_svc.state.events import RESYNC, Ending, EventHub
from parser_svc.state.records import is_terminal, record_to_job
from parser_svc.state.store import JobStore


class _Resync:
    """The resync reads of one stream: a store blip shorter than `grace_s` only skips a read
    (None); a longer one, or another error, ends the stream."""

    def __init__(self, store: JobStore, job_id: str, grace_s: float) -> None:
        self.store, self.job_id, self.grace_s = store, job_id, grace_s
        self.failing_since: float | None = None

    async def read(self) -> job_pb2.Job | None:
        try:
            job = await self.store.get(self.job_id)
        except DocparseError as err:
            if err.code != grpc.StatusCode.UNAVAILABLE:
                raise
            self.failing_since = self.failing_since or time.monotonic()
            if time.monotonic() - self.failing_since > self.grace_s:
                raise
            return None
        self.failing_since = None
        return job


async def watch_job(
    store: JobStore,
    hub: EventHub,
    job_id: str,
    after_version: int,
    *,
    resync_s: float,
    heartbeat_s: float,
    store_grace_s: float = 10.0,
) -> AsyncGenerator[parser_service_pb2.WatchJobResponse, None]:
    last = after_version
    last_sent = time.monotonic()
    reread = _Resync(store, job_id, store_grace_s).read

    async with hub.subscribe(store.keys.job_channel(job_id)) as queue:
        latest: job_pb2.Job | None = await store.get(job_id)
        if latest is not None and after_version > latest.version:
            raise cursor_ahead(job_id, after_version, latest.version)
        # The first resync comes after a random 50-100% of the period: streams opened together
        # (a reconnecting client, a restarted gateway) would otherwise all re-read Redis in the
        # same instant, every period, and delay the events being delivered meanwhile.
        next_resync = time.monotonic() + resync_s * random.uniform(0.5, 1.0)
        while True:
            if latest is not None:
                if latest.version > last:
                    yield parser_service_pb2.WatchJobResponse(job=latest)
                    last, last_sent = latest.version, time.monotonic()
                if is_terminal(latest):
                    return
            latest = None
            now = time.monotonic()
            wait = max(0.0, min(next_resync, last_sent + heartbeat_s) - now)
            try:
                event = await asyncio.wait_for(queue.get(), wait)
            except TimeoutError:
                now = time.monotonic()
                if now >= next_resync:
                    latest = await reread()
                    next_resync = now + resync_s
                if now - last_sent >= heartbeat_s and (latest is None or latest.version <= last):
                    beat = parser_service_pb2.Heartbeat(last_version=last)
                    beat.server_time.GetCurrentTime()
                    yield parser_service_pb2.WatchJobResponse(heartbeat=beat)
                    last_sent = now
                continue
            if isinstance(event, Ending):
                raise event.error()
            if event is RESYNC:
                latest = await reread()
                if latest is None:  # try again soon rather than at the next timer tick
                    next_resync = min(next_resync, time.monotonic() + 0.5)
            else:
                latest = record_to_job(event)  # type: ignore[arg-type]
