"""The collector pacing of parser_svc (docparse_server/gc_pacing.py): freezing keeps what
survived out of full collections, and the periodic full pass still frees garbage cycles that
were frozen (nothing leaks for longer than `full_every_s`). Its effect on watch latency is in
bench/README.md (5,000 streams: p99 3-5 ms with it, 100-255 ms without)."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator

import pytest

from docparse_server.gc_pacing import freeze_step, pace


class Node:
    other: Node


@pytest.fixture
def collector_paused() -> Iterator[None]:
    """No automatic collection while a test looks at one cycle; everything unfrozen after."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


def garbage_cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_frozen_cycle_waits_for_the_full_pass_and_is_freed_by_it(collector_paused: None) -> None:
    cycle = garbage_cycle()
    last_full = freeze_step(time.monotonic(), full_every_s=3600)  # not due: freeze only
    assert gc.get_freeze_count() > 0
    gc.collect()
    assert cycle() is not None  # frozen: a collection does not see it
    freeze_step(last_full - 3600, full_every_s=3600)  # due: unfreeze, collect, freeze again
    assert cycle() is None
    assert gc.get_freeze_count() > 0


def test_unfrozen_cycles_are_collected_as_usual(collector_paused: None) -> None:
    cycle = garbage_cycle()
    gc.collect()
    assert cycle() is None


async def test_pacing_off_returns_at_once_and_on_runs_until_cancelled(
    collector_paused: None,
) -> None:
    await asyncio.wait_for(pace(0, 600), 1)  # 0 = off
    task = asyncio.create_task(pace(0.01, 600))
    await asyncio.sleep(0.05)
    assert not task.done() and gc.get_freeze_count() > 0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
