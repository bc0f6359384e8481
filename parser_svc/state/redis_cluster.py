"""What parser_svc does differently on Redis Cluster (a `redis+cluster://` URL): the client, the
event hub's pub/sub connection, and how a script runs on the primary of its keys' slot.

Scripts: redis-py's cluster client refuses a script whose KEYS name two slots, and docparse's
scripts pass '' for a key they do not need (slot 0). Keys of one job are in its cell's slot
(parser_svc/state/keys.py), so a script is sent to the primary of its first key's slot, on one
connection together with a WAIT when the write must reach replicas. A MOVED or ASK reply, a
node that went away or CLUSTERDOWN refresh the client's slot map, and the script runs once more
on the slot's owner now: every script of docparse is safe to run twice (a re-run answers as if
its first reply had been lost). A second failure is raised as a connection error (the store
answers UNAVAILABLE: the caller retries, as after any lost reply).

Pub/sub: the scripts publish with SPUBLISH on a cluster (LuaScript's sharded source), so a
record stays on its job's shard; the event hub subscribes there
(parser_svc/state/sharded_pubsub.py).
"""

from __future__ import annotations

import contextlib
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import (
    AskError,
    ClusterDownError,
    NoScriptError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from parser_svc.state.sharded_pubsub import ShardedPubSub

_REROUTE = (AskError, ClusterDownError, TryAgainError)  # MovedError is an AskError
_REROUTE_WORDS = frozenset({"MOVED", "ASK", "CLUSTERDOWN", "TRYAGAIN"})


def cluster_client(
    hosts: list[tuple[str, int]], max_connections: int | None, **options: Any
) -> aioredis.Redis:
    """A Redis Cluster client from seed nodes: it learns the slots from one of them and
    follows MOVED replies and failovers, retrying a command up to 3 times with a short
    backoff (a failover takes seconds; the store's deadline cuts the wait, its callers retry
    UNAVAILABLE). `options` as RedisCluster takes them (user, password, TLS, timeouts)."""
    options = {k: v for k, v in options.items() if k not in ("retry", "retry_on_error")}
    cluster = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in hosts],
        max_connections=max_connections or 100,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 3),
        **options,
    )
    # One client type for the callers: the commands they use work on both (scripts go
    # through run_on_slot_owner).
    return cluster  # type: ignore[return-value]


async def event_pubsub(client: aioredis.Redis) -> Any:
    """The event hub's pub/sub connection: on a cluster, sharded (the scripts SPUBLISH there:
    parser_svc/state/sharded_pubsub.py), with the client's slot map just read."""
    if isinstance(client, RedisCluster):
        await client.initialize()
        return ShardedPubSub(client)
    return client.pubsub()


async def run_on_slot_owner(
    cluster: RedisCluster,
    script: tuple[str, str],
    keys: list[str],
    args: list[str | bytes | int],
    replicas: int,
    wait_ms: int,
) -> tuple[list[bytes | int], int]:
    """The reply of the script (sha, source) run on the primary of `keys[0]`'s slot, and how
    many replicas acknowledged it (a WAIT for `replicas` on the same connection; 0 when
    `replicas` is 0)."""
    await cluster.initialize()  # a no-op once the client knows the slots
    if "" in keys:  # lua/lib/keys.lua: a left-out key, in the slot of the first
        tag = keys[0][keys[0].index("{") : keys[0].index("}") + 1]
        keys = [key or f"docparse:\x00none:{tag}" for key in keys]
    wait = [("WAIT", replicas, wait_ms)] if replicas else []
    try:
        return await _run(cluster, script, keys, [*keys, *args], wait)
    except RedisConnectionError:
        await _refresh(cluster)
    return await _run(cluster, script, keys, [*keys, *args], wait)


async def _run(
    cluster: RedisCluster,
    script: tuple[str, str],
    keys: list[str],
    operands: list[str | bytes | int],
    wait: list[tuple[str, int, int]],
) -> tuple[list[bytes | int], int]:
    """One try on the slot's current primary: EVALSHA (EVAL if it lacks the script), then
    `wait` on the same connection."""
    sha, source = script
    node = cluster.get_node_from_key(keys[0])
    if node is None:  # not expected: every slot has a primary in the map
        raise RedisConnectionError(f"no node owns the slot of {keys[0]!r}")
    for call in (("EVALSHA", sha), ("EVAL", source)):
        commands = [PipelineCommand(0, *call, len(keys), *operands)]
        commands += [PipelineCommand(1, *command) for command in wait]
        try:
            await node.execute_pipeline(commands)
        except (OSError, RedisConnectionError, TimeoutError, RuntimeError) as err:
            # RuntimeError: uvloop's "unable to perform operation on <TCPTransport closed>"
            # when the node died under a pooled connection.
            raise RedisConnectionError(f"cluster node {node.name}: {err!r}") from err
        reply = commands[0].result
        if isinstance(reply, NoScriptError):
            continue
        if isinstance(reply, _REROUTE) or (
            isinstance(reply, ResponseError) and str(reply).split(" ", 1)[0] in _REROUTE_WORDS
        ):
            raise RedisConnectionError(f"slot moved from {node.name}: {reply}")
        if isinstance(reply, Exception):
            raise reply
        acked = commands[1].result if wait else 0
        return list(reply), 0 if isinstance(acked, Exception) else int(acked)
    raise NoScriptError("the script could not be loaded")


async def _refresh(cluster: RedisCluster) -> None:
    """Asks the cluster for its current slots (a failover or resharding moved some)."""
    with contextlib.suppress(Exception):
        await cluster.nodes_manager.initialize()
