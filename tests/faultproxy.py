"""A TCP proxy in front of a real Redis that lets a command run but loses or delays its reply.

That is what a network blip or a client-side timeout does in production: the write happened,
the client does not know it. Tests put services behind the proxy, arm a fault, and check that
every write survives being retried after such an unknown outcome.

The proxy knows RESP, not docparse. Per client connection it opens one upstream connection,
forwards bytes unchanged both ways, parses the request stream into `Command`s (a FIFO per
connection) and the reply stream into complete replies; each reply answers the oldest command.
A command that an armed fault (or random mode) matches is forwarded as usual. When the first
byte of ITS reply arrives the fault is applied:

- drop: the reply is discarded and the client and upstream connections are closed, so anything
  pipelined after it is lost too. The client sees the connection close with no reply.
- delay: that reply and everything after it on the connection are held `delay_s` seconds
  (order kept), then delivered; discarded if the client closed meanwhile.

Commands queued inside MULTI are never faulted (they have not run when +QUEUED comes back);
the EXEC is, and its `Command.queued` lists the transaction's commands. A connection that
subscribes (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE), MONITORs or turns replies off becomes plain
pass-through for good: its commands are counted but never matched to replies or faulted;
`lag_passthrough(s)` holds what such connections receive (subscribe confirmations, messages)
`s` seconds, in order: a slow pub/sub link.

The asyncio loop runs in a daemon thread; `arm`, `randomize`, `calm` and the counters are safe
to use from the test thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
import random
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

__all__ = ["Command", "Fault", "FaultKind", "FaultProxy", "any_write"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

FaultKind = Literal["drop", "delay"]

_SCRIPTS = frozenset({"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"})
# After these the connection carries server pushes or unanswered commands: pass-through.
_SUBSCRIBES = frozenset({"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR", "SYNC", "PSYNC"})
# Bytes held for a delayed reply before the proxy stops reading from Redis on that connection.
_HOLD_LIMIT = 32 * 1024 * 1024


@dataclass(frozen=True)
class Command:
    """One command as the client sent it."""

    name: str  # upper case: "EVALSHA", "EXEC", "SET"
    args: tuple[bytes, ...]
    # For EXEC: the commands queued since MULTI (empty for every other command).
    queued: tuple[Command, ...] = ()

    def script_sha(self) -> str | None:
        """The SHA1 of the script this command runs (EVAL*, EVALSHA*), else None."""
        if not self.args:
            return None
        if self.name in ("EVALSHA", "EVALSHA_RO"):
            return self.args[0].decode("ascii", "replace").lower()
        if self.name in ("EVAL", "EVAL_RO"):
            return hashlib.sha1(self.args[0]).hexdigest()
        return None

    @property
    def is_script(self) -> bool:
        return self.name in _SCRIPTS

    @property
    def is_commit(self) -> bool:
        return self.name == "EXEC"


def any_write(cmd: Command) -> bool:
    """The default match: a script call or a transaction commit."""
    return cmd.is_script or cmd.is_commit


class Fault:
    """Handle for an armed fault. Counters change under the proxy's lock (in its loop thread)
    when the fault is applied to a reply; reading them from another thread is fine."""

    def __init__(
        self, kind: FaultKind, match: Callable[[Command], bool], count: int, delay_s: float
    ) -> None:
        self.kind: FaultKind = kind
        self.match = match
        self.delay_s = delay_s
        self.fired = 0  # replies lost / delayed so far
        self.remaining = count  # commands it will still take
        self.seen: list[Command] = []  # the commands it fired on
        self.active = True  # False once calm() disarmed it

    def __repr__(self) -> str:
        return (
            f"Fault({self.kind}, fired={self.fired}, remaining={self.remaining}, "
            f"active={self.active})"
        )


@dataclass
class _Random:
    drop_p: float
    delay_p: float
    delay_s: float
    match: Callable[[Command], bool]
    rng: random.Random
    active: bool = True


@dataclass
class _Pending:
    """A forwarded command waiting for its reply, with the fault (if any) that took it."""

    cmd: Command
    kind: FaultKind | None = None
    delay_s: float = 0.0
    source: Fault | _Random | None = None
    applied: bool = False


class ProtocolError(Exception):
    """The byte stream is not RESP as this parser knows it."""


class _RequestParser:
    """Incremental parser of the client's byte stream into commands (RESP arrays of bulk
    strings, or inline commands). Bulk payloads are waited for by length, never scanned."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._argc = 0  # arguments still expected for the current array
        self._args: list[bytes] = []
        self._bulk = -1  # length of the bulk string being waited for, -1 if none

    def feed(self, data: bytes) -> list[Command]:
        buf = self._buf
        buf += data
        pos = 0
        out: list[Command] = []
        try:
            while True:
                if self._bulk >= 0:
                    end = pos + self._bulk
                    if len(buf) < end + 2:
                        break
                    with memoryview(buf) as view:
                        self._args.append(view[pos:end].tobytes())
                    pos = end + 2
                    self._bulk = -1
                    self._arg_done(out)
                    continue
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    if len(buf) - pos > 1024 * 1024:
                        raise ProtocolError("request line longer than 1 MB")
                    break
                line = bytes(buf[pos:nl]).rstrip(b"\r")
                pos = nl + 1
                if self._argc > 0:
                    if line[:1] != b"$":
                        raise ProtocolError(f"expected a bulk string, got {line[:20]!r}")
                    n = int(line[1:])
                    if n < 0:
                        self._args.append(b"")
                        self._arg_done(out)
                    else:
                        self._bulk = n
                elif line[:1] == b"*":
                    n = int(line[1:])
                    if n > 0:  # "*0" and "*-1" are ignored by Redis: no reply
                        self._argc = n
                        self._args = []
                else:
                    parts = line.split()
                    if parts:  # an empty inline line gets no reply either
                        out.append(_command(parts))
        except ValueError as exc:
            raise ProtocolError(str(exc)) from exc
        finally:
            del buf[:pos]
        return out

    def _arg_done(self, out: list[Command]) -> None:
        self._argc -= 1
        if self._argc == 0:
            out.append(_command(self._args))
            self._args = []


def _command(parts: list[bytes]) -> Command:
    return Command(parts[0].decode("ascii", "replace").upper(), tuple(parts[1:]))


_START, _END = 0, 1
_LINE_TYPES = frozenset(b"+-:_,#(")
_BULK_TYPES = frozenset(b"$=!")
_ARRAY_TYPES = frozenset(b"*~>")
_MAP_TYPES = frozenset(b"%|")


class _ReplyParser:
    """Incremental parser of the server's byte stream that only finds where each top-level
    value starts and ends (RESP2 and RESP3). It keeps no payload: bulk bodies are skipped by
    length, and only a partial header line is carried between chunks."""

    def __init__(self) -> None:
        self._line = bytearray()
        self._skip = 0  # bulk payload bytes (+ CRLF) still to skip
        self._stack: list[list[int]] = []  # [elements still expected, 1 if an attribute]
        self._in_value = False
        self._push = False

    def feed(self, data: bytes) -> list[tuple[int, int, bool]]:
        """Events in `data`: (_START or _END, offset, is a server push). _START offsets are
        the first byte of a top-level value, _END offsets one past its last byte."""
        events: list[tuple[int, int, bool]] = []
        i = 0
        n = len(data)
        while i < n:
            if self._skip:
                take = min(self._skip, n - i)
                i += take
                self._skip -= take
                if not self._skip:
                    self._done(i, events)
                continue
            if not self._in_value and not self._line:
                self._in_value = True
                self._push = data[i] == 0x3E  # ">"
                events.append((_START, i, self._push))
            nl = data.find(b"\n", i)
            if nl < 0:
                self._line += data[i:]
                if len(self._line) > 64 * 1024:
                    raise ProtocolError("reply header longer than 64 kB")
                break
            if self._line:
                self._line += data[i : nl + 1]
                line = bytes(self._line)
                self._line.clear()
            else:
                line = data[i : nl + 1]
            i = nl + 1
            self._header(line, i, events)
        return events

    def _header(self, line: bytes, end: int, events: list[tuple[int, int, bool]]) -> None:
        kind = line[0]
        try:
            if kind in _LINE_TYPES:
                self._done(end, events)
            elif kind in _BULK_TYPES:
                size = int(line[1:])
                if size < 0:
                    self._done(end, events)
                else:
                    self._skip = size + 2
            elif kind in _ARRAY_TYPES or kind in _MAP_TYPES:
                size = int(line[1:])
                if kind in _MAP_TYPES:
                    size *= 2
                attribute = kind == 0x7C  # "|"
                if size > 0:
                    self._stack.append([size, int(attribute)])
                elif not attribute:
                    self._done(end, events)
            else:
                raise ProtocolError(f"unknown reply type {line[:20]!r}")
        except ValueError as exc:
            raise ProtocolError(f"bad reply header {line[:20]!r}") from exc

    def _done(self, end: int, events: list[tuple[int, int, bool]]) -> None:
        """A value ended at `end`: count it against its aggregate, or end the top level."""
        while self._stack:
            top = self._stack[-1]
            top[0] -= 1
            if top[0] > 0:
                return
            self._stack.pop()
            if top[1]:  # an attribute is not an element of its parent
                return
        self._in_value = False
        events.append((_END, end, self._push))


class _Conn(asyncio.Protocol):
    """One client connection (this protocol) and its upstream connection (`_Upstream`)."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self.loop = asyncio.get_running_loop()
        self.client: asyncio.Transport | None = None
        self.upstream: asyncio.Transport | None = None
        self.client_gone = False
        self.upstream_gone = False
        self.dropping = False
        self.requests = _RequestParser()
        self.replies = _ReplyParser()
        self.requests_broken = False
        self.fifo: collections.deque[_Pending] = collections.deque()
        self.passthrough = False
        self.multi: list[Command] | None = None  # commands queued since MULTI
        self.held: collections.deque[tuple[float, bytes | None]] = collections.deque()
        self.held_bytes = 0
        self.hold_until = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.up_pause: set[str] = {"connecting"}  # why we do not read the client
        self.down_pause: set[str] = set()  # why we do not read upstream
        self.connect_task: asyncio.Task[None] | None = None
        self.gone: asyncio.Future[None] = self.loop.create_future()  # both sockets closed

    # -- client side ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.client = cast(asyncio.Transport, transport)
        self.proxy._opened(self)
        self.client.pause_reading()
        self.connect_task = self.loop.create_task(self._connect())

    async def _connect(self) -> None:
        try:
            await self.loop.create_connection(
                lambda: _Upstream(self), self.proxy.upstream_host, self.proxy.upstream_port
            )
        except OSError as exc:
            log.warning("faultproxy: cannot reach upstream: %s", exc)
            self.upstream_gone = True
            if self.client is not None:
                self.client.abort()
            self._check_gone()
            return
        except asyncio.CancelledError:
            if self.upstream is None:
                self.upstream_gone = True
                self._check_gone()
            raise
        self._set_up_pause("connecting", False)

    def _check_gone(self) -> None:
        if self.client_gone and self.upstream_gone and not self.gone.done():
            self.gone.set_result(None)

    def data_received(self, data: bytes) -> None:
        if self.dropping or self.upstream is None or self.upstream.is_closing():
            return
        if not self.requests_broken:
            try:
                cmds = self.requests.feed(data)
            except ProtocolError as exc:
                log.warning("faultproxy: request stream not understood (%s): pass-through", exc)
                self.requests_broken = True
                self._go_passthrough()
                cmds = []
            for cmd in cmds:
                self._admit(cmd)
        self.upstream.write(data)

    def _admit(self, cmd: Command) -> None:
        name = cmd.name
        leaves = name in _SUBSCRIBES or (
            name == "CLIENT"
            and len(cmd.args) >= 2
            and cmd.args[0].upper() == b"REPLY"
            and cmd.args[1].upper() in (b"OFF", b"SKIP")
        )
        eligible = not self.passthrough and not leaves
        if self.multi is not None and name not in ("EXEC", "DISCARD", "MULTI"):
            self.multi.append(cmd)
            eligible = False  # queued, not run: +QUEUED is not its outcome
        elif name == "MULTI":
            self.multi = []
        elif name in ("EXEC", "DISCARD"):
            if name == "EXEC" and self.multi is not None:
                cmd = Command(cmd.name, cmd.args, tuple(self.multi))
            self.multi = None
        pending = self.proxy._admit(cmd, eligible)
        if self.passthrough:
            return
        if leaves:  # replies stop mapping one-to-one onto commands
            self._go_passthrough()
            return
        self.fifo.append(pending)

    def _go_passthrough(self) -> None:
        self.passthrough = True
        self._release_unapplied()

    def connection_lost(self, exc: Exception | None) -> None:
        self.client_gone = True
        self.held.clear()
        self.held_bytes = 0
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.connect_task is not None and not self.connect_task.done():
            self.connect_task.cancel()
        if self.upstream is not None:
            self.upstream.close()
        self._release_unapplied()
        self.proxy._closed(self)
        self._check_gone()

    def eof_received(self) -> bool | None:
        return None  # the client half-closed: close both ways

    def pause_writing(self) -> None:
        self._set_down_pause("client-buffer", True)

    def resume_writing(self) -> None:
        self._set_down_pause("client-buffer", False)

    # -- upstream side ----------------------------------------------------------------------

    def upstream_made(self, transport: asyncio.Transport) -> None:
        if self.client_gone:
            transport.close()
            return
        self.upstream = transport
        if self.down_pause:
            transport.pause_reading()

    def upstream_data(self, data: bytes) -> None:
        if self.dropping or self.client_gone:
            return
        if self.passthrough:
            lag = self.proxy.passthrough_lag_s
            if lag:
                self.hold_until = max(self.hold_until, self.loop.time() + lag)
            self._emit(data)
            return
        try:
            events = self.replies.feed(data)
        except ProtocolError as exc:
            log.warning("faultproxy: reply stream not understood (%s): pass-through", exc)
            self._go_passthrough()
            self._emit(data)
            return
        pos = 0
        for kind, offset, push in events:
            if push:
                continue
            if kind == _END:
                if self.fifo:
                    self.fifo.popleft()
                continue
            if not self.fifo:
                continue  # a reply nobody asked for (e.g. an error before closing)
            head = self.fifo[0]
            action = self.proxy._claim(head)
            if action is None:
                continue
            fault, delay_s = action
            if offset > pos:
                self._emit(data[pos:offset])
            pos = offset
            if fault == "drop":
                self._drop()
                return
            self.hold_until = max(self.hold_until, self.loop.time() + delay_s)
        if pos < len(data):
            self._emit(data[pos:] if pos else data)

    def upstream_lost(self) -> None:
        self.upstream_gone = True
        self.proxy._closed_upstream()
        self._check_gone()
        if not self.client_gone and not self.dropping:
            self._emit(None)  # close the client once what is held is delivered

    def _drop(self) -> None:
        self.dropping = True
        if self.upstream is not None:
            self.upstream.abort()
        self._emit(None)

    # -- delivery to the client -------------------------------------------------------------

    def _emit(self, data: bytes | None) -> None:
        """Send to the client now, or after what is held; None closes the client."""
        if self.client_gone or self.client is None:
            return
        if not self.held and self.loop.time() >= self.hold_until:
            if data is None:
                self.client.close()
            else:
                self.client.write(data)
            return
        self.held.append((self.hold_until, data))
        if data is not None:
            self.held_bytes += len(data)
            if self.held_bytes > _HOLD_LIMIT:
                self._set_down_pause("held", True)
        if self.timer is None:
            self.timer = self.loop.call_at(self.held[0][0], self._release)

    def _release(self) -> None:
        self.timer = None
        now = self.loop.time()
        while self.held and self.held[0][0] <= now and not self.client_gone:
            _, data = self.held.popleft()
            assert self.client is not None
            if data is None:
                self.client.close()
                self.held.clear()
                break
            self.held_bytes -= len(data)
            self.client.write(data)
        if self.held and not self.client_gone:
            self.timer = self.loop.call_at(self.held[0][0], self._release)
        if self.held_bytes <= _HOLD_LIMIT // 2:
            self._set_down_pause("held", False)

    # -- flow control -----------------------------------------------------------------------

    def _set_up_pause(self, reason: str, on: bool) -> None:
        before = bool(self.up_pause)
        if on:
            self.up_pause.add(reason)
        else:
            self.up_pause.discard(reason)
        if self.client is not None and not self.client_gone and before != bool(self.up_pause):
            if self.up_pause:
                self.client.pause_reading()
            else:
                self.client.resume_reading()

    def _set_down_pause(self, reason: str, on: bool) -> None:
        before = bool(self.down_pause)
        if on:
            self.down_pause.add(reason)
        else:
            self.down_pause.discard(reason)
        up = self.upstream
        if up is not None and not up.is_closing() and before != bool(self.down_pause):
            if self.down_pause:
                up.pause_reading()
            else:
                up.resume_reading()

    def _release_unapplied(self) -> None:
        """Commands taken by a fault whose reply will never be seen: give them back."""
        while self.fifo:
            self.proxy._refund(self.fifo.popleft())

    def abort(self) -> None:
        if self.client is not None and not self.client_gone:
            self.client.abort()
        if self.upstream is not None:
            self.upstream.abort()


class _Upstream(asyncio.Protocol):
    def __init__(self, conn: _Conn) -> None:
        self.conn = conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.conn.proxy._opened_upstream()
        self.conn.upstream_made(cast(asyncio.Transport, transport))

    def data_received(self, data: bytes) -> None:
        self.conn.upstream_data(data)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.upstream_lost()

    def pause_writing(self) -> None:
        self.conn._set_up_pause("upstream-buffer", True)

    def resume_writing(self) -> None:
        self.conn._set_up_pause("upstream-buffer", False)


class FaultProxy:
    """Listens on 127.0.0.1:<free port> and forwards to upstream_host:upstream_port.

    Use as a context manager, or start() / stop(). `arm` a fault or `randomize`, point a
    client at `url`, and read `fired` / `Fault.fired` / `commands` to prove what happened.
    """

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream_port = upstream_port
        self.upstream_host = upstream_host
        self._lock = threading.RLock()
        self._armed: list[Fault] = []
        self._random: _Random | None = None
        self.fired: dict[str, int] = {"drop": 0, "delay": 0}
        self._commands: collections.Counter[str] = collections.Counter()
        self._port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()
        self._open_transports = 0  # touched only in the loop thread
        self._idle: asyncio.Event | None = None  # set while no transport is open
        self.passthrough_lag_s = 0.0  # read in the loop thread; a float store is atomic

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("FaultProxy is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def commands(self) -> collections.Counter[str]:
        """Commands forwarded so far, by name (a snapshot: the loop thread keeps counting)."""
        with self._lock:
            return collections.Counter(self._commands)

    def start(self) -> None:
        if self._loop is not None:
            raise RuntimeError("FaultProxy already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=self._run, args=(loop,), name=f"faultproxy->{self.upstream_port}", daemon=True
        )
        self._thread.start()
        try:
            self._port = self._call(self._listen())
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _listen(self) -> int:
        loop = asyncio.get_running_loop()
        self._idle = asyncio.Event()
        self._idle.set()
        self._server = await loop.create_server(lambda: _Conn(self), "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            if thread.is_alive():
                self._call(self._shutdown())
        finally:
            with contextlib.suppress(RuntimeError):  # the loop may have closed already
                loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            self._loop = self._thread = None
            self._port = 0

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._sever()
        if self._idle is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), 5.0)
        for _ in range(3):  # callbacks scheduled by the last closes
            await asyncio.sleep(0)
        if self._open_transports:
            log.warning("faultproxy: %d transports still open at stop", self._open_transports)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def sever_all(self) -> None:
        """Close every client connection (and its upstream) now, as a network cut would."""
        self._call(self._sever())

    async def _sever(self) -> None:
        conns = list(self._conns)
        for conn in conns:
            conn.abort()
        tasks = [c.connect_task for c in conns if c.connect_task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # connection_lost callbacks (which close the sockets) run on later loop iterations.
        if conns:
            await asyncio.wait([c.gone for c in conns], timeout=5.0)

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeError("FaultProxy is not started")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=30)

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults -----------------------------------------------------------------------------

    def arm(
        self,
        kind: FaultKind,
        match: Callable[[Command], bool] = any_write,
        *,
        count: int = 1,
        delay_s: float = 0.0,
    ) -> Fault:
        """Take the next `count` commands that `match` (checked in arming order, before random
        mode) and drop or delay their replies. Returns the handle whose counters prove it."""
        if kind not in ("drop", "delay"):
            raise ValueError(f"unknown fault kind {kind!r}")
        if count < 1:
            raise ValueError("count must be >= 1")
        if delay_s < 0:
            raise ValueError("delay_s must be >= 0")
        fault = Fault(kind, match, count, delay_s)
        with self._lock:
            self._armed.append(fault)
        return fault

    def randomize(
        self,
        *,
        drop_p: float,
        delay_p: float,
        delay_s: float,
        match: Callable[[Command], bool] = any_write,
        seed: int | None = None,
    ) -> None:
        """Fault each matching command (no armed fault took) with these probabilities."""
        if drop_p < 0 or delay_p < 0 or drop_p + delay_p > 1:
            raise ValueError("need 0 <= drop_p, delay_p and drop_p + delay_p <= 1")
        if delay_s < 0:
            raise ValueError("delay_s must be >= 0")
        with self._lock:
            if self._random is not None:
                self._random.active = False
            self._random = _Random(drop_p, delay_p, delay_s, match, random.Random(seed))

    def lag_passthrough(self, delay_s: float) -> None:
        """From now on, hold every byte a pass-through (pub/sub) connection receives `delay_s`
        seconds after it arrives, order kept (0: deliver at once again)."""
        if delay_s < 0:
            raise ValueError("delay_s must be >= 0")
        self.passthrough_lag_s = delay_s

    def calm(self) -> None:
        """Disarm every armed fault and random mode, including ones already matched to a
        command whose reply has not come back yet."""
        with self._lock:
            for fault in self._armed:
                fault.active = False
                fault.remaining = 0
            self._armed.clear()
            if self._random is not None:
                self._random.active = False
                self._random = None

    # -- called from the loop thread --------------------------------------------------------

    def _admit(self, cmd: Command, eligible: bool) -> _Pending:
        with self._lock:
            self._commands[cmd.name] += 1
            if not eligible:
                return _Pending(cmd)
            for fault in self._armed:
                if fault.remaining > 0 and _matches(fault.match, cmd):
                    fault.remaining -= 1
                    return _Pending(cmd, fault.kind, fault.delay_s, fault)
            rand = self._random
            if rand is not None and _matches(rand.match, cmd):
                x = rand.rng.random()
                if x < rand.drop_p:
                    return _Pending(cmd, "drop", 0.0, rand)
                if x < rand.drop_p + rand.delay_p:
                    return _Pending(cmd, "delay", rand.delay_s, rand)
            return _Pending(cmd)

    def _claim(self, pending: _Pending) -> tuple[FaultKind, float] | None:
        """The reply to `pending` starts: apply its fault if it is still armed."""
        if pending.kind is None or pending.applied:
            return None
        with self._lock:
            source = pending.source
            if source is None or not source.active:
                return None
            pending.applied = True
            if isinstance(source, Fault):
                source.fired += 1
                source.seen.append(pending.cmd)
            self.fired[pending.kind] += 1
            return pending.kind, pending.delay_s

    def _refund(self, pending: _Pending) -> None:
        if pending.applied or not isinstance(pending.source, Fault):
            return
        with self._lock:
            if pending.source.active:
                pending.source.remaining += 1

    def _opened(self, conn: _Conn) -> None:
        self._conns.add(conn)
        self._count_transport(+1)

    def _closed(self, conn: _Conn) -> None:
        self._conns.discard(conn)
        self._count_transport(-1)

    def _opened_upstream(self) -> None:
        self._count_transport(+1)

    def _closed_upstream(self) -> None:
        self._count_transport(-1)

    def _count_transport(self, delta: int) -> None:
        self._open_transports += delta
        if self._idle is not None:
            if self._open_transports:
                self._idle.clear()
            else:
                self._idle.set()


def _matches(match: Callable[[Command], bool], cmd: Command) -> bool:
    try:
        return bool(match(cmd))
    except Exception:
        log.exception("faultproxy: match predicate failed on %s", cmd.name)
        return False
