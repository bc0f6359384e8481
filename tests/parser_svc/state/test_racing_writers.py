"""Several processes race progress writes (stale and fresh) against a terminal write."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import random
import uuid
from multiprocessing.synchronize import Barrier

from docparse.local.embedded_redis import EmbeddedRedis
from docparse.v1 import job_pb2
from parser_svc.api.watch import watch_job
from parser_svc.settings import Settings
from parser_svc.state.events import EventHub
from parser_svc.state.records import is_terminal
from parser_svc.state.store import JobStore, connect

WRITERS = 4
UPDATES_PER_WRITER = 50  # 200 progress updates in all
TOTAL_PAGES = 100


def _writer(url: str, env: str, job_id: str, seed: int, barrier: Barrier, finisher: bool) -> None:
    async def run() -> list[str]:
        settings = Settings(redis_url=url, env=env)
        store = JobStore(connect(settings), settings)
        rng = random.Random(seed)
        statuses = []
        barrier.wait()
        for i in range(UPDATES_PER_WRITER):
            # Fresh values climb with i; stale ones are far behind what others already wrote.
            done = (
                min(TOTAL_PAGES, 2 * i + rng.randint(0, 3))
                if rng.random() < 0.6
                else rng.randint(0, 5)
            )
            result = await store.progress(job_id, "w", done=done, total=TOTAL_PAGES, stage="text")
            statuses.append(result.status)
            if finisher and i == UPDATES_PER_WRITER // 2:
                final = await store.finish(job_id, "w", "SUCCEEDED", {"res_sha256": "ab"})
                statuses.append("FINISH:" + final.status)
        return statuses

    statuses = asyncio.run(run())
    assert "FINISH:OK" in statuses or not finisher


async def test_racing_writers_end_terminal_with_monotonic_history(
    redis_server: EmbeddedRedis,
) -> None:
    env = f"race{uuid.uuid4().hex[:6]}"
    settings = Settings(redis_url=redis_server.url, env=env)
    store = JobStore(connect(settings), settings)
    job_id = uuid.uuid4().hex
    await store.create(job_id, {"file_name": "race.pdf"})
    await store.claim(job_id, "w")

    hub = EventHub(redis_server.url)
    await hub.start()
    seen: list[job_pb2.Job] = []
    subscribed = asyncio.Event()

    async def watcher() -> None:
        async for event in watch_job(store, hub, job_id, 0, resync_s=0.5, heartbeat_s=5):
            subscribed.set()
            if event.HasField("job"):
                seen.append(event.job)

    watch_task = asyncio.create_task(watcher())
    await asyncio.wait_for(subscribed.wait(), 5)

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WRITERS)
    procs = [
        ctx.Process(target=_writer, args=(redis_server.url, env, job_id, seed, barrier, seed == 1))
        for seed in range(WRITERS)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        await asyncio.to_thread(proc.join, 60)
        assert proc.exitcode == 0
    await asyncio.wait_for(watch_task, 10)
    await hub.close()

    final = await store.get(job_id)
    assert final.state == job_pb2.STATE_SUCCEEDED
    versions = [job.version for job in seen]
    assert all(a < b for a, b in itertools.pairwise(versions)), versions
    dones = [job.progress.done for job in seen]
    assert dones == sorted(dones), dones
    assert is_terminal(seen[-1]) and seen[-1].version == final.version
    assert sum(not is_terminal(job) for job in seen) >= 2  # it really watched progress happen
