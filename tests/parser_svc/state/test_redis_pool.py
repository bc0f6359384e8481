"""A replica's state store pool is bounded and waits: a burst of concurrent calls beyond its
connections (a flood of GetStatus, thousands of WatchJob streams re-reading at once) queues for
a free connection instead of failing. redis-py's default pool raises MaxConnectionsError at
call 101 (bench_spine with 5,000 streams lost 466 terminal records to it)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from docparse.local.embedded_redis import EmbeddedRedis
from parser_svc.settings import Settings
from parser_svc.state.redis_conn import RedisTarget
from parser_svc.state.redis_sentinel import PrimaryConnection
from parser_svc.state.store import JobStore, connect


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A server of its own, so the connections counted are this test's."""
    with EmbeddedRedis(tmp_path) as server:
        yield server


def store_on(server: EmbeddedRedis, **overrides: object) -> JobStore:
    settings = Settings(redis_url=server.url, env=f"p{uuid.uuid4().hex[:8]}", **overrides)  # type: ignore[arg-type]
    return JobStore(connect(settings), settings)


def clients(server: EmbeddedRedis) -> int:
    """Client connections the server holds, besides the one asking."""
    with redis.Redis(port=server.port) as probe:
        return int(probe.info("clients")["connected_clients"]) - 1


async def burst(store: JobStore, calls: int) -> int:
    """`calls` concurrent reads of one job; the connections open while they ran."""
    job_id = uuid.uuid4().hex
    assert (await store.create(job_id, {"file_name": "a.pdf"})).status == "OK"
    jobs = await asyncio.gather(*(store.get(job_id) for _ in range(calls)))
    assert {job.job_id for job in jobs} == {job_id}
    return len(store._redis.connection_pool._available_connections)


async def test_a_burst_beyond_the_pool_waits_for_connections(own_redis: EmbeddedRedis) -> None:
    store = store_on(own_redis, redis_max_connections=4)
    try:
        pooled = await burst(store, 300)
        assert pooled <= 4
        assert clients(own_redis) <= 4
    finally:
        await store.aclose()


async def test_the_default_pool_takes_more_concurrent_calls_than_connections(
    own_redis: EmbeddedRedis,
) -> None:
    store = store_on(own_redis)
    try:
        await burst(store, 400)  # redis-py's own pool: MaxConnectionsError past 100 in flight
        assert clients(own_redis) <= 100
    finally:
        await store.aclose()


def test_a_sentinel_client_waits_for_its_connections_too() -> None:
    pool = (
        RedisTarget("redis+sentinel://127.0.0.1:1/docparse/0")
        .client(max_connections=8, pool_timeout_s=1.5)
        .connection_pool
    )
    assert isinstance(pool, redis.asyncio.BlockingConnectionPool)
    assert pool.max_connections == 8 and pool.timeout == 1.5
    assert pool.connection_class is PrimaryConnection  # still follows the primary
