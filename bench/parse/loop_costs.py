"""What an event loop's hand-offs cost this machine's CPU: `python -m bench.parse.loop_costs
[--trips N]`. The worker publishes each batch of drafts with a trip to a thread
(asyncio.to_thread) and a wake of its loop when the batch's line or Redis's reply arrives; on a
virtual machine these cost more than the work they carry. For asyncio's loop and uvloop (the
worker's default): CPU us of a thread trip back to back, of one after an idle 2 ms (as drafts
come), and of a wake from an idle 2 ms sleep. Prints one JSON object (medians of 5 rounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

import uvloop

IDLE_S = 0.002


def _nothing() -> int:
    return 1


async def _cpu_us(step: Callable[[], Awaitable[object]], trips: int) -> float:
    started = time.process_time()
    for _ in range(trips):
        await step()
    return (time.process_time() - started) / trips * 1e6


async def _round(trips: int) -> dict[str, float]:
    async def trip() -> None:
        await asyncio.to_thread(_nothing)

    async def idle() -> None:
        await asyncio.sleep(IDLE_S)

    async def idle_then_trip() -> None:
        await idle()
        await trip()

    await _cpu_us(trip, 100)  # the executor's threads started
    wake = await _cpu_us(idle, trips)
    return {
        "thread_trip_us": await _cpu_us(trip, trips * 5),
        "thread_trip_after_idle_us": await _cpu_us(idle_then_trip, trips) - wake,
        "wake_after_idle_us": wake,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trips", type=int, default=200)
    trips = parser.parse_args().trips
    out: dict[str, float] = {}
    for name, run in (("asyncio", asyncio.run), ("uvloop", uvloop.run)):
        rounds = [run(_round(trips)) for _ in range(5)]
        for key in rounds[0]:
            out[f"{name}_{key}"] = round(statistics.median(r[key] for r in rounds), 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
