"""The job record's write rules, checked on a real Redis through JobStore."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import grpc
import pytest
import redis.asyncio as aioredis

from docparse.errors import DocparseError
from docparse.local.embedded_redis import EmbeddedRedis
from docparse.v1 import job_pb2
from parser_svc.settings import Settings
from parser_svc.state.store import JobStore, connect


def new_store(redis_server: EmbeddedRedis, **overrides: object) -> JobStore:
    settings = Settings(redis_url=redis_server.url, env=f"t{uuid.uuid4().hex[:8]}", **overrides)  # type: ignore[arg-type]
    return JobStore(connect(settings), settings)


async def created(store: JobStore) -> str:
    job_id = uuid.uuid4().hex
    assert (await store.create(job_id, {"file_name": "a.pdf"})).status == "OK"
    return job_id


async def test_create_is_once_and_starts_queued(redis_server: EmbeddedRedis) -> None:
    store = new_store(redis_server)
    job_id = await created(store)
    assert (await store.create(job_id, {"file_name": "b.pdf"})).status == "EXISTS"
    job = await store.get(job_id)
    assert (job.state, job.version, job.file_name) == (job_pb2.STATE_QUEUED, 1, "a.pdf")


async def test_terminal_records_are_final(redis_server: EmbeddedRedis) -> None:
    store = new_store(redis_server)
    job_id = await created(store)
    await store.claim(job_id, "w1")
    assert (await store.finish(job_id, "w1", "FAILED", {"err_reason": "CORRUPT_DOCUMENT"})).ok
    before = await store.get(job_id)
    for write in (
        store.progress(job_id, "w1", done=9, total=9, stage="text"),
        store.finish(job_id, "w1", "SUCCEEDED", {"res_sha256": "x"}),
        store.claim(job_id, "w2"),
    ):
        assert (await write).status == "TERMINAL"
    assert await store.get(job_id) == before


async def test_stale_fencing_token_cannot_write(redis_server: EmbeddedRedis) -> None:
    store = new_store(redis_server)
    job_id = await created(store)
    await store.claim(job_id, "old")
    await store.claim(job_id, "new")  # another worker took the job over
    assert (await store.progress(job_id, "old", done=5, total=9, stage="text")).status == "FENCED"
    assert (await store.finish(job_id, "old", "SUCCEEDED", {"res_sha256": "x"})).status == "FENCED"
    job = await store.get(job_id)
    assert job.attempt == 2 and job.state == job_pb2.STATE_RUNNING and job.progress.done == 0


async def test_progress_never_goes_back_and_noops_keep_the_version(
    redis_server: EmbeddedRedis,
) -> None:
    store = new_store(redis_server)
    job_id = await created(store)
    await store.claim(job_id, "w")
    assert (await store.progress(job_id, "w", done=5, total=10, stage="text")).ok
    stale = await store.progress(job_id, "w", done=3, total=10, stage="text")
    assert stale.status == "NOOP"
    job = await store.get(job_id)
    assert (job.progress.done, job.version) == (5, stale.version)


async def test_every_change_is_published_with_its_version(redis_server: EmbeddedRedis) -> None:
    store = new_store(redis_server)
    job_id = uuid.uuid4().hex
    client = aioredis.Redis.from_url(redis_server.url)
    pubsub = client.pubsub()
    await pubsub.subscribe(store.keys.job_channel(job_id))
    await store.create(job_id, {"file_name": "a.pdf"})
    await store.claim(job_id, "w")
    await store.progress(job_id, "w", done=1, total=2, stage="text")
    await store.finish(job_id, "w", "SUCCEEDED", {"res_sha256": "ab", "res_size": 2})
    versions: list[int] = []
    async with asyncio.timeout(10):
        while len(versions) < 4:
            message = await pubsub.get_message(timeout=1)
            if message is None or message["type"] != "message":
                continue
            record = json.loads(message["data"])
            assert "fence" not in record
            versions.append(int(record["version"]))
    assert versions == [1, 2, 3, 4]
    await client.aclose()


async def test_a_quiet_claim_is_published_by_the_claimers_next_write(
    redis_server: EmbeddedRedis,
) -> None:
    """What a worker does for a one-page job: a quiet claim (versioned, fenced, not
    published) answering with the record, then the terminal write carrying the last progress.
    Watchers get strictly increasing versions; the announce write publishes the claimed
    record even when it changes nothing, and its re-run does not publish it again."""
    store = new_store(redis_server)
    client = aioredis.Redis.from_url(redis_server.url)
    pubsub = client.pubsub()

    async def published(count: int) -> list[dict[str, str]]:
        """Every message until `count` have come and then none for 0.3 s."""
        records: list[dict[str, str]] = []
        message: dict[str, Any] | None = {}
        async with asyncio.timeout(10):
            while len(records) < count or message is not None:
                message = await pubsub.get_message(timeout=1 if len(records) < count else 0.3)
                if message is not None and message["type"] == "message":
                    records.append(json.loads(message["data"]))
        return records

    fast, slow = uuid.uuid4().hex, uuid.uuid4().hex
    await pubsub.subscribe(store.keys.job_channel(fast), store.keys.job_channel(slow))
    assert await published(0) == []
    for job_id in (fast, slow):
        await store.create(job_id, {"file_name": "a.pdf", "content_type": "pdf"})
        claim = await store.claim(job_id, "w", quiet=True)
        assert claim.status == "OK" and claim.record is not None
        assert (claim.record.state, claim.record.attempt, claim.record.version) == (
            job_pb2.STATE_RUNNING, 1, 2)  # fmt: skip
        assert claim.record.content_type == "pdf"
        again = await store.claim(job_id, "w", quiet=True)  # a re-run after a lost reply
        assert again.status == "DONE" and again.record == claim.record

    # fast: the terminal write is the next one; it carries done/total.
    fields: dict[str, str | int] = {"res_sha256": "ab", "done": 1, "total": 1}
    assert (await store.finish(fast, "w", "SUCCEEDED", fields)).ok
    # slow: the announce (nothing changed) publishes the claimed record, then progress.
    for _run in (1, 2):  # the second run: the retry after a lost reply publishes nothing
        announce = await store.progress(slow, "w", done=0, total=0, stage="", announce=True)
        assert announce.status == "NOOP"
    assert (await store.progress(slow, "w", done=1, total=3, stage="text")).ok
    records = await published(5)
    assert len(records) == 5
    by_job = {
        job_id: [(int(r["version"]), r["state"]) for r in records if r["job_id"] == job_id]
        for job_id in (fast, slow)
    }
    assert by_job[fast] == [(1, "QUEUED"), (3, "SUCCEEDED")]
    assert by_job[slow] == [(1, "QUEUED"), (2, "RUNNING"), (3, "RUNNING")]
    final = await store.get(fast)
    assert (final.progress.done, final.progress.total, final.progress.stage) == (1, 1, "done")
    assert (await store.get(slow)).progress.stage == "text"
    await client.aclose()


async def test_ttl_follows_state_and_tombstone_outlives_record(redis_server: EmbeddedRedis) -> None:
    store = new_store(redis_server, retention_s=60, running_ttl_s=600, tombstone_s=3600)
    job_id = await created(store)
    await store.claim(job_id, "w")
    assert 590_000 < await store._redis.pttl(store.keys.job(job_id)) <= 600_000
    await store.finish(job_id, "w", "SUCCEEDED", {"res_sha256": "ab"}, b"payload")
    assert 50_000 < await store._redis.pttl(store.keys.job(job_id)) <= 60_000
    assert 50_000 < await store._redis.pttl(store.keys.result(job_id)) <= 60_000
    assert await store._redis.pttl(store.keys.tombstone(job_id)) > 3_600_000


async def test_expired_job_answers_job_expired(redis_server: EmbeddedRedis) -> None:
    store = new_store(redis_server)
    job_id = await created(store)
    await store._redis.delete(store.keys.job(job_id))  # what expiry does
    with pytest.raises(DocparseError) as expired:
        await store.get(job_id)
    assert expired.value.code == grpc.StatusCode.NOT_FOUND
    assert expired.value.reason == "JOB_EXPIRED"
    assert int(expired.value.metadata["expire_time_ms"]) > 0
    with pytest.raises(DocparseError) as missing:
        await store.get(uuid.uuid4().hex)
    assert missing.value.reason == "JOB_NOT_FOUND"


async def test_scripts_survive_a_script_cache_flush(redis_server: EmbeddedRedis) -> None:
    """EVALSHA falls back to EVAL when the server lost its scripts (restart, failover)."""
    store = new_store(redis_server)
    job_id = await created(store)
    await store._redis.script_flush()
    assert (await store.claim(job_id, "w")).ok
    await store._redis.script_flush()
    assert (await created(store)) != job_id


@pytest.mark.stack  # starts an EmbeddedRedis in its body
async def test_unreachable_redis_is_unavailable_not_not_found(tmp_path: object) -> None:
    server = EmbeddedRedis(tmp_path)  # type: ignore[arg-type]
    server.start()
    settings = Settings(redis_url=server.url, redis_timeout_s=0.5)
    store = JobStore(connect(settings), settings)
    job_id = await created(store)
    server.stop()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(DocparseError) as err:
        await store.get(job_id)
    assert err.value.code == grpc.StatusCode.UNAVAILABLE
    assert err.value.reason == "STATE_STORE_UNAVAILABLE"
    assert loop.time() - started < 2.0
    server.start()
    assert (await store.get(job_id)).job_id == job_id
    server.stop()


async def test_a_full_redis_is_unavailable_not_internal(redis_server: EmbeddedRedis) -> None:
    """maxmemory reached with noeviction: Redis refuses writes with OOM. That is retryable
    (UNAVAILABLE STATE_STORE_FULL), so clients back off instead of reporting a bug."""
    store = new_store(redis_server)
    admin = aioredis.Redis.from_url(redis_server.url)
    used = int((await admin.info("memory"))["used_memory"])
    await admin.config_set("maxmemory", used // 2)
    try:
        with pytest.raises(DocparseError) as refused:
            await store.create(uuid.uuid4().hex, {"file_name": "a.pdf"})
        assert (refused.value.code, refused.value.reason) == (
            grpc.StatusCode.UNAVAILABLE, "STATE_STORE_FULL")  # fmt: skip
    finally:
        await admin.config_set("maxmemory", 0)
        await admin.aclose()
    assert (await store.create(uuid.uuid4().hex, {"file_name": "a.pdf"})).created


async def test_a_lease_has_one_holder_at_a_time(redis_server: EmbeddedRedis) -> None:
    """The sweeper's and the webhook dispatcher's lease: taken when free, renewed by its
    holder (also when a lost reply makes the holder ask again), refused to anyone else while
    it lasts, taken by another once it is gone."""
    store = new_store(redis_server)
    lease = f"test:lease:{uuid.uuid4().hex}"
    assert await store.hold_lease(lease, "host-a/1", 300)
    assert await store.hold_lease(lease, "host-a/1", 300)  # renewed
    assert not await store.hold_lease(lease, "host-b/2", 300)
    assert 0 < await store._redis.pttl(lease) <= 300  # it expires unless renewed
    await store._redis.delete(lease)  # what its expiry does, without waiting for it
    assert await store.hold_lease(lease, "host-b/2", 60_000)
    assert not await store.hold_lease(lease, "host-a/1", 60_000)
    await store.aclose()
