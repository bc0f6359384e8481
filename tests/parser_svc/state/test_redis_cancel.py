"""A task cancelled during a Redis call ends (parser_svc/state/redis_cancel.py).

Shutdown, a client that leaves a stream, and every `asyncio.timeout` stop their work by
cancelling a task. Before the fix, on Python 3.11, 3 of 4 cancels at random moments of a loop
of Redis calls were lost, and a replica told to stop while its sweeper was mid-call waited for
it until SIGKILL (25 s in a test stack, terminationGracePeriodSeconds in Kubernetes)."""

from __future__ import annotations

import asyncio
import random
import sys
import uuid
from collections.abc import Awaitable, Callable

import pytest
import uvloop
from redis.asyncio import connection

from docparse.local.embedded_redis import EmbeddedRedis
from parser_svc.settings import Settings
from parser_svc.state.store import JobStore, connect

ROUNDS = 100
ENDS_WITHIN_S = 2.0  # a cancelled task ends at its next step; this is a stall bound
Call = Callable[[JobStore], Awaitable[object]]


def store_on(server: EmbeddedRedis) -> JobStore:
    settings = Settings(redis_url=server.url, env=f"c{uuid.uuid4().hex[:8]}")
    return JobStore(connect(settings), settings)


async def ping(store: JobStore) -> object:
    return await store.ping()


async def lease(store: JobStore) -> object:  # the sweeper's call when a replica hung
    return await store.hold_lease("lease", "me", 3000)


async def lost_cancels(
    store: JobStore, call: Call, enough: int = ROUNDS, patience_s: float = ENDS_WITHIN_S
) -> list[int]:
    """Cancels a loop of `call` at a random moment, ROUNDS times: the rounds whose task went
    on after its cancel (it stops at `enough` of them)."""
    rng = random.Random(31)
    lost: list[int] = []
    stop = asyncio.Event()

    async def loop() -> None:
        while not stop.is_set():
            await call(store)

    for round_ in range(ROUNDS):
        if len(lost) == enough:
            break
        stop.clear()
        task = asyncio.create_task(loop())
        await asyncio.sleep(rng.random() * 0.005)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=patience_s)
        if not done:
            lost.append(round_)
            stop.set()
            await task
        else:
            assert task.cancelled(), task
    await store.aclose()
    return lost


def run(loop: str, coro: Awaitable[list[int]]) -> list[int]:
    if loop == "uvloop":
        return uvloop.run(coro)  # type: ignore[arg-type]
    return asyncio.run(coro)  # type: ignore[arg-type]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("call", [ping, lease], ids=["ping", "lease_script"])
def test_a_task_cancelled_mid_call_ends(redis_server: EmbeddedRedis, loop: str, call: Call) -> None:
    assert run(loop, lost_cancels(store_on(redis_server), call, enough=3)) == []


def test_the_check_sees_lost_cancels_with_the_wait_for_of_python_3_11(
    redis_server: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above is not blind: with redis-py's module given back the interpreter's own
    `wait_for`, it finds lost cancels on 3.11, and none where Python fixed `wait_for` (3.12+)."""
    monkeypatch.setattr(connection, "asyncio", asyncio)
    lost = run("asyncio", lost_cancels(store_on(redis_server), ping, enough=5, patience_s=0.5))
    if sys.version_info < (3, 12):
        assert len(lost) == 5, lost
    else:
        assert lost == []
