"""A batch follower's snapshots on a real Redis (parser_svc/api/batch_watch.py): each one is the
batch at its version, even when another file's write lands between the event the follower woke
for and its read of the files that event named (a CI run once saw `completed 3` over two ended
files in a WatchBatch stream)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from docparse.local.embedded_redis import EmbeddedRedis
from docparse.v1 import parser_service_pb2
from parser_svc.api.batch_watch import BatchFollowers, Follower, RawBatch
from parser_svc.settings import Settings
from parser_svc.state.events import EventHub
from parser_svc.state.keys import batch_file_id
from parser_svc.state.records import is_terminal
from parser_svc.state.store import JobStore, connect

FILES = 6


def _file(name: str) -> dict[str, str]:
    return {
        "file_name": name,
        "content_sha256": uuid.uuid4().hex * 2,
        "content_type": "pdf",
        "size_bytes": "10",
    }


class _WriteBeforePartialRead:
    """The follower's reader (a JobStore read, as Batches does it) that, when armed, makes one
    write just before its next read of some files: a write whose event the follower has not
    received yet, the window a busy batch opens on its own."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.armed: tuple[str, int] | None = None
        # The same before the next read of the whole batch (the follower's first read).
        self.armed_whole: tuple[str, int] | None = None
        self.slipped: list[tuple[str, int]] = []
        self.partial_read = asyncio.Event()

    async def read_raw(self, batch_id: str, indexes: Sequence[int] | None = None) -> RawBatch:
        if indexes is None:
            armed, self.armed_whole = self.armed_whole, None
        else:
            armed, self.armed = self.armed, None
        if armed is not None:
            await _write(self.store, batch_id, *armed)
            self.slipped.append(armed)
        meta, files = await self.store.read_batch(batch_id, indexes)
        if indexes is not None:
            self.partial_read.set()
        return RawBatch(batch_id, meta, files)

    async def meta_version(self, batch_id: str) -> int | None:
        return await self.store.batch_version(batch_id)


async def _write(store: JobStore, batch_id: str, what: str, index: int) -> None:
    job_id = batch_file_id(batch_id, index)
    if what == "claim_quietly":
        assert (await store.claim(job_id, f"w{index}", quiet=True)).ok
    elif what == "end":
        assert (await store.claim(job_id, f"w{index}")).ok
        assert (await store.finish(job_id, f"w{index}", "SUCCEEDED", {"res_sha256": "ab"})).ok
    else:  # "end_claimed": the claim was made quietly before
        assert (await store.finish(job_id, f"w{index}", "SUCCEEDED", {"res_sha256": "ab"})).ok


async def _new_batch(redis_server: EmbeddedRedis) -> tuple[JobStore, str]:
    """A batch of FILES queued files in an environment of its own."""
    settings = Settings(redis_url=redis_server.url, env=f"bf{uuid.uuid4().hex[:6]}")
    store = JobStore(connect(settings), settings)
    batch_id = store.keys.new_id("")
    assert (
        await store.create_batch(batch_id, "t", [_file(f"{i}.pdf") for i in range(FILES)])
    ).created
    return store, batch_id


def _consistent(batch: parser_service_pb2.Batch) -> bool:
    ended = [job for job in batch.jobs if is_terminal(job)]
    return batch.completed == len(ended) == batch.succeeded and batch.version == sum(
        job.version for job in batch.jobs
    )


async def test_every_snapshot_is_the_batch_at_its_version(redis_server: EmbeddedRedis) -> None:
    store, batch_id = await _new_batch(redis_server)
    reader = _WriteBeforePartialRead(store)
    hub = EventHub(redis_server.url)
    await hub.start()
    followers = BatchFollowers(hub, store.keys, reader, min_interval_s=0.01)
    # Each step ends one file (the follower hears of it) and slips one more write in before
    # the follower reads that file: another file ending, a quiet claim, the claimed file ending.
    steps = [(0, ("end", 1)), (2, ("claim_quietly", 3)), (4, ("end_claimed", 3)), (5, None)]
    snapshots: list[parser_service_pb2.Batch] = []
    try:
        async with followers.follow(batch_id, resync_s=0.5) as follower:
            seen, first = await _next(follower, 0)
            snapshots.append(first)
            for index, slip in steps:
                reader.armed = slip
                await _write(store, batch_id, "end", index)
                while not is_terminal(snapshots[-1].jobs[index]):
                    seen, snapshot = await _next(follower, seen)
                    snapshots.append(snapshot)
            while not all(is_terminal(job) for job in snapshots[-1].jobs):
                seen, snapshot = await _next(follower, seen)
                snapshots.append(snapshot)
    finally:
        await hub.close()

    assert reader.slipped == [slip for _, slip in steps if slip], "a write was not slipped in"
    bad = [
        (s.version, s.completed, [j.state for j in s.jobs]) for s in snapshots if not _consistent(s)
    ]
    assert bad == []
    # Each version once (an event for a write a read already held wakes nobody), never back.
    versions = [s.version for s in snapshots]
    assert versions == sorted(set(versions))
    assert snapshots[-1].completed == FILES


async def test_a_write_a_read_already_held_wakes_no_watcher(redis_server: EmbeddedRedis) -> None:
    """File 0 ends just before the follower's first read: that snapshot holds it, and the
    events of its writes come after. Reading file 0 for them finds the same version: nothing
    is published (a watcher woken for it would find nothing newer to send)."""
    store, batch_id = await _new_batch(redis_server)
    reader = _WriteBeforePartialRead(store)
    reader.armed_whole = ("end", 0)
    hub = EventHub(redis_server.url)
    await hub.start()
    followers = BatchFollowers(hub, store.keys, reader, min_interval_s=0.01)
    published: list[int] = []
    try:
        async with followers.follow(batch_id, resync_s=0.5) as follower:
            publish = follower.publish

            async def recorded(latest: Any, error: Any) -> None:
                if latest is not None:
                    published.append(latest[1].version)
                await publish(latest, error)

            follower.publish = recorded  # type: ignore[method-assign]  # before its task runs
            seen, first = await _next(follower, 0)
            assert is_terminal(first.jobs[0]), "the first read did not hold file 0's end"
            async with asyncio.timeout(20):
                await reader.partial_read.wait()  # the follower read file 0 for its events
            await _write(store, batch_id, "end", 1)
            snapshot = first
            while not is_terminal(snapshot.jobs[1]):
                seen, snapshot = await _next(follower, seen)
    finally:
        await hub.close()

    assert reader.slipped == [("end", 0)]
    assert published == sorted(set(published)), f"a version published twice: {published}"
    assert published[-1] == snapshot.version


async def _next(follower: Follower, seen: int) -> tuple[int, parser_service_pb2.Batch]:
    got = await follower.next(seen, timeout_s=20)
    assert got is not None, "no snapshot within 20 s"
    generation, (_, batch) = got
    return generation, batch
