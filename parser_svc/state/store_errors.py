"""How a failed state store call reads to a client.

A Redis that does not answer (refused, timed out, loading, read-only; on Redis Cluster also a
slot that moved or has no primary during a failover, or no node in reach) is UNAVAILABLE
STATE_STORE_UNAVAILABLE, never NOT_FOUND; an error reply is STATE_STORE_FULL (OOM: retryable),
STATE_STORE_NOT_REPLICATED (WAIT fell short, or NOREPLICAS: the primary has fewer replicas than
its min-replicas-to-write) or INTERNAL STATE_STORE_ERROR. JobStore.call
(parser_svc/state/store.py) and the queue (parser_svc/work/queue.py) map their errors with these.
"""

from __future__ import annotations

from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse_server.errors import error
from parser_svc.state.redis_sentinel import NO_REPLICAS
from parser_svc.state.redis_start_check import refusal_detail

# Errors that mean Redis did not answer (STATE_STORE_UNAVAILABLE), not that it refused a call.
UNAVAILABLE_ERRORS = (
    RedisConnectionError,
    RedisTimeoutError,
    BusyLoadingError,
    ReadOnlyError,
    OSError,
    TimeoutError,
    # Redis Cluster: CLUSTERDOWN / MASTERDOWN, TRYAGAIN, MOVED / ASK the client's retries did
    # not get past, a slot nobody serves yet.
    ClusterError,
    TryAgainError,
    AskError,
    SlotNotCoveredError,
)


# How a connection that died under a command surfaces past redis-py (seen when a Redis Cluster
# node is killed): uvloop's RuntimeError on a closed transport, and redis-py's own
# AttributeError writing to a connection its reader has just torn down.
_BROKEN_CONNECTION = (
    (RuntimeError, "the handler is closed"),
    (AttributeError, "object has no attribute 'writelines'"),
)


def is_unavailable(err: BaseException) -> bool:
    """Redis did not answer: one of UNAVAILABLE_ERRORS, a connection that broke under the
    command, or redis-py's cluster client found no node to ask (its other
    RedisClusterExceptions are our mistakes, e.g. keys of two slots in one call:
    STATE_STORE_ERROR)."""
    if isinstance(err, UNAVAILABLE_ERRORS):
        return True
    if any(isinstance(err, kind) and text in str(err) for kind, text in _BROKEN_CONNECTION):
        return True
    return isinstance(err, RedisClusterException) and "cannot be connected" in str(err)


class NotReplicated(RedisError):
    """WAIT saw fewer replicas acknowledge the write than asked for."""

    def __init__(self, acked: int, wanted: int) -> None:
        super().__init__(f"{acked} of {wanted} replicas acknowledged the write in time")


def unavailable_detail(err: BaseException) -> str:
    """How a store call failed, in words a client may read (never a class name or a server's
    text; the replica's log has those)."""
    if isinstance(err, BusyLoadingError):
        return "Redis is loading its data"
    if isinstance(err, ReadOnlyError):
        return "Redis is read-only (a replica, or failing over)"
    if isinstance(err, RedisTimeoutError | TimeoutError):
        return "timed out"
    return refusal_detail(err) or "connection failed"


def store_error(err: RedisError | RedisClusterException) -> DocparseError:
    """A Redis error reply. A full Redis (maxmemory with noeviction refuses writes with OOM)
    is retryable: UNAVAILABLE STATE_STORE_FULL, so clients back off and retry instead of
    treating it as a bug; anything else is INTERNAL STATE_STORE_ERROR."""
    if isinstance(err, NotReplicated):
        return error(
            ErrorReason.STATE_STORE_NOT_REPLICATED,
            f"the write is on the Redis primary but {err}: retry the call (with the same "
            "request_id), it answers with what the first one did",
        )
    if NO_REPLICAS in str(err):
        return error(
            ErrorReason.STATE_STORE_NOT_REPLICATED,
            "the Redis primary refuses writes: fewer replicas in reach than its "
            "min-replicas-to-write; retry the call (with the same request_id)",
        )
    if "OOM command not allowed" in str(err):
        return error(
            ErrorReason.STATE_STORE_FULL,
            "the job state store is full and refuses writes; retry later (operators: "
            "docs/operations.md, Redis memory)",
        )
    return error(ErrorReason.STATE_STORE_ERROR, "state store error (see the replica log)")
