"""WatchJob: many streams, resume cursors, the subscribe/snapshot gap, lost pub/sub."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
import redis.asyncio as aioredis

from docparse.errors import DocparseError
from docparse.local.embedded_redis import EmbeddedRedis
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from docparse.v1.parser_service_pb2 import WatchJobResponse
from parser_svc.api.watch import watch_job
from parser_svc.settings import Settings
from parser_svc.state.events import EventHub
from parser_svc.state.records import is_terminal
from parser_svc.state.store import JobStore, connect
from tests.faultproxy import FaultProxy
from tests.helpers import make_pdf, submit

STREAMS = 50


async def _collect(address: str, job_id: str, after: int = 0) -> list[job_pb2.Job]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = parser_service_pb2_grpc.ParserServiceStub(channel)
        request = parser_service_pb2.WatchJobRequest(job_id=job_id, after_version=after)
        return [e.job async for e in stub.WatchJob(request, timeout=120) if e.HasField("job")]


def _strictly_increasing(jobs: list[job_pb2.Job]) -> bool:
    return all(a.version < b.version for a, b in itertools.pairwise(jobs))


async def test_fifty_streams_over_all_replicas_get_the_terminal_record(
    big_stack: LocalStack,
) -> None:
    addresses = big_stack.parser_addresses + big_stack.gateway_addresses
    job = submit(addresses[0], make_pdf(25), "twenty-five.pdf")
    streams = [_collect(addresses[i % len(addresses)], job.job_id) for i in range(STREAMS)]
    results = await asyncio.gather(*streams)
    for jobs in results:
        assert jobs, "a stream ended without sending anything"
        assert _strictly_increasing(jobs), [j.version for j in jobs]
        assert jobs[-1].state == job_pb2.STATE_SUCCEEDED
    finals = {jobs[-1].version for jobs in results}
    assert len(finals) == 1  # everybody got the same terminal record


async def test_streams_share_one_pubsub_connection_per_replica(big_stack: LocalStack) -> None:
    job = submit(big_stack.parser_addresses[0], make_pdf(60), "sixty.pdf")
    address = big_stack.parser_addresses[2]
    async with grpc.aio.insecure_channel(address) as channel:
        stub = parser_service_pb2_grpc.ParserServiceStub(channel)
        calls = [
            stub.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job.job_id)) for _ in range(20)
        ]
        for call in calls:  # each stream is live once it has sent its first record
            await call.read()
        client = aioredis.Redis.from_url(big_stack.redis_url)
        pubsub_clients = await client.client_list(_type="pubsub")
        await client.aclose()
        for call in calls:
            call.cancel()
    # One per parser_svc process (4), not one per stream (20).
    assert len(pubsub_clients) <= len(big_stack.parser_addresses)


async def test_resumed_stream_never_sends_an_older_record(big_stack: LocalStack) -> None:
    address = big_stack.gateway_addresses[1]
    job = submit(address, make_pdf(10), "ten.pdf")
    full = await _collect(address, job.job_id)
    assert full and is_terminal(full[-1]) and _strictly_increasing(full)
    # A warm worker can finish the job before this stream opens: the stream then holds the
    # terminal record alone, and the version just below it (an earlier write: create, claim,
    # progress) stands in for the middle record the stream did not see.
    middle = full[(len(full) - 1) // 2].version if len(full) >= 2 else full[-1].version - 1
    assert middle >= 1
    resumed = await _collect(big_stack.parser_addresses[3], job.job_id, after=middle)
    assert resumed and all(j.version > middle for j in resumed)
    assert resumed[-1].version == full[-1].version
    # Resuming after the terminal version: nothing more to send, and the stream ends OK.
    assert await _collect(address, job.job_id, after=full[-1].version) == []


class _WriteBeforeSnapshot(JobStore):
    """Writes a progress update exactly between the watcher's subscribe and its snapshot."""

    injected_version = 0

    async def get(self, job_id: str) -> job_pb2.Job:
        if not self.injected_version:
            result = await self.progress(job_id, "w", done=7, total=9, stage="text")
            self.injected_version = result.version
        return await super().get(job_id)


async def _new_job(store: JobStore) -> str:
    job_id = uuid.uuid4().hex
    await store.create(job_id, {"file_name": "gap.pdf"})
    await store.claim(job_id, "w")
    return job_id


async def test_update_between_subscribe_and_snapshot_is_not_lost(
    redis_server: EmbeddedRedis,
) -> None:
    settings = Settings(redis_url=redis_server.url, env=f"gap{uuid.uuid4().hex[:6]}")
    store = _WriteBeforeSnapshot(connect(settings), settings)
    plain = JobStore(store._redis, settings)
    job_id = await _new_job(plain)
    hub = EventHub(redis_server.url)
    await hub.start()
    stream = watch_job(store, hub, job_id, 0, resync_s=30, heartbeat_s=30)
    first = await anext(stream)
    assert store.injected_version and first.job.version >= store.injected_version
    assert first.job.progress.done == 7
    await plain.finish(job_id, "w", "SUCCEEDED", {"res_sha256": "ab"})
    rest = [event.job async for event in stream if event.HasField("job")]
    assert is_terminal(rest[-1])
    await hub.close()


async def test_idle_stream_gets_heartbeats(redis_server: EmbeddedRedis) -> None:
    settings = Settings(redis_url=redis_server.url, env=f"hb{uuid.uuid4().hex[:6]}")
    store = JobStore(connect(settings), settings)
    job_id = await _new_job(store)
    hub = EventHub(redis_server.url)
    await hub.start()
    stream = watch_job(store, hub, job_id, 0, resync_s=0.2, heartbeat_s=0.3)
    first = await anext(stream)
    beat = await asyncio.wait_for(anext(stream), 5)
    assert beat.HasField("heartbeat") and beat.heartbeat.last_version == first.job.version
    await stream.aclose()
    await hub.close()


async def test_watchers_survive_killed_pubsub_connection(redis_server: EmbeddedRedis) -> None:
    settings = Settings(redis_url=redis_server.url, env=f"kill{uuid.uuid4().hex[:6]}")
    store = JobStore(connect(settings), settings)
    job_ids = [await _new_job(store) for _ in range(10)]
    hub = EventHub(redis_server.url)
    await hub.start()
    streams = [watch_job(store, hub, j, 0, resync_s=30, heartbeat_s=30) for j in job_ids]
    for stream in streams:
        await anext(stream)  # subscribed and snapshot sent
    admin = aioredis.Redis.from_url(redis_server.url)
    killed = await admin.client_kill_filter(_type="pubsub")
    assert killed >= 1
    # Written while the hub is reconnecting: only a resync can deliver these.
    for job_id in job_ids:
        await store.finish(job_id, "w", "SUCCEEDED", {"res_sha256": "ab"})

    async def last(stream: AsyncIterator[WatchJobResponse]) -> job_pb2.Job:
        jobs = [e.job async for e in stream if e.HasField("job")]
        return jobs[-1]

    finals = await asyncio.wait_for(asyncio.gather(*(last(s) for s in streams)), 10)
    assert all(job.state == job_pb2.STATE_SUCCEEDED for job in finals)
    assert hub.reconnects >= 1
    await admin.aclose()
    await hub.close()


async def test_channels_left_are_unsubscribed_together_after_the_linger(
    redis_server: EmbeddedRedis,
) -> None:
    """A channel whose last watcher left stays subscribed for the linger: a watcher that comes
    back meanwhile hears the next event with no new SUBSCRIBE; then every channel still
    without a watcher is unsubscribed (one UNSUBSCRIBE for all of them)."""
    hub = EventHub(redis_server.url, linger_s=0.5)
    await hub.start()
    admin = aioredis.Redis.from_url(redis_server.url)
    channels = [f"linger:{uuid.uuid4().hex}:{i}" for i in range(5)]

    async def subscribers() -> list[int]:
        return [n for _, n in await admin.pubsub_numsub(*channels)]

    async def until_subscribers(expected: list[int]) -> None:
        for _ in range(200):  # 10 s
            if await subscribers() == expected:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"subscribers: {await subscribers()}, expected {expected}")

    for channel in channels:
        async with hub.subscribe(channel):
            pass
    assert hub.channel_count == 0
    assert await subscribers() == [1] * 5  # lingering
    async with hub.subscribe(channels[0]) as queue:
        assert await admin.publish(channels[0], json.dumps({"job_id": "x", "version": 3})) == 1
        assert await asyncio.wait_for(queue.get(), 5) == {"job_id": "x", "version": 3}
        await until_subscribers([1, 0, 0, 0, 0])
    await until_subscribers([0] * 5)
    await admin.aclose()
    await hub.close()


async def test_a_channel_taken_again_while_its_unsubscribe_is_in_flight_stays_live(
    redis_server: EmbeddedRedis,
) -> None:
    """The linger ends (the idle channels' UNSUBSCRIBE goes out from a task) and in the same
    turn a watcher subscribes one of them again: its SUBSCRIBE must not overtake that
    UNSUBSCRIBE, or the server ends unsubscribed while the hub thinks it listens (the watcher
    would hear nothing until its next resync read)."""
    hub = EventHub(redis_server.url, linger_s=60)
    await hub.start()
    admin = aioredis.Redis.from_url(redis_server.url)
    channel = f"again:{uuid.uuid4().hex}"
    async with hub.subscribe(channel):
        pass  # lingering now
    hub._flush_idle()  # the linger's end, as its timer calls it
    async with hub.subscribe(channel) as queue:
        assert await admin.publish(channel, json.dumps({"job_id": "x", "version": 4})) == 1
        assert await asyncio.wait_for(queue.get(), 5) == {"job_id": "x", "version": 4}
    await admin.aclose()
    await hub.close()


async def _versions_until_terminal(stream: AsyncIterator[WatchJobResponse]) -> list[int]:
    versions: list[int] = []
    async for event in stream:
        if event.HasField("job"):
            versions.append(event.job.version)
            if is_terminal(event.job):
                break
    return versions


@contextlib.asynccontextmanager
async def _watch_over_a_slow_link(
    redis_url: str, port: int, lag_s: float, patience_s: float
) -> AsyncIterator[tuple[JobStore, str, AsyncIterator[WatchJobResponse], EventHub]]:
    """A watch of a new job whose hub reaches Redis through a proxy that holds every pub/sub
    byte `lag_s` seconds (subscribe confirmations included); the store goes straight to Redis.
    The hub's deadline is 0.3 s and it polls every 0.1 s while a confirmation is late."""
    settings = Settings(redis_url=redis_url, env=f"slow{uuid.uuid4().hex[:6]}")
    store = JobStore(connect(settings), settings)
    job_id = await _new_job(store)
    with FaultProxy(port) as proxy:
        proxy.lag_passthrough(lag_s)
        hub = EventHub(proxy.url, timeout_s=0.3, patience_s=patience_s, poll_s=0.1)
        await hub.start()
        try:
            yield store, job_id, watch_job(store, hub, job_id, 0, resync_s=30, heartbeat_s=30), hub
        finally:
            proxy.lag_passthrough(0)
            await hub.close()
            await store.aclose()


async def test_a_late_subscribe_confirmation_makes_the_watch_poll_not_fail(
    redis_server: EmbeddedRedis,
) -> None:
    """The hub's pub/sub link is slow (every byte it receives 1.5 s late, the subscribe
    confirmation included; its store deadline is 0.3 s): the watch still sends its snapshot,
    then newer records as it polls (a poll may skip one, as any resync read) and the terminal
    one, versions strictly increasing. It used to end UNAVAILABLE, and every client resumed at
    once on a store that was already slow."""
    slow = _watch_over_a_slow_link(redis_server.url, redis_server.port, 1.5, patience_s=30)
    async with slow as (store, job_id, stream, hub):
        first = await anext(stream)
        assert hub.late_subscribes == 1
        for done in (1, 2):
            await store.progress(job_id, "w", done=done, total=3, stage="text")
        await store.finish(job_id, "w", "SUCCEEDED", {"res_sha256": "ab"})
        rest = await asyncio.wait_for(_versions_until_terminal(stream), 20)
        versions = [first.job.version, *rest]
        assert versions == sorted(set(versions)), versions
        assert versions[-1] == (await store.get(job_id)).version


async def test_a_subscription_never_confirmed_ends_the_watch_unavailable(
    redis_server: EmbeddedRedis,
) -> None:
    """No confirmation within the hub's patience (2 s here): after its snapshot the watch ends
    with UNAVAILABLE STATE_STORE_UNAVAILABLE (resume it), not a stream that polls forever."""
    slow = _watch_over_a_slow_link(redis_server.url, redis_server.port, 120, patience_s=2)
    async with slow as (_, _, stream, _):
        assert (await anext(stream)).job.version >= 1
        with pytest.raises(DocparseError) as ended:
            await asyncio.wait_for(_versions_until_terminal(stream), 20)
        assert ended.value.code == grpc.StatusCode.UNAVAILABLE
        assert ended.value.reason == "STATE_STORE_UNAVAILABLE"
        assert "not confirmed" in ended.value.message
