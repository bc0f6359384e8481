"""A cancelled Redis call ends its task, on Python 3.11 too.

redis-py 8 writes every command under `asyncio.wait_for(..., socket_timeout)`. On Python 3.11,
`wait_for` loses a cancellation that arrives as the write completes (the inner task is done,
so it returns the result and the caller's `Task.cancel()` is forgotten; Python 3.12 rebuilt
`wait_for` on `asyncio.timeout` and has no such window). A loop of Redis calls then goes on
after `cancel()`: in 3 of 4 cancels at random moments of a GET loop, and in a replica whose
sweeper was mid-call when SIGTERM came, the shutdown waited for the sweeper until the kill.

On 3.11 the module of redis-py that calls `wait_for` is given 3.12's: the same timeout on
the same awaitable, with `asyncio.timeout` around a plain await, which cannot lose a cancel.
Nothing else of that module's `asyncio` changes. tests/parser_svc/state/test_redis_cancel.py
cancels calls at random moments and fails if redis-py moves the call where this cannot reach.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Awaitable
from typing import Any, TypeVar

from redis.asyncio import connection

T = TypeVar("T")


async def wait_for(awaitable: Awaitable[T], timeout: float | None) -> T:  # noqa: ASYNC109
    """`asyncio.wait_for` as Python 3.12 has it (its signature, so `timeout` is kept)."""
    if timeout is None:
        return await awaitable
    async with asyncio.timeout(timeout):
        return await awaitable


class _Asyncio(types.ModuleType):
    """asyncio, with `wait_for` replaced."""

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)


def apply() -> None:
    """Gives redis-py's connection module a `wait_for` that keeps cancellations, on Python
    before 3.12 (once: a second call finds it in place)."""
    if sys.version_info >= (3, 12):
        return
    if isinstance(getattr(connection, "asyncio"), _Asyncio):  # noqa: B009 (not re-exported)
        return
    patched = _Asyncio("asyncio")
    patched.wait_for = wait_for  # type: ignore[attr-defined]
    setattr(connection, "asyncio", patched)  # noqa: B010 (not re-exported)
