"""The state package's doors beside JobStore, on a real Redis: the webhook outbox's store
(webhook_store.py), what the sweeper reads and writes (sweep_state.py) and a request id's
first content (submit_records.py). The dispatcher, sweeper and submit paths that use them are
tested through stacks (tests/parser_svc/webhooks, tests/parser_svc/state/test_cluster.py)."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from docparse.local.embedded_redis import EmbeddedRedis, free_port
from parser_svc.settings import Settings
from parser_svc.state.store import JobStore
from parser_svc.state.sweep_state import SweepState
from parser_svc.state.webhook_store import WebhookStore
from tests.redis_servers import Server

HOUR_MS = 3_600_000


@pytest.fixture
async def store(redis_server: EmbeddedRedis) -> AsyncIterator[JobStore]:
    settings = Settings(redis_url=redis_server.url, env=f"t{uuid.uuid4().hex[:8]}")
    opened = JobStore.open(settings)
    yield opened
    await opened.aclose()


async def test_a_delivery_is_added_once_and_not_again_after_it_ended(store: JobStore) -> None:
    hooks, keys, r = WebhookStore(store), store.keys, store._redis
    assert await hooks.add("j.1", "j", ["url", "https://a"], 5, HOUR_MS)
    assert await hooks.add("j.1", "j", ["url", "https://a"], 9, HOUR_MS)  # still open: same place
    assert await r.zscore(keys.webhooks_due, "j.1") == 5
    assert await r.smembers(keys.webhook_deliveries("j")) == {b"j.1"}
    assert 0 < await r.pttl(keys.webhook("j.1")) <= HOUR_MS
    await hooks.delivered("j.1", ["ended_ms", 7, "outcome", "delivered"])
    assert await r.zscore(keys.webhooks_due, "j.1") is None
    assert not await hooks.add("j.1", "j", ["url", "https://b"], 9, HOUR_MS)
    assert await r.hget(keys.webhook("j.1"), "url") == b"https://a"
    await hooks.remove("j", "j.1")
    assert not await r.exists(keys.webhook("j.1"), keys.webhook_deliveries("j"))


async def test_attempts_retries_and_the_dead_letter_set(store: JobStore) -> None:
    hooks, keys, r = WebhookStore(store), store.keys, store._redis
    for delivery in ("a.1", "b.1"):
        await hooks.add(delivery, delivery[0], ["url", "https://x"], 0, HOUR_MS)
    assert [await hooks.count_attempt("a.1") for _ in range(2)] == [1, 2]
    await hooks.retry_at("a.1", 50, "HTTP 500")
    assert await r.zscore(keys.webhooks_due, "a.1") == 50
    assert await r.hget(keys.webhook("a.1"), "last_error") == b"HTTP 500"
    await hooks.dead_letter("b.1", ["outcome", "dead"], 1000, 100)  # an old entry: trimmed
    await hooks.dead_letter("a.1", ["outcome", "dead"], 2000, 500)
    assert await r.zrange(keys.webhooks_dead, 0, -1) == [b"a.1"]
    assert await r.zcard(keys.webhooks_due) == 0 and 0 < await r.pttl(keys.webhook("a.1")) <= 500


async def test_due_deliveries_come_with_their_jobs_and_a_round_reschedules_them(
    store: JobStore,
) -> None:
    hooks, keys, r = WebhookStore(store), store.keys, store._redis
    job_id = uuid.uuid4().hex
    assert (await store.create(job_id, {"tenant": "t"})).created
    await r.set(keys.tombstone("gone"), "1")
    for delivery, due in ((f"{job_id}.1", 10), ("gone.1", 20), ("never.1", 30), ("later.1", 99)):
        await hooks.add(delivery, delivery.split(".")[0], ["url", "https://x"], due, HOUR_MS)
    found = await hooks.due(30, 10)
    assert [(d.delivery, d.spec["url"], d.tombstone) for d in found] == [
        (f"{job_id}.1", "https://x", True),  # a record's tombstone is made with it
        ("gone.1", "https://x", True),
        ("never.1", "https://x", False),
    ]
    assert found[0].record["state"] == "QUEUED" and found[1].record == found[2].record == {}
    assert len(await hooks.due(30, 2)) == 2
    await hooks.reschedule({f"{job_id}.1": 500}, ["gone.1"], ["never.1"])
    assert await r.zrange(keys.webhooks_due, 0, -1, withscores=True) == [
        (b"later.1", 99.0),
        (f"{job_id}.1".encode(), 500.0),
    ]
    assert not await r.exists(keys.webhook("never.1"), keys.webhook_deliveries("never"))
    await hooks.wake([job_id, "nobody"], 7)
    assert await r.zscore(keys.webhooks_due, f"{job_id}.1") == 7


async def test_job_events_follow_every_job_channel(store: JobStore) -> None:
    hooks = WebhookStore(store)
    assert hooks.has_job_events
    events = hooks.job_events()
    first = asyncio.ensure_future(anext(events))
    # Pub/sub keeps nothing for a subscriber that is not there yet: publish until the pattern
    # subscription answers (each PUBLISH says how many received it), then read what arrived.
    for _ in range(250):
        if await store._redis.publish(store.keys.job_channel("j"), b'{"state":"SUCCEEDED"}'):
            break
        await asyncio.sleep(0.02)
    else:
        pytest.fail("the job events subscription never took a message in 5 s")
    assert await asyncio.wait_for(first, 5) == b'{"state":"SUCCEEDED"}'
    await events.aclose()


async def test_the_sweeper_reads_pending_jobs_with_their_queue_entries(store: JobStore) -> None:
    sweep, keys, r = SweepState(store), store.keys, store._redis
    queued, ended = uuid.uuid4().hex, uuid.uuid4().hex
    for job_id in (queued, ended):
        assert (await store.create(job_id, {"tenant": "t"})).created
    await store.cancel(ended)
    await r.hset(keys.queue_job("q", queued), mapping={"timestamp": 1, "finishedOn": 2})
    pending = keys.index_sets("pending")
    assert sweep.indexes("pending") == pending and not sweep.lists_after_create
    due = await sweep.due(pending[0], 2**50, 10)
    assert sorted(due) == sorted([queued, ended])
    jobs = {job.job_id: job for job in await sweep.pending_jobs([*due, "nobody"], "q")}
    assert (jobs[queued].state, jobs[queued].tenant) == ("QUEUED", "t")
    assert jobs[queued].queued and jobs[queued].finished and isinstance(jobs[queued].create_ms, int)
    assert jobs[ended].state == "CANCELLED" and not jobs[ended].queued
    assert jobs["nobody"][1:] == (None, None, None, False, False)
    assert await sweep.job_states([queued, "nobody"]) == ["QUEUED", None]
    ttls = await sweep.record_ttls([ended, "nobody"])
    assert ttls[0] > 0 and ttls[1] < 0
    await sweep.reschedule(pending[0], {queued: 5})
    await sweep.done(pending[0], [ended])
    assert await r.zrange(pending[0], 0, -1, withscores=True) == [(queued.encode(), 5.0)]
    owner = f"sweeper-{uuid.uuid4().hex}"
    assert await sweep.hold_lease(owner, 10_000) and not await sweep.hold_lease("other", 10_000)


@pytest.fixture(scope="module")
def redis7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Debian's redis-server 7 (`make test` installs it, as for the Cluster tests): SET NX GET,
    which a request id's first content uses, needs Redis 7 (a cluster needs it anyway)."""
    binary = shutil.which("redis-server", path="/usr/bin")
    if binary is None:
        pytest.skip("no /usr/bin/redis-server (Redis 7): `make test` installs it (redis-tls)")
    port = free_port()
    server = Server(binary, tmp_path_factory.mktemp("redis7"), port, [f"port {port}"])
    yield server
    server.stop()


async def test_a_request_ids_first_content_wins(redis7: Server) -> None:
    """Redis Cluster only (SET NX GET: Redis 7)."""
    url = f"redis://127.0.0.1:{redis7.port}/0"
    store = JobStore.open(Settings(redis_url=url, env=f"t{uuid.uuid4().hex[:8]}"))
    try:
        await _first_content_wins(store)
    finally:
        await store.aclose()


async def _first_content_wins(store: JobStore) -> None:
    version = (await store._redis.info("server"))["redis_version"]
    assert int(str(version).split(".")[0]) >= 7, version
    assert await store.first_content("t", "r1", "aaa") == "aaa"
    assert await store.first_content("t", "r1", "bbb") == "aaa"
    assert await store.first_content("t", "r1", "aaa") == "aaa"
    assert await store.first_content("u", "r1", "bbb") == "bbb"  # another tenant's request
    key = store.keys.request_content("t", "r1")
    assert 0 < await store._redis.pttl(key) <= store.ttl.request_ms
