"""EventHub: one Redis pub/sub connection per process, shared by every watch stream.

Subscriptions are ref-counted per channel. `subscribe()` returns once Redis has confirmed
the subscription, so a snapshot read after it cannot miss an event published in between. When
the connection breaks, the hub reconnects, resubscribes every channel and puts a RESYNC marker
on every subscriber's queue: pub/sub is at-most-once, so watchers re-read their snapshot.

A confirmation that is late (a loaded Redis or pub/sub link; a reconnect in progress) does not
fail the watch: after `timeout_s` the subscriber gets its queue anyway, with a RESYNC every
`poll_s` until the confirmation comes and one right after it (the watcher polls the record
meanwhile, so it is never worse than polling), and an UNCONFIRMED marker (the watch ends with
UNAVAILABLE) if none came within `patience_s`. A watch that ended because pub/sub was slow made
every client resume at once, on a store that was already slow.

A channel whose last subscriber left stays subscribed for up to `linger_s`: the channels left
meanwhile are unsubscribed together, in one command (one per job was a third of a short job's
pub/sub commands), and a watcher that comes back within the linger (a resumed stream, a
SubmitJob's wait followed by a WatchJob) needs no new SUBSCRIBE.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse_server import errors
from parser_svc import observability
from parser_svc.state.redis_cluster import event_pubsub
from parser_svc.state.redis_conn import RedisTarget

log = logging.getLogger(__name__)


def shutting_down() -> DocparseError:
    return errors.error(
        ErrorReason.SERVER_SHUTTING_DOWN,
        "this replica is shutting down; resume the watch with after_version on another",
    )


class Resync:
    """Queued when events may have been lost; the watcher must re-read the snapshot."""


RESYNC = Resync()


class Ending:
    """Queued when the watcher must end its stream with `error()`, a retryable status: the
    process shuts down (the client resumes on another replica) or Redis never confirmed the
    subscription."""

    def __init__(self, error: Callable[[], DocparseError]) -> None:
        self.error = error


def _unconfirmed() -> DocparseError:
    return errors.store_unavailable("pub/sub subscribe not confirmed")


CLOSING = Ending(shutting_down)
UNCONFIRMED = Ending(_unconfirmed)
Event = dict[str, str] | Resync | Ending


@dataclass
class _Channel:
    queues: set[asyncio.Queue[Event]] = field(default_factory=set)
    confirmed: asyncio.Event = field(default_factory=asyncio.Event)
    # Set after the first confirmation: later ones follow a reconnect, when events were lost.
    was_confirmed: bool = False
    # No subscriber left: unsubscribed at the next flush unless one comes back first.
    idle: bool = False


class EventHub:
    def __init__(
        self,
        url: str | RedisTarget,
        *,
        timeout_s: float = 2.0,
        patience_s: float = 10.0,
        poll_s: float = 0.5,
        queue_size: int = 64,
        linger_s: float = 1.0,
        max_idle: int = 1000,
    ) -> None:
        self._target = url if isinstance(url, RedisTarget) else RedisTarget(url)
        self._timeout_s = timeout_s
        self._patience_s = patience_s
        self._poll_s = poll_s
        self._queue_size = queue_size
        self._linger_s = linger_s
        self._max_idle = max_idle
        self._channels: dict[str, _Channel] = {}
        self._idle: set[str] = set()
        self._flusher: asyncio.Task[None] | None = None
        self._pending_sends: set[asyncio.Task[None]] = set()
        # Channels whose UNSUBSCRIBE is on its way: a new SUBSCRIBE of one waits for it, or
        # it could reach the server first and be undone by it.
        self._leaving: dict[str, asyncio.Task[None]] = {}
        self._client: aioredis.Redis | None = None
        self._pubsub: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._wake = asyncio.Event()
        self._closed = False
        self._draining = False
        self.reconnects = 0
        self.late_subscribes = 0

    @property
    def channel_count(self) -> int:
        """Channels with at least one subscriber."""
        return len(self._channels) - len(self._idle)

    async def start(self) -> None:
        self._reader = asyncio.create_task(self._run(), name="event-hub")

    async def close(self) -> None:
        self._closed = True
        if self._flusher:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        if self._reader:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._disconnect()

    def close_streams(self) -> None:
        """Shutdown: every current subscriber gets CLOSING; new subscriptions are refused."""
        self._draining = True
        for entry in self._channels.values():
            for queue in entry.queues:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(CLOSING)

    @contextlib.asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[asyncio.Queue[Event]]:
        """A queue of this channel's events, live once the block is entered."""
        if self._draining:
            raise shutting_down()
        queue: asyncio.Queue[Event] = asyncio.Queue(self._queue_size)
        entry = self._channels.get(channel)
        first = entry is None
        if entry is None:
            entry = self._channels[channel] = _Channel()
        elif entry.idle:  # still subscribed (lingering): taken back as it is
            entry.idle = False
            self._idle.discard(channel)
        entry.queues.add(queue)
        observability.WATCH_STREAMS.inc()
        nudger: asyncio.Task[None] | None = None
        try:
            try:
                async with asyncio.timeout(self._timeout_s):
                    if first:
                        # Not cancelled by the timeout: a SUBSCRIBE cut off before or during
                        # its send would leave the channel unsubscribed with no reconnect to
                        # repair it, and its late subscriber polling in vain.
                        join = self._join(channel, self._leaving.get(channel))
                        await asyncio.shield(self._track(join))
                    await entry.confirmed.wait()
            except TimeoutError:
                # Late, not failed: the subscriber polls until the confirmation comes.
                observability.PUBSUB_LATE_SUBSCRIBES.inc()
                self.late_subscribes += 1
                nudger = asyncio.create_task(self._nudge(entry, queue))
            yield queue
        finally:
            if nudger is not None:
                nudger.cancel()
            entry.queues.discard(queue)
            observability.WATCH_STREAMS.dec()
            if not entry.queues and self._channels.get(channel) is entry:
                if entry.confirmed.is_set() and not self._closed:
                    entry.idle = True
                    self._idle.add(channel)
                    self._schedule_flush()
                else:  # never confirmed (a timeout, a reconnect): nothing to linger on
                    del self._channels[channel]
                    await self._send_unsubscribe(channel)

    async def _nudge(self, entry: _Channel, queue: asyncio.Queue[Event]) -> None:
        """A subscriber let in before its channel's confirmation: RESYNC every `poll_s` (it
        may miss events meanwhile) and once the confirmation came; UNCONFIRMED (and nothing
        more) if it did not come within `patience_s` of the subscribe."""
        deadline = asyncio.get_running_loop().time() + self._patience_s - self._timeout_s
        while not entry.confirmed.is_set():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                _put_over(queue, UNCONFIRMED)
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(self._poll_s, left)):
                    await entry.confirmed.wait()
            if not queue.full():  # a full queue is read soon anyway
                queue.put_nowait(RESYNC)

    async def _join(self, channel: str, leaving: asyncio.Task[None] | None) -> None:
        """SUBSCRIBE `channel`, after the UNSUBSCRIBE of it still on its way (if any): sent
        first, that one would undo it."""
        if leaving is not None:
            await asyncio.wait([leaving])
        await self._send_subscribe(channel)

    def _track(self, send: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """`send` as a task the hub holds until it is done (its error, if nobody waits for it
        any more, is only logged: a subscriber that stopped waiting polls or has left)."""
        task = asyncio.get_running_loop().create_task(send)
        self._pending_sends.add(task)

        def done(task: asyncio.Task[None]) -> None:
            self._pending_sends.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log.info("pub/sub command failed: %r", task.exception())

        task.add_done_callback(done)
        return task

    def _schedule_flush(self) -> None:
        if len(self._idle) >= self._max_idle:
            self._flush_idle()
        elif self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._linger_s)
        self._flush_idle()

    def _flush_idle(self) -> None:
        """Unsubscribes every channel still without a subscriber, in one command (sent
        without waiting for its reply, as every unsubscribe is)."""
        channels = [c for c in self._idle if self._channels[c].idle]
        self._idle.clear()
        for channel in channels:
            del self._channels[channel]
        if channels:
            task = self._track(self._send_unsubscribe(*channels))
            self._leaving.update(dict.fromkeys(channels, task))

            def sent(done: asyncio.Task[None]) -> None:
                for channel in channels:
                    if self._leaving.get(channel) is done:
                        del self._leaving[channel]

            task.add_done_callback(sent)

    async def _send_subscribe(self, channel: str) -> None:
        """Sends SUBSCRIBE once the hub is connected. Not connected within `timeout_s`: not
        sent; the (re)connect subscribes every channel the hub holds, this one included."""
        if not self._connected.is_set():
            self._wake.set()  # skip the reconnect backoff: someone is waiting
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._timeout_s):
                    await self._connected.wait()
        if not self._connected.is_set() or channel not in self._channels:
            return  # not connected yet, or its watchers left while this waited
        try:
            await self._pubsub.subscribe(channel)
        except Exception as err:
            # The connection broke under the command (a Redis Cluster node gone; redis-py
            # may then raise AttributeError from its half-closed connection). The reader
            # reconnects and subscribes every channel again, this one included; the
            # caller waits for that confirmation as for any.
            log.info(
                "pub/sub subscribe of %s failed (%r); waiting for the resubscribe", channel, err
            )

    async def _send_unsubscribe(self, *channels: str) -> None:
        if self._pubsub is None or not self._connected.is_set():
            return
        with contextlib.suppress(Exception):
            await self._pubsub.unsubscribe(*channels)

    async def _connect(self) -> None:
        self._client = self._target.client(socket_connect_timeout=self._timeout_s, retry=None)
        self._pubsub = await event_pubsub(self._client)
        # A placeholder subscription gives the connection something to listen on at once.
        await self._pubsub.subscribe("docparse:hub:alive")
        if self._channels:
            await self._pubsub.subscribe(*self._channels)
        self._connected.set()

    async def _disconnect(self) -> None:
        self._connected.clear()
        for channel in self._idle:  # nobody listens: not worth resubscribing
            del self._channels[channel]
        self._idle.clear()
        for entry in self._channels.values():
            entry.confirmed.clear()
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await self._pubsub.aclose()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
        self._pubsub = self._client = None

    async def _run(self) -> None:
        backoff = 0.05
        while not self._closed:
            try:
                await self._connect()
                backoff = 0.05
                while True:
                    message = await self._pubsub.get_message(timeout=None)
                    if message is not None:
                        self._dispatch(message)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.warning("event hub connection lost: %r", err)
                await self._disconnect()
                self.reconnects += 1
                observability.PUBSUB_RECONNECTS.inc()
                # Back off, but reconnect at once when a watcher is waiting to subscribe.
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), backoff)
                backoff = min(backoff * 2, 1.0)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        channel = message["channel"].decode()
        entry = self._channels.get(channel)
        if entry is None:
            return
        if kind == "subscribe":
            if not entry.confirmed.is_set():
                entry.confirmed.set()
                if entry.was_confirmed:
                    # Resubscribed after a reconnect: what was published meanwhile is lost.
                    self._put_all(entry, RESYNC)
                entry.was_confirmed = True
            return
        if kind != "message":
            return
        try:
            record = json.loads(message["data"])
        except ValueError:
            return
        self._put_all(entry, record)

    def _put_all(self, entry: _Channel, event: Event) -> None:
        for queue in entry.queues:
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                # A slow consumer only needs the latest state: drop its backlog, ask for resync.
                _put_over(queue, CLOSING if self._draining else RESYNC)


def _put_over(queue: asyncio.Queue[Event], marker: Resync | Ending) -> None:
    """Queues `marker`; a full queue's backlog is dropped for it (a re-read covers it)."""
    if queue.full():
        while not queue.empty():
            queue.get_nowait()
    queue.put_nowait(marker)


async def first_of(
    a: asyncio.Queue[Event], b: asyncio.Queue[Event], within_s: float
) -> tuple[Event | None, Event | None]:
    """The next event of either queue, at most `within_s` from now: (a's, b's), None for a
    queue that had none (its event, if any, stays queued)."""
    waits = [asyncio.ensure_future(a.get()), asyncio.ensure_future(b.get())]
    try:
        await asyncio.wait(waits, timeout=within_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()  # a get that was not done leaves its item in the queue
    first, second = (w.result() if w.done() and not w.cancelled() else None for w in waits)
    return first, second
