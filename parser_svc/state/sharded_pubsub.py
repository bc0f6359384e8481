"""The event hub's pub/sub on Redis Cluster: sharded channels (Redis 7).

On a cluster the scripts publish a job's records with SPUBLISH (lua_scripts.py): a record
goes to the shard that owns the job's slot only, not over the cluster bus to every node, as
a plain PUBLISH would. A watcher's replica must then SSUBSCRIBE on that shard's primary.
ShardedPubSub does that for the event hub (events.py) with the few calls it makes of a
redis-py PubSub: one plain pub/sub connection per primary, opened when a channel of its slots
is first subscribed, and every connection's messages in one stream (sharded message types
read as the plain ones).

What it does not try: to follow the cluster by itself. A connection that fails (its node
died) or a subscription the server drops (its slot moved to another shard: an `sunsubscribe`
we did not ask for) is raised by `get_message`, and the hub does what it does for any lost
connection: a new client (a fresh slot map), every channel subscribed again, and a RESYNC to
every watcher (events published meanwhile may be lost). The connections never retry on their
own: a silent reconnect would resubscribe without the hub knowing that events were missed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

_KIND = {"ssubscribe": "subscribe", "smessage": "message", "sunsubscribe": "unsubscribe"}


@dataclass
class _Node:
    """One primary's pub/sub connection and the task reading it (once it has a channel)."""

    client: aioredis.Redis
    pubsub: Any
    reader: asyncio.Task[None] | None = None


class ShardedPubSub:
    def __init__(self, cluster: RedisCluster) -> None:
        self._cluster = cluster
        self._nodes: dict[str, _Node] = {}
        self._messages: asyncio.Queue[dict[str, Any] | BaseException] = asyncio.Queue()
        # SUNSUBSCRIBEs we sent and whose confirmation has not come yet, per channel: those
        # confirmations are ours, also when the channel was subscribed again meanwhile.
        self._leaving: Counter[bytes] = Counter()

    def _by_slot(self, channels: tuple[str, ...]) -> dict[tuple[ClusterNode, int], list[str]]:
        """The channels by their slot and its primary: one SSUBSCRIBE or SUNSUBSCRIBE names
        channels of one slot only (the server refuses others: CROSSSLOT)."""
        grouped: dict[tuple[ClusterNode, int], list[str]] = defaultdict(list)
        for channel in channels:
            node = self._cluster.get_node_from_key(channel)
            if node is None:
                raise RedisConnectionError(f"no primary owns the slot of {channel!r} now")
            grouped[(node, self._cluster.keyslot(channel))].append(channel)
        return grouped

    async def subscribe(self, *channels: str) -> None:
        """SSUBSCRIBEs `channels`. A failure (no owner in the slot map, a node that cannot be
        reached) is also handed to `get_message`, as a broken connection is: the hub then
        reconnects with a fresh slot map and subscribes every channel again. Raised only here,
        it would leave the channel unsubscribed with no connection broken to repair it."""
        try:
            for (node, _), names in self._by_slot(channels).items():
                held = self._node(node)
                await held.pubsub.ssubscribe(*names)
                if held.reader is None:  # a pub/sub connection is read once it has a channel
                    held.reader = asyncio.create_task(self._read(node.name, held.pubsub))
        except Exception as err:
            self._messages.put_nowait(err)
            raise

    async def unsubscribe(self, *channels: str) -> None:
        for (node, _), names in self._by_slot(channels).items():
            if node.name in self._nodes:
                self._leaving.update(name.encode() for name in names)
                await self._nodes[node.name].pubsub.sunsubscribe(*names)

    async def get_message(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """The next message of any node (sharded types renamed to the plain ones); raises
        what broke a connection. `timeout`: seconds to wait (None: until one comes), as redis-py's
        PubSub.get_message takes it (the hub calls either)."""
        try:
            async with asyncio.timeout(timeout):
                item = await self._messages.get()
        except TimeoutError:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    async def aclose(self) -> None:
        nodes, self._nodes = self._nodes, {}
        for held in nodes.values():
            if held.reader is not None:
                held.reader.cancel()
                await asyncio.gather(held.reader, return_exceptions=True)
            with contextlib.suppress(Exception):
                await held.pubsub.aclose()
            with contextlib.suppress(Exception):
                await held.client.aclose()

    def _node(self, node: ClusterNode) -> _Node:
        """The connection to `node`, opened on first use (never retried on its own)."""
        if node.name not in self._nodes:
            # No read timeout: a subscription may be quiet for long (the cluster client's
            # default, 5 s, made a quiet primary's connection fail, and the hub resync
            # everybody, every 5 s). A node that dies closes it; the bus notices the rest.
            options = {
                **node.connection_kwargs,
                "retry": Retry(NoBackoff(), 0),
                "socket_timeout": None,
            }
            pool = ConnectionPool(connection_class=node.connection_class, **options)
            client = aioredis.Redis.from_pool(pool)
            self._nodes[node.name] = _Node(client, client.pubsub())
        return self._nodes[node.name]

    async def _read(self, name: str, pubsub: Any) -> None:
        try:
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is None:
                    continue
                kind = _KIND.get(message["type"], message["type"])
                if kind == "unsubscribe":
                    if self._leaving[message["channel"]] > 0:
                        self._leaving[message["channel"]] -= 1
                        continue
                    raise RedisConnectionError(
                        f"{name} dropped {message['channel']!r}: its slot moved"
                    )
                self._messages.put_nowait({**message, "type": kind})
        except asyncio.CancelledError:
            raise
        except BaseException as err:
            self._messages.put_nowait(err)
