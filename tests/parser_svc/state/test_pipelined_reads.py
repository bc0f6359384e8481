"""parser_svc/state/pipelined_reads.py, the state store's hot read path, against real Redis servers:
every caller gets its own record whatever happens to the calls around it; broken, stuck and
refused connections read as redis-py's errors do (JobStore maps them to UNAVAILABLE)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis
from redis.exceptions import AuthenticationError, ResponseError

from docparse.errors import DocparseError
from docparse.local.embedded_redis import EmbeddedRedis
from parser_svc.settings import Settings
from parser_svc.state.pipelined_reads import PipelinedReader
from parser_svc.state.redis_conn import RedisTarget
from parser_svc.state.store import JobStore, connect
from parser_svc.state.store_errors import is_unavailable
from tests.faultproxy import Command, FaultProxy
from tests.helpers import eventually
from tests.parser_svc.state.test_redis_urls import Certs, acl_url, tls_env
from tests.parser_svc.state.test_redis_urls import acl_server as acl_server  # the fixtures, shared
from tests.parser_svc.state.test_redis_urls import certs as certs
from tests.parser_svc.state.test_redis_urls import tls_server as tls_server
from tests.redis_servers import Server


def reader(url: str, connections: int = 2, timeout_s: float = 2.0) -> PipelinedReader:
    return PipelinedReader(RedisTarget(url), connections=connections, timeout_s=timeout_s)


def records(url: str, count: int) -> dict[str, dict[bytes, bytes]]:
    """`count` hashes of different sizes under fresh keys, as redis-py wrote them."""
    made = {}
    with redis.Redis.from_url(url) as client:
        for i in range(count):
            key = f"reads:{uuid.uuid4().hex}"
            fields = {f"f{j}".encode(): f"{key}-{j}".encode() for j in range(1 + i % 7)}
            client.hset(key, mapping=fields)
            made[key] = fields
    return made


def store_reading_through_it(url: str, **settings: Any) -> tuple[JobStore, PipelinedReader]:
    """A JobStore reading records through a PipelinedReader, in an env of its own."""
    config = Settings(redis_url=url, env=f"reads{uuid.uuid4().hex[:6]}", **settings)
    reads = PipelinedReader.of(config)
    assert reads is not None
    return JobStore(connect(config), config, reads), reads


def hgetall(key: str) -> Callable[[Command], bool]:
    """Matches the HGETALL of `key` (a FaultProxy fault)."""
    return lambda cmd: cmd.name == "HGETALL" and cmd.args[:1] == (key.encode(),)


async def test_concurrent_reads_each_get_their_own_record(redis_server: EmbeddedRedis) -> None:
    """300 reads at once over 2 connections, 100 keys and a missing one: every caller gets
    exactly its key's hash (a reply given to the wrong caller would show a foreign key)."""
    made = records(redis_server.url, 100)
    keys = [*made, *made, *made, f"reads:missing:{uuid.uuid4().hex}"]
    reads = reader(redis_server.url)
    try:
        got = await asyncio.gather(*(reads.hgetall(key) for key in keys))
    finally:
        await reads.aclose()
    assert got == [made.get(key, {}) for key in keys]


async def test_reads_sent_at_once_each_get_their_own_record(
    isolated_proxy: FaultProxy, isolated_redis: EmbeddedRedis
) -> None:
    """hgetall_many (ListJobs' records): 60 keys written at once, a missing one among them, and
    single reads interleaved on the same connections: each in its place. A cut while they wait:
    sent once more and answered. A key of another type: the call fails with Redis's error, and
    the replies behind it on the connection still reach their own callers."""
    made = records(isolated_redis.url, 60)
    keys = [*[*made][:30], f"reads:missing:{uuid.uuid4().hex}", *[*made][30:]]
    reads = reader(isolated_proxy.url, connections=2)
    try:
        many, singles = await asyncio.gather(
            reads.hgetall_many(keys), asyncio.gather(*(reads.hgetall(key) for key in made))
        )
        assert many == [made.get(key, {}) for key in keys]
        assert singles == list(made.values())
        isolated_proxy.arm("delay", hgetall(keys[5]), delay_s=5.0)
        sent = isolated_proxy.commands["HGETALL"] + len(keys)
        waiting = asyncio.ensure_future(reads.hgetall_many(keys))
        await asyncio.to_thread(
            eventually,
            lambda: isolated_proxy.commands["HGETALL"] >= sent,
            5,
            "the batch on the wire, held behind its sixth reply",
        )
        isolated_proxy.sever_all()
        assert await waiting == [made.get(key, {}) for key in keys]
        with redis.Redis.from_url(isolated_redis.url) as client:
            client.set("reads:a-string", "x")
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await reads.hgetall_many([keys[0], "reads:a-string", keys[1]])
        behind = await asyncio.gather(*(reads.hgetall(key) for key in keys[:4]))
        assert behind == [made[key] for key in keys[:4]]
    finally:
        await reads.aclose()


async def test_a_read_given_up_on_keeps_the_replies_behind_it_in_order(
    isolated_proxy: FaultProxy, isolated_redis: EmbeddedRedis
) -> None:
    """One connection; the first read's reply is held 1 s and its caller gives up after 0.2 s;
    the reads sent behind it on the same connection still get their own records."""
    made = records(isolated_redis.url, 5)
    first, *rest = made
    isolated_proxy.arm("delay", hgetall(first), delay_s=1.0)
    reads = reader(isolated_proxy.url, connections=1)
    try:
        await reads.hgetall(rest[0])  # connected, handshake done
        slow = asyncio.ensure_future(reads.hgetall(first))
        behind = [asyncio.ensure_future(reads.hgetall(key)) for key in rest]
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await slow
        assert await asyncio.gather(*behind) == [made[key] for key in rest]
        assert await reads.hgetall(first) == made[first]
    finally:
        await reads.aclose()


async def test_reads_on_a_connection_that_breaks_are_sent_once_more_on_a_new_one(
    isolated_proxy: FaultProxy, isolated_redis: EmbeddedRedis
) -> None:
    """Reads waiting on a connection that is cut (a network cut, a Redis restart) are sent
    once more on a new connection and get their own records; a second cut in a row is the
    answer (a ConnectionError: STATE_STORE_UNAVAILABLE)."""
    made = records(isolated_redis.url, 6)
    keys = list(made)
    isolated_proxy.arm("delay", hgetall(keys[0]), delay_s=5.0)
    reads = reader(isolated_proxy.url, connections=1)
    try:
        await reads.hgetall(keys[1])
        sent = isolated_proxy.commands["HGETALL"] + len(keys)
        waiting = [asyncio.ensure_future(reads.hgetall(key)) for key in keys]
        await asyncio.to_thread(  # the proxy counts in its own thread; the loop sends meanwhile
            eventually,
            lambda: isolated_proxy.commands["HGETALL"] >= sent,
            5,
            "every read on the wire, held behind the first one's reply",
        )
        isolated_proxy.sever_all()
        assert await asyncio.gather(*waiting) == [made[key] for key in keys]
        isolated_proxy.arm("drop", hgetall(keys[2]), count=2)
        with pytest.raises(redis.ConnectionError) as cut:
            await reads.hgetall(keys[2])
        assert is_unavailable(cut.value)
        assert await reads.hgetall(keys[3]) == made[keys[3]]  # and the next read works again
    finally:
        await reads.aclose()


async def test_a_connection_that_stops_answering_is_replaced(
    isolated_proxy: FaultProxy, isolated_redis: EmbeddedRedis
) -> None:
    """A reply held 30 s (a Redis that stopped answering on that connection): its caller
    gives up after 0.1 s; a read sent then queues behind the held one until the reader's
    deadline (0.2 s) drops the connection, and is answered on a new one; so is the next."""
    made = records(isolated_redis.url, 2)
    stuck, fine = made
    reads = reader(isolated_proxy.url, connections=1, timeout_s=0.2)
    try:
        await reads.hgetall(fine)
        isolated_proxy.arm("delay", hgetall(stuck), delay_s=30.0)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await reads.hgetall(stuck)
        async with asyncio.timeout(2):
            assert await reads.hgetall(fine) == made[fine]
            assert await reads.hgetall(fine) == made[fine]
    finally:
        isolated_proxy.calm()
        await reads.aclose()


async def test_a_read_nobody_answers_fails_at_the_deadline_and_the_reads_behind_it_get_theirs(
    isolated_proxy: FaultProxy, isolated_redis: EmbeddedRedis
) -> None:
    """No caller deadline this time: the reader's own (0.5 s) ends a read whose reply is held
    30 s, with redis-py's TimeoutError, and the reads sent 0.2 s later behind it on the same
    connection are sent once more on a new one and get their own records. Through JobStore
    the held read is UNAVAILABLE / STATE_STORE_UNAVAILABLE, "timed out", after the deadline."""
    made = records(isolated_redis.url, 4)
    stuck, *fine = made
    reads = reader(isolated_proxy.url, connections=1, timeout_s=0.5)
    try:
        await reads.hgetall(fine[0])
        isolated_proxy.arm("delay", hgetall(stuck), delay_s=30.0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        held = asyncio.ensure_future(reads.hgetall(stuck))
        await asyncio.sleep(0.2)  # reads behind it with time left at its deadline
        behind = [asyncio.ensure_future(reads.hgetall(key)) for key in fine]
        with pytest.raises(redis.TimeoutError) as late:
            await held
        waited = loop.time() - started
        # the deadline's timer may fire a few microseconds before 0.5 s by this loop's clock
        assert 0.495 <= waited < 2.0, waited
        assert is_unavailable(late.value)
        assert await asyncio.gather(*behind) == [made[key] for key in fine]
    finally:
        isolated_proxy.calm()
        await reads.aclose()

    store, reads = store_reading_through_it(isolated_proxy.url, redis_timeout_s=0.5)
    job_id = uuid.uuid4().hex
    try:
        await store.create(job_id, {"file_name": "late.pdf"})
        isolated_proxy.arm("delay", hgetall(store.keys.job(job_id)), delay_s=30.0)
        started = loop.time()
        with pytest.raises(DocparseError) as answer:
            await store.get(job_id)
        assert 0.5 <= loop.time() - started < 2.0
        assert answer.value.code == grpc.StatusCode.UNAVAILABLE
        assert answer.value.reason == "STATE_STORE_UNAVAILABLE"
        assert "timed out" in str(answer.value)
    finally:
        isolated_proxy.calm()
        await reads.aclose()
        await store.aclose()


@pytest.mark.stack  # starts an EmbeddedRedis in its body
async def test_redis_down_fails_at_once_and_reads_resume_when_it_is_back(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis")
    server.start()
    made = records(server.url, 1)
    (key,) = made
    reads = reader(server.url)
    try:
        assert await reads.hgetall(key) == made[key]
        server.stop()
        for _ in range(3):  # whichever connection's turn it is
            with pytest.raises(Exception) as down:
                async with asyncio.timeout(2):
                    await reads.hgetall(key)
            assert is_unavailable(down.value), repr(down.value)
        server.start()
        made = records(server.url, 1)  # no persistence: the data went with it
        (key,) = made
        assert await reads.hgetall(key) == made[key]
    finally:
        await reads.aclose()
        server.stop()


async def test_error_replies_raise_what_redis_py_raises(redis_server: EmbeddedRedis) -> None:
    key = f"reads:string:{uuid.uuid4().hex}"
    with redis.Redis.from_url(redis_server.url) as client:
        client.set(key, "not a hash")
    reads = reader(redis_server.url)
    try:
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await reads.hgetall(key)
        assert await reads.hgetall(f"reads:missing:{uuid.uuid4().hex}") == {}  # still in line
    finally:
        await reads.aclose()


async def test_an_acl_user_reads_and_a_refused_password_is_an_authentication_error(
    acl_server: Server,
) -> None:
    """The URL's user and password (and database) are used; a password Redis refuses is an
    AuthenticationError, which the store answers as UNAVAILABLE saying why
    (tests/parser_svc/state/test_redis_urls.py, through the reader and the pool)."""
    url = acl_url(acl_server.port).replace("/0", "/3")
    made = records(url, 3)
    reads = reader(url)
    try:
        assert await asyncio.gather(*(reads.hgetall(k) for k in made)) == list(made.values())
    finally:
        await reads.aclose()
    refused = reader(acl_url(acl_server.port, "rotated"))
    try:
        with pytest.raises(AuthenticationError):
            await refused.hgetall("any")
    finally:
        await refused.aclose()


async def test_reads_over_tls_with_a_client_certificate(certs: Certs, tls_server: Server) -> None:
    env = tls_env(certs)
    settings = Settings(
        redis_url=f"rediss://127.0.0.1:{tls_server.port}/0",
        redis_tls_ca_file=Path(env["DOCPARSE_REDIS_TLS_CA_FILE"]),
        redis_tls_cert_file=Path(env["DOCPARSE_REDIS_TLS_CERT_FILE"]),
        redis_tls_key_file=Path(env["DOCPARSE_REDIS_TLS_KEY_FILE"]),
    )
    client = connect(settings)
    key = f"reads:tls:{uuid.uuid4().hex}"
    await client.hset(key, mapping={"over": "tls"})
    reads = PipelinedReader.of(settings)
    assert reads is not None
    try:
        assert await reads.hgetall(key) == {b"over": b"tls"}
    finally:
        await reads.aclose()
        await client.aclose()


async def test_a_user_without_client_setname_reads_all_the_same(
    redis_server: EmbeddedRedis,
) -> None:
    """The connections name themselves (CLIENT SETNAME) for CLIENT LIST; an ACL user that may
    not do that still reads (the pool's connections would, too)."""
    user, password = f"reader{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    made = records(redis_server.url, 2)
    with redis.Redis.from_url(redis_server.url) as admin:
        admin.acl_setuser(
            user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+hgetall"]
        )
    reads = reader(redis_server.url.replace("redis://", f"redis://{user}:{password}@"))
    try:
        assert await asyncio.gather(*(reads.hgetall(k) for k in made)) == list(made.values())
    finally:
        await reads.aclose()
        with redis.Redis.from_url(redis_server.url) as admin:
            admin.acl_deluser(user)


def test_sentinel_and_cluster_urls_and_the_switch_read_through_the_pool() -> None:
    assert PipelinedReader.of(Settings(redis_url="redis://127.0.0.1:6379/0")) is not None
    assert PipelinedReader.of(Settings(redis_url="unix:///tmp/redis.sock?db=2")) is not None
    for url in ("redis+sentinel://127.0.0.1:26379/mymaster", "redis+cluster://127.0.0.1:7000"):
        assert PipelinedReader.of(Settings(redis_url=url)) is None, url
    switched_off = Settings(redis_url="redis://127.0.0.1:6379/0", redis_pipelined_reads=False)
    assert PipelinedReader.of(switched_off) is None


async def test_the_store_reads_records_through_it(redis_server: EmbeddedRedis) -> None:
    """JobStore.get with a reader answers the record from the reader's own connection (named
    docparse-reads in CLIENT LIST), and NOT_FOUND for a job that never existed."""
    store, reads = store_reading_through_it(redis_server.url)
    job_id = uuid.uuid4().hex
    try:
        await store.create(job_id, {"file_name": "read.pdf"})
        assert (await store.get(job_id)).file_name == "read.pdf"
        with redis.Redis.from_url(redis_server.url) as admin:
            names = [c.get("name") for c in admin.client_list()]
        assert "docparse-reads" in names
        with pytest.raises(DocparseError) as missing:
            await store.get(uuid.uuid4().hex)
        assert missing.value.code == grpc.StatusCode.NOT_FOUND
    finally:
        await reads.aclose()
        await store.aclose()
