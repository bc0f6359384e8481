"""tests/faultproxy.py against a real redis-server, driven by redis-py through the proxy.

Each fault test checks both sides: what the client saw (an error, a timeout, a slow reply)
and what Redis holds (read directly, not through the proxy), so "the command ran but its
reply was lost" is proven rather than assumed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from docparse.local.embedded_redis import EmbeddedRedis
from tests.faultproxy import (
    Command,
    FaultProxy,
    ProtocolError,
    _ReplyParser,
    _RequestParser,
    any_write,
)

INCR = "return redis.call('INCR', KEYS[1])"
OTHER = "return redis.call('INCRBY', KEYS[1], 10)"
NESTED = "return {1, {2, {'x', false}}, 'y', false}"

Connect = Callable[..., redis.Redis]


@pytest.fixture
def proxy(redis_server: EmbeddedRedis) -> Iterator[FaultProxy]:
    with FaultProxy(redis_server.port) as p:
        yield p


@pytest.fixture
def direct(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    client: redis.Redis = redis.Redis(port=redis_server.port, socket_timeout=10)
    yield client
    client.close()


@pytest.fixture
def connect(proxy: FaultProxy) -> Iterator[Connect]:
    """Clients through the proxy; no retries unless a test asks for them."""
    made: list[redis.Redis] = []

    def make(**kwargs: Any) -> redis.Redis:
        kwargs.setdefault("port", proxy.port)
        kwargs.setdefault("retry", Retry(NoBackoff(), 0))
        kwargs.setdefault("socket_timeout", 10)
        client: redis.Redis = redis.Redis(host="127.0.0.1", **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def key(label: str = "k") -> str:
    return f"faultproxy:{uuid.uuid4().hex}:{label}"


def sha1(source: str) -> str:
    return hashlib.sha1(source.encode()).hexdigest()


# -- parsers ---------------------------------------------------------------------------------

# (bytes of one top-level value, is it a server push)
REPLIES: list[tuple[bytes, bool]] = [
    (b"+OK\r\n", False),
    (b"$5\r\nhe\nlo\r\n", False),  # a newline inside a bulk is skipped by length
    (b"*-1\r\n", False),
    (b"$-1\r\n", False),
    (b"*2\r\n*1\r\n:1\r\n$0\r\n\r\n", False),
    (b"%1\r\n+a\r\n~2\r\n,1.5\r\n_\r\n", False),
    (b"|1\r\n+ttl\r\n:3\r\n#t\r\n", False),  # an attribute and the reply it annotates
    (b">2\r\n+invalidate\r\n*0\r\n", True),  # out of band: answers no command
    (b"(12345678901234567890\r\n", False),
    (b"=7\r\ntxt:abc\r\n", False),
    (b"!3\r\nERR\r\n", False),
    (b"-ERR x\r\n", False),
    (b"*0\r\n", False),
]


def test_reply_parser_finds_every_reply_at_any_chunk_boundary() -> None:
    stream = b"".join(part for part, _ in REPLIES)
    expected: list[tuple[int, int, bool]] = []
    offset = 0
    for part, push in REPLIES:
        expected += [(0, offset, push), (1, offset + len(part), push)]
        offset += len(part)
    assert _ReplyParser().feed(stream) == expected
    for split in range(len(stream) + 1):  # every boundary, including inside headers and bodies
        parser = _ReplyParser()
        events = parser.feed(stream[:split])
        events += [(k, off + split, push) for k, off, push in parser.feed(stream[split:])]
        assert events == expected, split
    parser = _ReplyParser()
    byte_events = []
    for i in range(len(stream)):
        byte_events += [(k, off + i, push) for k, off, push in parser.feed(stream[i : i + 1])]
    assert byte_events == expected
    with pytest.raises(ProtocolError):
        _ReplyParser().feed(b"?garbage\r\n")


def test_request_parser_handles_pipelines_inline_and_split_payloads() -> None:
    big = os.urandom(70_000)
    stream = (
        b"*3\r\n$4\r\nEVAL\r\n$" + str(len(INCR)).encode() + b"\r\n" + INCR.encode() + b"\r\n"
        b"$1\r\n1\r\n"
        b"*3\r\n$3\r\nset\r\n$1\r\nk\r\n$" + str(len(big)).encode() + b"\r\n" + big + b"\r\n"
        b"PING\r\n\r\n*0\r\n"
        b"*2\r\n$7\r\nEVALSHA\r\n$3\r\nABC\r\n"
    )
    expected = [
        Command("EVAL", (INCR.encode(), b"1")),
        Command("SET", (b"k", big)),
        Command("PING", ()),
        Command("EVALSHA", (b"ABC",)),
    ]
    assert _RequestParser().feed(stream) == expected
    for chunk in (1, 7, 4096):
        parser = _RequestParser()
        got: list[Command] = []
        for i in range(0, len(stream), chunk):
            got += parser.feed(stream[i : i + chunk])
        assert got == expected
    eval_, set_, ping, evalsha = expected
    assert eval_.script_sha() == sha1(INCR) and eval_.is_script and any_write(eval_)
    assert evalsha.script_sha() == "abc" and evalsha.is_script
    assert set_.script_sha() is None and not any_write(set_) and not any_write(ping)
    assert Command("EXEC", ()).is_commit and any_write(Command("EXEC", ()))
    assert Command("FCALL", (b"f", b"0")).is_script


# -- unarmed ---------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])  # redis-py 8 speaks RESP3 unless told otherwise
def test_unarmed_traffic_is_unchanged(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis, protocol: int
) -> None:
    via = connect(protocol=protocol)
    plain = connect(port=direct.connection_pool.connection_kwargs["port"], protocol=protocol)
    value = os.urandom(5 * 1024 * 1024)
    results: list[list[Any]] = []
    for client in (via, plain):
        big, counter, tx = key("big"), key("counter"), key("tx")
        out: list[Any] = []
        assert client.set(big, value)
        out.append(client.get(big) == value)
        pipe = client.pipeline(transaction=False)
        for _ in range(1000):
            pipe.incr(counter)
        out.append(pipe.execute())
        txp = client.pipeline(transaction=True)
        txp.set(tx, "a")
        txp.append(tx, "bc")
        txp.get(tx)
        txp.eval(NESTED, 0)
        out.append(txp.execute())
        out.append(client.eval(NESTED, 0))
        out.append(client.eval("return nil", 0))
        out.append(client.bzpopmin(key("empty"), timeout=0.1))  # a blocking call, null reply
        results.append(out)
    assert results[0] == results[1]
    assert results[0][0] is True and results[0][1] == list(range(1, 1001))
    assert results[0][2] == [True, 3, b"abc", [1, [2, [b"x", None]], b"y", None]]
    assert proxy.commands["INCRBY"] == 1000  # redis-py sends incr() as INCRBY key 1
    assert proxy.commands["SET"] == 2 and proxy.commands["GET"] == 2
    assert proxy.commands["MULTI"] == 1 and proxy.commands["EXEC"] == 1
    assert proxy.commands["EVAL"] == 3 and proxy.commands["BZPOPMIN"] == 1
    assert proxy.fired == {"drop": 0, "delay": 0}


def test_blocking_command_waits_through_the_proxy(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis
) -> None:
    fault = proxy.arm("drop")  # armed for scripts and commits, not for BLMOVE
    src, dst = key("src"), key("dst")
    pusher = threading.Timer(0.2, direct.rpush, args=(src, b"job-1"))
    pusher.start()
    try:
        moved = connect().blmove(src, dst, timeout=5, src="LEFT", dest="RIGHT")
    finally:
        pusher.join()
    assert moved == b"job-1"
    assert direct.lrange(dst, 0, -1) == [b"job-1"]
    assert fault.fired == 0 and fault.remaining == 1


# -- drop ------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])
def test_dropped_script_reply_ran_once_and_client_gets_connection_error(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis, protocol: int
) -> None:
    counter = key()
    fault = proxy.arm("drop")
    client = connect(protocol=protocol)
    client.ping()
    with pytest.raises(redis.ConnectionError):
        client.eval(INCR, 1, counter)
    assert direct.get(counter) == b"1"  # it ran, exactly once
    assert fault.kind == "drop" and fault.fired == 1 and fault.remaining == 0
    assert fault.seen == [Command("EVAL", (INCR.encode(), b"1", counter.encode()))]
    assert proxy.fired == {"drop": 1, "delay": 0}
    assert client.eval(INCR, 1, counter) == 2  # the pool reconnects; the proxy is calm
    assert proxy.fired["drop"] == 1


def test_drop_loses_what_was_pipelined_after_it(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis
) -> None:
    counter, other = key("counter"), key("other")
    fault = proxy.arm("drop", count=2)
    pipe = connect().pipeline(transaction=False)
    pipe.eval(INCR, 1, counter).eval(INCR, 1, other).get(counter)
    with pytest.raises(redis.ConnectionError):
        pipe.execute()
    assert direct.get(counter) == b"1"
    assert direct.get(other) in (None, b"1")  # sent, so it may have run: outcome unknown
    # Only the first reply was taken; the second EVAL's take is given back, not counted.
    assert fault.fired == 1 and fault.remaining == 1
    assert proxy.fired == {"drop": 1, "delay": 0}


def test_redis_py_retry_reruns_a_script_whose_reply_was_lost(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis
) -> None:
    counter = key()
    fault = proxy.arm("drop")
    client = connect(retry=Retry(NoBackoff(), 1), retry_on_error=[redis.ConnectionError])
    assert client.eval(INCR, 1, counter) == 2  # the caller sees one call, Redis ran two
    assert direct.get(counter) == b"2"
    assert fault.fired == 1 and proxy.fired["drop"] == 1


def test_dropped_exec_reply_after_the_transaction_committed(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis
) -> None:
    counter, marker = key("counter"), key("marker")
    fault = proxy.arm("drop")  # any_write: the EVAL inside MULTI only queues; EXEC is taken
    tx = connect().pipeline(transaction=True)
    tx.eval(INCR, 1, counter).set(marker, "done")
    with pytest.raises(redis.ConnectionError):
        tx.execute()
    assert direct.get(counter) == b"1" and direct.get(marker) == b"done"
    assert fault.fired == 1
    (exec_,) = fault.seen
    assert exec_.is_commit and [c.name for c in exec_.queued] == ["EVAL", "SET"]
    assert proxy.commands["EXEC"] == 1 and proxy.fired == {"drop": 1, "delay": 0}


def test_match_by_script_sha_fires_only_for_that_script_and_count_times(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis
) -> None:
    ka, kb, kc = key("a"), key("b"), key("c")
    target = sha1(INCR)
    fault = proxy.arm("drop", lambda c: c.script_sha() == target, count=2)
    client = connect()
    assert client.eval(OTHER, 1, kb) == 10
    assert client.evalsha(sha1(OTHER), 1, kb) == 20
    assert client.set(kc, "plain")
    with pytest.raises(redis.ConnectionError):
        client.eval(INCR, 1, ka)
    with pytest.raises(redis.ConnectionError):
        client.evalsha(target, 1, ka)  # loaded by the EVAL that ran
    assert client.eval(INCR, 1, ka) == 3  # count exhausted: passes
    assert fault.fired == 2 and fault.remaining == 0
    assert [c.name for c in fault.seen] == ["EVAL", "EVALSHA"]
    assert {c.script_sha() for c in fault.seen} == {target}
    assert direct.get(ka) == b"3" and direct.get(kb) == b"20" and direct.get(kc) == b"plain"
    assert proxy.fired == {"drop": 2, "delay": 0}


# -- delay -----------------------------------------------------------------------------------


def test_delay_past_socket_timeout_times_out_after_the_write(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis
) -> None:
    counter = key()
    fault = proxy.arm("delay", delay_s=1.5)
    client = connect(socket_timeout=0.3)
    start = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        client.eval(INCR, 1, counter)
    assert time.monotonic() - start < 1.2
    assert direct.get(counter) == b"1"
    assert fault.fired == 1 and proxy.fired == {"drop": 0, "delay": 1}
    assert client.eval(INCR, 1, counter) == 2  # fresh connection, nothing held


def test_short_delay_only_slows_the_reply_and_keeps_order(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis
) -> None:
    counter, other = key("counter"), key("other")
    fault = proxy.arm("delay", delay_s=0.3)
    client = connect(socket_timeout=5)
    start = time.monotonic()
    assert client.eval(INCR, 1, counter) == 1
    assert time.monotonic() - start >= 0.3
    assert fault.fired == 1
    # A delayed reply holds everything pipelined after it, in order.
    proxy.arm("delay", delay_s=0.3)
    pipe = client.pipeline(transaction=False)
    pipe.eval(INCR, 1, counter).incr(other).get(counter).eval(INCR, 1, counter)
    start = time.monotonic()
    assert pipe.execute() == [2, 1, b"2", 3]
    assert time.monotonic() - start >= 0.3
    assert direct.get(counter) == b"3"
    assert proxy.fired == {"drop": 0, "delay": 2}


# -- pub/sub, random mode, severing, lifecycle ------------------------------------------------


def test_pubsub_connection_is_passthrough_and_never_faulted(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis
) -> None:
    channel, probe = key("channel"), key("probe")
    # Everything but redis-py's connection handshake (HELLO 3, CLIENT SETINFO) matches.
    fault = proxy.arm("drop", lambda c: c.name not in ("HELLO", "CLIENT"), count=100)
    pubsub = connect().pubsub()
    try:
        pubsub.subscribe(channel)
        first = pubsub.get_message(timeout=5)
        assert first is not None and first["type"] == "subscribe"
        for i in range(20):
            direct.publish(channel, f"m{i}")
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while len(got) < 20 and time.monotonic() < deadline:
            msg = pubsub.get_message(timeout=1)
            if msg is not None and msg["type"] == "message":
                got.append(msg["data"])
        assert got == [f"m{i}".encode() for i in range(20)]
        pubsub.ping()
        pong = pubsub.get_message(timeout=5)
        assert pong is not None and pong["type"] == "pong"
    finally:
        pubsub.close()
    assert fault.fired == 0 and proxy.fired == {"drop": 0, "delay": 0}
    assert proxy.commands["SUBSCRIBE"] == 1 and proxy.commands["PING"] >= 1
    assert fault.remaining == 100  # SUBSCRIBE and the PING after it were never candidates
    # The fault was live all along: a plain connection trips it.
    with pytest.raises(redis.ConnectionError):
        connect().set(probe, "1")
    assert fault.fired == 1 and direct.get(probe) == b"1"


def test_random_faults_every_lost_reply_reran_once_under_retries(
    proxy: FaultProxy, connect: Connect, direct: redis.Redis
) -> None:
    counter = key()
    proxy.randomize(drop_p=0.3, delay_p=0.3, delay_s=0.01, seed=20240611)
    client = connect(
        socket_timeout=5, retry=Retry(NoBackoff(), 20), retry_on_error=[redis.ConnectionError]
    )
    results = [client.eval(INCR, 1, counter) for _ in range(200)]
    executions = int(direct.get(counter) or 0)
    drops, delays = proxy.fired["drop"], proxy.fired["delay"]
    assert drops > 20 and delays > 20
    assert executions == 200 + drops  # each lost reply cost exactly one re-run
    assert results == sorted(set(results)) and results[-1] == executions
    assert proxy.commands["EVAL"] == executions
    proxy.calm()
    for _ in range(50):
        client.eval(INCR, 1, counter)
    assert proxy.fired == {"drop": drops, "delay": delays}
    assert direct.get(counter) == str(executions + 50).encode()


def test_calm_disarms_faults_already_matched_to_a_command(
    proxy: FaultProxy, direct: redis.Redis
) -> None:
    counter = key()
    fault = proxy.arm("drop")
    block = key("block")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        # BLPOP holds the connection, so the EVAL behind it is matched but not yet answered.
        sock.sendall(command("BLPOP", block, "5") + command("EVAL", INCR, "1", counter))
        wait_for(lambda: proxy.commands["EVAL"] == 1)
        assert fault.remaining == 0
        proxy.calm()
        direct.rpush(block, "go")
        assert read_until(sock, b":1\r\n").endswith(b":1\r\n")
    assert fault.fired == 0 and proxy.fired == {"drop": 0, "delay": 0}


def test_sever_all_closes_open_connections_and_new_ones_work(
    proxy: FaultProxy, connect: Connect
) -> None:
    client = connect()
    conn = client.connection_pool.get_connection()
    try:
        conn.send_command("PING")
        assert conn.read_response() in (True, b"PONG")
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as raw:
            raw.sendall(b"PING\r\n")
            assert read_until(raw, b"\r\n") == b"+PONG\r\n"
            proxy.sever_all()
            with contextlib.suppress(ConnectionResetError):  # a cut may arrive as a reset
                assert raw.recv(64) == b""
        with pytest.raises(redis.ConnectionError):
            conn.send_command("PING")
            conn.read_response()
    finally:
        client.connection_pool.release(conn)
    assert client.ping()  # the pool reconnects through the proxy
    assert proxy.fired == {"drop": 0, "delay": 0}


def test_stop_leaves_no_sockets_or_threads(redis_server: EmbeddedRedis) -> None:
    fds_before = len(os.listdir("/proc/self/fd"))
    proxy = FaultProxy(redis_server.port)
    with proxy:
        # One connection mid-delay and one idle: stop() must close both.
        held = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        idle = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        proxy.arm("delay", lambda c: c.name == "PING", delay_s=30)
        held.sendall(b"PING\r\n")
        wait_for(lambda: proxy.fired["delay"] == 1)
        port = proxy.port
    assert not [t for t in threading.enumerate() if t.name.startswith("faultproxy")]
    for sock in (held, idle):
        assert sock.recv(64) == b""
        sock.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert len(os.listdir("/proc/self/fd")) == fds_before


# -- helpers ---------------------------------------------------------------------------------


def command(*parts: str) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        raw = part.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)


def read_until(sock: socket.socket, suffix: bytes, timeout: float = 5) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while not data.endswith(suffix):
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed after {data!r}")
        data += chunk
    return data


def wait_for(check: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {check}")
        time.sleep(0.005)
