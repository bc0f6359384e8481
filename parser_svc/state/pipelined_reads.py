"""Pipelined reads: the state store's hot read, a job's record (HGETALL), on a few connections
of its own, each carrying any number of reads at once.

Why: through redis-py's asyncio client a command costs about 100 µs of CPU more under load
(a pool checkout with its lock and condition, its own bookkeeping per command): a third of
parser_svc's GetStatus. Here a read is one write of its encoded command and a future that the
connection's reader resolves, in order (Redis answers a connection's commands in order);
hiredis parses the replies, as it does under redis-py. bench/README.md, GetStatus pass 5.

Where: one Redis (redis://, rediss://, unix://); Sentinel and Cluster URLs read through
redis-py, whose clients follow failovers and slots (`PipelinedReader.of` gives None then).
`DOCPARSE_REDIS_PIPELINED_READS=false` reads through the pool everywhere.

Failures, which JobStore.call maps as it maps redis-py's (parser_svc/state/store_errors.py):
- a connection that breaks fails every read waiting on it with ConnectionError; a read is
  harmless to repeat, so one sent on a connection that turns out broken (Redis restarted
  since) is sent once more on a new one, as the pool's retry does; a new one that fails too
  is the answer (STATE_STORE_UNAVAILABLE);
- a read whose caller gave up (its deadline) keeps its place in the line, so the replies after
  it still reach their own readers;
- the deadline is kept by one timer per connection, not one per read (a timer armed and
  cancelled per read was about 25 µs of a replica's CPU per GetStatus under load: bench/README.md,
  GetStatus pass 8): at the oldest waiting read's deadline, the reads sent that long ago fail
  with redis-py's TimeoutError (STATE_STORE_UNAVAILABLE, "timed out"), the connection is
  dropped, and the reads behind them are sent once more on a new one (so a read behind a
  stuck one waits less than twice the deadline in all);
- error replies raise what redis-py raises for them (LOADING: BusyLoadingError, NOPERM, ...).
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Sequence
from typing import Any, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from parser_svc.settings import Settings
from parser_svc.state.redis_conn import CLUSTER_SCHEMES, SENTINEL_SCHEMES, RedisTarget


def _pack(command: tuple[bytes, ...]) -> bytes:
    """A command in RESP (hiredis's encoder; its type stub says a tuple of one)."""
    packed: bytes = hiredis.pack_command(command)  # type: ignore[arg-type]
    return packed


# A timer may fire up to the loop's clock resolution early: a read that close to its deadline
# is due.
_TIMER_SLACK_S = 0.001


class _Connection(asyncio.Protocol):
    """One connection: commands written as they come, replies matched to them in order."""

    def __init__(self, deadline_s: float) -> None:
        self._parser = hiredis.Reader()
        # The futures of the commands sent and not answered yet, with when each was sent.
        self._waiting: deque[tuple[asyncio.Future[Any], float]] = deque()
        self._transport: asyncio.Transport | None = None
        self._broken: RedisConnectionError | None = None
        # Its loop, asked for once: on Python 3.11 asyncio.get_running_loop() is a getpid()
        # system call each time.
        self.loop = asyncio.get_running_loop()
        self._deadline_s = deadline_s
        self._timer: asyncio.TimerHandle | None = None  # armed while reads wait

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._parser.feed(data)
        while True:
            try:
                reply = self._parser.gets()
            except hiredis.ProtocolError as err:
                self.abort(RedisConnectionError(f"unreadable reply from Redis: {err}"))
                return
            if reply is False:
                return
            if not self._waiting:
                self.abort(RedisConnectionError("a reply from Redis nobody asked for"))
                return
            future, _ = self._waiting.popleft()
            if future.done():  # its caller gave up; the reply was still its own
                continue
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(BaseParser.parse_error(str(reply)))  # type: ignore[no-untyped-call]
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        detail = f": {exc}" if exc else ""
        self._fail(RedisConnectionError(f"the connection to Redis was lost{detail}"))

    def send(self, command: bytes) -> asyncio.Future[Any]:
        """The reply's future; resolved by the reader, failed when the connection breaks or
        when the read has waited the deadline."""
        return self.send_many((command,))[0]

    def send_many(self, commands: Sequence[bytes]) -> list[asyncio.Future[Any]]:
        """`send` for each of `commands`, written to the socket at once."""
        loop = self.loop
        futures: list[asyncio.Future[Any]] = [loop.create_future() for _ in commands]
        if self._broken is not None or self._transport is None:
            for future in futures:
                future.set_exception(RedisConnectionError(str(self._broken or "not connected")))
            return futures
        sent = loop.time()  # nondecreasing along the line: its head is the oldest read
        self._waiting.extend((future, sent) for future in futures)
        self._transport.write(b"".join(commands))
        if self._timer is None:
            self._timer = loop.call_at(sent + self._deadline_s, self._at_deadline)
        return futures

    def _at_deadline(self) -> None:
        """The timer: fails the reads that waited the whole deadline and drops the connection
        (the reads behind them are sent again elsewhere), or waits for the oldest read's."""
        self._timer = None
        if not self._waiting:
            return
        loop = self.loop
        due = loop.time() + _TIMER_SLACK_S - self._deadline_s
        if self._waiting[0][1] > due:
            self._timer = loop.call_at(self._waiting[0][1] + self._deadline_s, self._at_deadline)
            return
        message = f"Redis did not answer within {self._deadline_s:g} s"
        while self._waiting and self._waiting[0][1] <= due:
            future, _ = self._waiting.popleft()
            if not future.done():
                future.set_exception(RedisTimeoutError(message))
        self.abort(RedisConnectionError(f"{message} on this connection"))

    def usable(self) -> bool:
        """Open, and its oldest read not waiting past the deadline (the moment between the
        deadline and its timer's turn on the loop)."""
        if self._broken is not None or self._transport is None or self._transport.is_closing():
            return False
        return not self._waiting or self.loop.time() - self._waiting[0][1] <= self._deadline_s

    def abort(self, err: RedisConnectionError) -> None:
        self._fail(err)
        if self._transport is not None:
            self._transport.abort()

    def _fail(self, err: RedisConnectionError) -> None:
        """Fails every read waiting, each with an error of its own (one instance raised in
        many calls would collect all their tracebacks)."""
        self._broken = self._broken or err
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiting:
            future, _ = self._waiting.popleft()
            if not future.done():
                future.set_exception(RedisConnectionError(str(self._broken)))


class PipelinedReader:
    def __init__(self, target: RedisTarget, *, connections: int, timeout_s: float) -> None:
        options = parse_url(target.url)
        self._path: str | None = options.get("path")
        self._host: str = options.get("host", "localhost")
        self._port: int = int(options.get("port", 6379))
        self._ssl = target.ssl_context() if target.tls else None
        handshake = []
        if options.get("password"):
            user = [options["username"].encode()] if options.get("username") else []
            handshake.append((b"AUTH", *user, options["password"].encode()))
        if int(options.get("db") or 0):
            handshake.append((b"SELECT", str(int(options["db"])).encode()))
        self._handshake = [_pack(command) for command in handshake]
        # So that CLIENT LIST tells these connections from the pool's; a user whose ACL does
        # not grant it reads all the same (as redis-py's CLIENT SETINFO on connect).
        self._naming = _pack((b"CLIENT", b"SETNAME", b"docparse-reads"))
        self._timeout_s = timeout_s
        self._slots: list[_Connection | None] = [None] * connections
        self._opening = [asyncio.Lock() for _ in range(connections)]
        self._turn = 0

    @classmethod
    def of(cls, settings: Settings) -> PipelinedReader | None:
        """The reader for this deployment's Redis; None where reads go through redis-py."""
        target = RedisTarget.of(settings)
        if not settings.redis_pipelined_reads or target.scheme in (
            *SENTINEL_SCHEMES,
            *CLUSTER_SCHEMES,
        ):
            return None
        return cls(
            target, connections=settings.redis_read_connections, timeout_s=settings.redis_timeout_s
        )

    async def hgetall(self, key: str) -> dict[bytes, bytes]:
        reply = await self._read(_pack((b"HGETALL", key.encode())))
        return dict(zip(reply[::2], reply[1::2], strict=True))

    async def hgetall_many(self, keys: Sequence[str]) -> list[dict[bytes, bytes]]:
        """The hashes at `keys` ({} where none), in order: the commands written at once on one
        connection (ListJobs' records), so one read costs a few microseconds, not a pool
        checkout and redis-py's pipeline bookkeeping."""
        commands = [_pack((b"HGETALL", key.encode())) for key in keys]
        try:
            replies = await _replies((await self._connection()).send_many(commands))
        except RedisConnectionError:  # as _read: once more on a new connection
            replies = await _replies((await self._connection()).send_many(commands))
        return [dict(zip(reply[::2], reply[1::2], strict=True)) for reply in replies]

    async def aclose(self) -> None:
        slots, self._slots = self._slots, [None] * len(self._slots)
        for connection in slots:
            if connection is not None:
                connection.abort(RedisConnectionError("the reader was closed"))

    async def _read(self, command: bytes) -> Any:
        connection = await self._connection()
        try:
            return await connection.send(command)
        except RedisConnectionError:
            # A connection that broke since it was opened (a Redis restart), or was dropped at
            # an older read's deadline: once more on a new one; a read is harmless to repeat.
            return await (await self._connection()).send(command)

    async def _connection(self) -> _Connection:
        """The next connection in turn, opened (again) when it is closed, broken or stuck."""
        slot = self._turn = (self._turn + 1) % len(self._slots)
        connection = self._slots[slot]
        if connection is not None and connection.usable():
            return connection
        async with self._opening[slot]:  # one opening per slot, however many reads wait
            connection = self._slots[slot]
            if connection is not None and connection.usable():
                return connection
            if connection is not None:
                connection.abort(RedisConnectionError("Redis stopped answering on it"))
            self._slots[slot] = None
            self._slots[slot] = connection = await self._open()
            return connection

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        protocol = functools.partial(_Connection, self._timeout_s)
        async with asyncio.timeout(self._timeout_s):
            if self._path is not None:
                _, connection = await loop.create_unix_connection(protocol, self._path)
            else:
                _, connection = await loop.create_connection(
                    protocol,
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl is not None else None,
                )
            replies = [connection.send(command) for command in self._handshake]
            naming = connection.send(self._naming)
            try:
                await asyncio.gather(*replies)
            except BaseException:
                connection.abort(RedisConnectionError("the connection's handshake failed"))
                for reply in replies:
                    if reply.done() and not reply.cancelled():
                        reply.exception()  # retrieved: the first one is raised
                raise
            finally:
                naming.add_done_callback(_ignore_outcome)
        return connection


async def _replies(futures: list[asyncio.Future[Any]]) -> list[Any]:
    """The futures' results in order; when one fails (or the caller gives up), the others are
    let go: their replies still keep their places in the line."""
    try:
        return [await future for future in futures]
    except BaseException:
        for future in futures:
            future.add_done_callback(_ignore_outcome)
        raise


def _ignore_outcome(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved, so an error reply is not logged as unhandled


__all__ = ["PipelinedReader"]
