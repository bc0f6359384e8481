"""One follower per watched batch per process: the Redis cost of WatchBatch follows the
batch's changes, not the number of watchers times the number of files.

A follower subscribes to the batch's channel, reads the whole batch once, then keeps it
current: each event names the file that changed, so a burst of events (at most one read per
`min_interval_s`) re-reads the meta record and just those files, in one MULTI/EXEC. On the
timer it reads only the batch's version counter (pub/sub is at-most-once; the counter moves
with every file write) and re-reads everything only if it moved unseen, or on a resync marker.
Watchers wait for a snapshot newer than the last one they saw. A watcher that joins a running
follower gets its latest snapshot at once: the follower was subscribed before that snapshot
was read, so nothing that changed since can be missed. The follower ends with its last
watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from docparse.errors import DocparseError
from docparse.v1 import parser_service_pb2
from docparse_server.tenancy import DEFAULT_TENANT
from parser_svc.state.batch_records import assemble_batch
from parser_svc.state.events import Ending, Event, EventHub
from parser_svc.state.keys import Keys
from parser_svc.state.records import TERMINAL_STATES, is_terminal

Snapshot = tuple[str, parser_service_pb2.Batch]  # (tenant, batch)
# Reads of the files that events name before a snapshot whose meta counts a write not yet
# seen is settled by reading every file that can still change.
CATCH_UP_READS = 3


@dataclass
class RawBatch:
    """A batch as read from Redis: its meta record and file records by index (a follower
    keeps one and replaces the files that changed)."""

    batch_id: str
    meta: dict[str, str]
    files: dict[int, dict[str, str]]

    @property
    def tenant(self) -> str:
        return self.meta.get("tenant", DEFAULT_TENANT)

    @property
    def version(self) -> int:
        return int(self.meta.get("version") or 0)

    def update(self, newer: RawBatch) -> None:
        self.meta = newer.meta
        self.files.update(newer.files)

    def is_whole(self) -> bool:
        """Whether the files held account for every write the meta counts: the batch's
        version is the sum of its files' versions (the update script moves both at once), and
        no file's held version is ahead of Redis, so the sums are equal only when no file is
        behind. False for batches without the counter, or with a file record gone."""
        held = sum(int(record.get("version") or 0) for record in self.files.values())
        return self.version > 0 and held == self.version

    def open_indexes(self) -> list[int]:
        """The files that may still change: those not held in a terminal state (a terminal
        file's record never changes again)."""
        total = int(self.meta.get("total", 0))
        return [
            index
            for index in range(total)
            if self.files.get(index, {}).get("state") not in TERMINAL_STATES
        ]

    def assemble(self) -> parser_service_pb2.Batch:
        return assemble_batch(self.batch_id, self.meta, self.files)


class Reader(Protocol):
    async def read_raw(self, batch_id: str, indexes: Sequence[int] | None = None) -> RawBatch: ...

    async def meta_version(self, batch_id: str) -> int | None: ...


@dataclass
class Follower:
    batch_id: str
    watchers: int = 0
    generation: int = 0
    latest: Snapshot | None = None
    error: DocparseError | None = None
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    task: asyncio.Task[None] | None = None

    async def publish(self, latest: Snapshot | None, error: DocparseError | None) -> None:
        async with self.changed:
            self.latest, self.error = latest or self.latest, error
            self.generation += 1
            self.changed.notify_all()

    async def next(self, seen: int, timeout_s: float) -> tuple[int, Snapshot] | None:
        """The first snapshot after generation `seen`, or None after `timeout_s` (time for a
        heartbeat). Raises what the follower failed with."""
        async with self.changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.changed.wait_for(lambda: self.generation > seen), timeout_s
                )
            if self.generation <= seen:
                return None
            if self.error is not None:
                raise self.error
            assert self.latest is not None
            return self.generation, self.latest


class BatchFollowers:
    def __init__(
        self, hub: EventHub, keys: Keys, reader: Reader, *, min_interval_s: float = 0.1
    ) -> None:
        self.hub = hub
        self.keys = keys
        self.reader = reader
        self.min_interval_s = min_interval_s
        self._followers: dict[str, Follower] = {}

    @contextlib.asynccontextmanager
    async def follow(self, batch_id: str, resync_s: float) -> AsyncIterator[Follower]:
        follower = self._followers.get(batch_id)
        if follower is None or follower.task is None or follower.task.done():
            follower = self._followers[batch_id] = Follower(batch_id)
            follower.task = asyncio.create_task(self._run(follower, resync_s))
        follower.watchers += 1
        try:
            yield follower
        finally:
            follower.watchers -= 1
            if follower.watchers == 0 and self._followers.get(batch_id) is follower:
                del self._followers[batch_id]
                if follower.task is not None:
                    follower.task.cancel()

    async def _run(self, follower: Follower, resync_s: float) -> None:
        channel = self.keys.batch_channel(follower.batch_id)
        batch_id = follower.batch_id
        try:
            async with self.hub.subscribe(channel) as queue:
                raw = await self.reader.read_raw(batch_id)
                published = -1
                while True:
                    batch = raw.assemble()
                    # Same version, same batch (an event for a write a read already held):
                    # watchers are not woken for it.
                    if batch.version != published:
                        await follower.publish((raw.tenant, batch), None)
                        published = batch.version
                    if all(is_terminal(job) for job in batch.jobs):
                        return  # watchers end on this one
                    raw = await self._next(raw, queue, resync_s)
        except DocparseError as err:
            await follower.publish(None, err)

    async def _next(self, raw: RawBatch, queue: asyncio.Queue[Event], resync_s: float) -> RawBatch:
        """The batch after its next change (raises an Ending marker's error: shutdown, a
        subscription never confirmed)."""
        batch_id = raw.batch_id
        while True:
            try:
                first = await asyncio.wait_for(queue.get(), resync_s)
            except TimeoutError:
                if await self.reader.meta_version(batch_id) == raw.version:
                    continue  # nothing changed, nothing was missed
                return await self.reader.read_raw(batch_id)
            # A burst of events: at most one read per interval; what queued up meanwhile is
            # covered by that read.
            await asyncio.sleep(self.min_interval_s)
            changed = _drain(first, queue)
            for _ in range(CATCH_UP_READS):
                if changed is None:
                    return await self.reader.read_raw(batch_id)
                raw.update(await self.reader.read_raw(batch_id, sorted(changed)))
                if int(raw.meta.get("completed", 0)) >= int(raw.meta.get("total", 0)):
                    # The last file's write also gave every file of the batch its final expiry
                    # (no version bump): the final snapshot is read whole, as GetBatch reads it.
                    return await self.reader.read_raw(batch_id)
                if raw.is_whole():
                    return raw
                # The meta already counts a write whose event is still on its way (or a quiet
                # claim, whose announcing write follows): a file may have ended after the
                # events read here, and its old record beside the new counters would say
                # `completed 3` over two ended files. Its event normally follows at once.
                try:
                    first = await asyncio.wait_for(queue.get(), self.min_interval_s)
                except TimeoutError:
                    break
                changed = _drain(first, queue)
            # Still a write unseen: the meta with every file that can still change, in one
            # MULTI/EXEC (ended files never change): one consistent snapshot.
            raw.update(await self.reader.read_raw(batch_id, raw.open_indexes()))
            return raw


def _drain(first: Event, queue: asyncio.Queue[Event]) -> set[int] | None:
    """The indexes of the files that `first` and the events queued behind it name; None when
    the whole batch must be read (a RESYNC marker: events may have been lost; an event that
    names no file). Raises an Ending marker's error (shutdown, a subscription never confirmed)."""
    events = [first]
    while not queue.empty():
        events.append(queue.get_nowait())
    for event in events:
        if isinstance(event, Ending):
            raise event.error()
    changed: set[int] = set()
    for event in events:
        if not isinstance(event, dict):
            return None
        index = int(str(event.get("job_id", "")).rpartition("-")[2] or -1)
        if index < 0:
            return None
        changed.add(index)
    return changed
