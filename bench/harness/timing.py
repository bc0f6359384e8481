"""Operations issued at a fixed rate, with wall-clock timestamps that other processes can
compare (time.time_ns(): CLOCK_REALTIME, one machine)."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def paced(
    count: int, rate: float, op: Callable[[int], Awaitable[Any]]
) -> list[tuple[int, int, Any]]:
    """Runs op(0..count-1) one after another at `rate` per second; returns, for each, the
    wall-clock ns it was issued and acknowledged and what it returned."""
    out: list[tuple[int, int, Any]] = []
    gc.collect()
    gc.disable()  # a collector pause here would delay writes and skew their timestamps
    try:
        start = time.perf_counter()
        for i in range(count):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            sent = time.time_ns()
            value = await op(i)
            out.append((sent, time.time_ns(), value))
    finally:
        gc.enable()
    return out
