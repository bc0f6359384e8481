"""TTL rules and re-run answers of the job scripts, on a real Redis through JobStore: what a
retry after an unknown outcome gets back, and that no record expires while it still matters
(parser_svc/state/lifetimes.py)."""

from __future__ import annotations

import uuid

import pytest
import redis.asyncio as aioredis

from docparse.local.embedded_redis import EmbeddedRedis
from docparse.v1 import job_pb2
from parser_svc.api.batches import Batches
from parser_svc.settings import Settings
from parser_svc.state.keys import batch_file_id
from parser_svc.state.store import JobStore, connect

QUEUED_S, RUNNING_S, RETENTION_S = 5000, 300, 2000


def new_store(redis_server: EmbeddedRedis) -> JobStore:
    settings = Settings(
        redis_url=redis_server.url,
        env=f"t{uuid.uuid4().hex[:8]}",
        queued_ttl_s=QUEUED_S,
        running_ttl_s=RUNNING_S,
        retention_s=RETENTION_S,
    )
    return JobStore(connect(settings), settings)


async def ttl_s(client: aioredis.Redis, key: str) -> float:
    return float(await client.pttl(key)) / 1000


def near(value: float, expected: float) -> bool:
    # A TTL copied from another key's PTTL inside a script may come out 1 ms later on the
    # embedded Redis 6.2 (its clock moves during a script; 7 freezes it): a millisecond over.
    return expected - 5 < value <= expected + 0.002


async def test_a_rerun_create_finds_its_own_job(redis_server: EmbeddedRedis) -> None:
    """Point 1: the create ran, its reply was lost, the script runs again."""
    store = new_store(redis_server)
    keys = store.keys
    job_id, other_id = uuid.uuid4().hex, uuid.uuid4().hex
    fields = {"file_name": "a.pdf", "content_sha256": "c" * 64, "tenant": "t"}
    request = keys.request("t", "req-1")
    dedupe = keys.active_upload("t", "identity")
    first = await store.create(job_id, fields, request_key=request, dedupe_key=dedupe)
    assert (first.status, first.created) == ("OK", True)
    rerun = await store.create(job_id, fields, request_key=request, dedupe_key=dedupe)
    assert (rerun.status, rerun.job_id, rerun.created) == ("REPLAY", job_id, True)
    joined = await store.create(job_id, fields, dedupe_key=dedupe)  # no request_id
    assert (joined.status, joined.created) == ("JOINED", True)
    # Another call (a client's retry with the same request_id) is told whose job it is.
    retry = await store.create(other_id, fields, request_key=request, dedupe_key=dedupe)
    assert (retry.status, retry.job_id, retry.created) == ("REPLAY", job_id, False)
    # Every create is in the pending-enqueue index until the sweeper confirms it.
    assert await store._redis.zscore(keys.pending(job_id), job_id) is not None


async def test_a_released_job_waits_with_the_queued_ttl(redis_server: EmbeddedRedis) -> None:
    """Point 3: a job handed back for a retry may wait in a backed-up queue as long as a new
    one (before: the running TTL, and it expired while QUEUED)."""
    store = new_store(redis_server)
    job_id = uuid.uuid4().hex
    await store.create(job_id, {"file_name": "a.pdf"})
    assert (await store.claim(job_id, "w1")).ok
    assert near(await ttl_s(store._redis, store.keys.job(job_id)), RUNNING_S)
    assert (await store.release(job_id, "w1")).status == "OK"
    assert near(await ttl_s(store._redis, store.keys.job(job_id)), QUEUED_S)
    assert (await store.release(job_id, "w1")).status == "DONE"  # the re-run
    job = await store.get(job_id)
    assert (job.state, job.progress.stage) == (job_pb2.STATE_QUEUED, "retrying")


async def test_a_batch_and_its_files_expire_together(redis_server: EmbeddedRedis) -> None:
    """Point 4: a file that ends early lives as long as its batch; when the last one ends, the
    batch and every file expire together; the batch version never goes back."""
    store = new_store(redis_server)
    keys, client = store.keys, store._redis
    batch_id = uuid.uuid4().hex
    files = [
        {"file_name": f"f{i}.pdf", "content_sha256": "a" * 64, "content_type": "pdf",
         "size_bytes": "10"}
        for i in range(3)
    ]  # fmt: skip
    created = await store.create_batch(batch_id, "t", files)
    assert (created.status, created.created) == ("OK", True)
    batches = Batches(store, None, None)  # type: ignore[arg-type]  # get() reads the store only
    versions = [(await batches.get(batch_id)).version]
    ids = [batch_file_id(batch_id, i) for i in range(3)]

    async def step(write: object) -> None:
        assert (await write).ok  # type: ignore[attr-defined]
        batch = await batches.get(batch_id)
        assert batch.version > versions[-1]
        assert all(job.state != job_pb2.STATE_UNSPECIFIED for job in batch.jobs)
        versions.append(batch.version)

    await step(store.claim(ids[0], "w0"))
    await step(store.finish(ids[0], "w0", "SUCCEEDED", {"res_sha256": "x"}))
    meta_s = await ttl_s(client, keys.batch_meta(batch_id))
    assert meta_s > QUEUED_S  # it outlives every open file by a retention
    assert near(await ttl_s(client, keys.job(ids[0])), meta_s)  # not just RETENTION_S
    await step(store.claim(ids[1], "w1"))
    await step(store.cancel(ids[2]))
    await step(store.finish(ids[1], "w1", "FAILED", {"err_reason": "CORRUPT_DOCUMENT"}))
    batch = await batches.get(batch_id)
    assert (batch.completed, batch.succeeded, batch.failed, batch.cancelled) == (3, 1, 1, 1)
    # The last file ended: all expire a retention from now, together.
    for key in [keys.batch_meta(batch_id), *(keys.job(i) for i in ids)]:
        assert near(await ttl_s(client, key), RETENTION_S), key
    # A file record gone while its batch lives (it waited past the queued TTL) is reported as
    # ended, and the batch version does not go back.
    await client.delete(keys.job(ids[0]))
    after = await batches.get(batch_id)
    gone = after.jobs[0]
    assert (gone.job_id, gone.state, gone.error.reason) == (
        ids[0], job_pb2.STATE_FAILED, "JOB_EXPIRED")  # fmt: skip
    assert after.version == versions[-1]


async def test_a_batch_request_id_returns_the_whole_batch(redis_server: EmbeddedRedis) -> None:
    """Point 5: the batch and its request_id record are made in one step; a retry gets the
    whole first batch, other files with the same request_id are a conflict."""
    store = new_store(redis_server)
    request = store.keys.batch_request("t", "batch-req")
    files = [
        {"file_name": f"f{i}.pdf", "content_sha256": f"{i:064d}", "content_type": "pdf",
         "size_bytes": "10"}
        for i in range(200)
    ]  # fmt: skip
    first_id, second_id = uuid.uuid4().hex, uuid.uuid4().hex
    first = await store.create_batch(first_id, "t", files, request_key=request, digest="d1")
    assert first.created
    rerun = await store.create_batch(first_id, "t", files, request_key=request, digest="d1")
    assert (rerun.status, rerun.created) == ("REPLAY", True)
    retry = await store.create_batch(second_id, "t", files, request_key=request, digest="d1")
    assert (retry.status, retry.job_id, retry.created) == ("REPLAY", first_id, False)
    other = await store.create_batch(second_id, "t", files[:3], request_key=request, digest="d2")
    assert (other.status, other.job_id) == ("CONFLICT", first_id)
    batch = await Batches(store, None, None).get(first_id)  # type: ignore[arg-type]
    assert len(batch.jobs) == batch.total == 200
    assert not await store._redis.exists(store.keys.batch_meta(second_id))


async def test_a_request_id_whose_job_expired_makes_a_new_job(
    redis_server: EmbeddedRedis,
) -> None:
    """Point 7: with retention shorter than the request_id TTL, a retry after the job expired
    gets a fresh job, not NOT_FOUND JOB_EXPIRED."""
    store = new_store(redis_server)
    request = store.keys.request("t", "req-7")
    fields = {"file_name": "a.pdf", "content_sha256": "c" * 64, "tenant": "t"}
    first_id = uuid.uuid4().hex
    assert (await store.create(first_id, fields, request_key=request)).created
    await store.claim(first_id, "w")
    await store.finish(first_id, "w", "SUCCEEDED", {"res_sha256": "x"})
    assert (await store.create(uuid.uuid4().hex, fields, request_key=request)).job_id == first_id
    await store._redis.pexpire(store.keys.job(first_id), 1)  # its retention ends
    while await store._redis.exists(store.keys.job(first_id)):
        pass  # expires within a millisecond or so
    with pytest.raises(Exception, match="JOB_EXPIRED"):
        await store.get(first_id)
    second_id = uuid.uuid4().hex
    again = await store.create(second_id, fields, request_key=request)
    assert (again.status, again.job_id, again.created) == ("OK", second_id, True)
    assert (await store.get(second_id)).state == job_pb2.STATE_QUEUED


async def test_a_rerun_terminal_write_is_done_not_lost(redis_server: EmbeddedRedis) -> None:
    """Point 2: the SUCCEEDED write went in and its reply was lost; the worker's retry is told
    DONE (its own write), while a stale writer is still refused."""
    store = new_store(redis_server)
    job_id = uuid.uuid4().hex
    await store.create(job_id, {"file_name": "a.pdf"})
    await store.claim(job_id, "w1")
    fields: dict[str, str | int] = {"res_sha256": "abc", "res_size": 3}
    assert (await store.finish(job_id, "w1", "SUCCEEDED", fields)).status == "OK"
    assert (await store.finish(job_id, "w1", "SUCCEEDED", fields)).status == "DONE"
    assert (await store.finish(job_id, "w0", "SUCCEEDED", fields)).status == "TERMINAL"
    assert (await store.finish(job_id, "w1", "FAILED", {})).status == "TERMINAL"
