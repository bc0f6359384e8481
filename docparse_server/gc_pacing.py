"""Garbage-collector pacing for a server that holds many long-lived objects (open streams).

Each open WatchJob stream keeps a few hundred objects alive for its whole life (its generators,
task, queue, protobuf records). The collector's full passes walk every one of them: with 5,000
streams open on one replica, full collections paused the event loop for 200-350 ms every few
seconds, and those pauses were the watch latency's p99 (bench/README.md, Spine). `pace` freezes
what has survived so far every `freeze_every_s` (gc.freeze: out of the collector's view, still
freed by reference counting when dropped), so a full pass walks only what is newer. Garbage
in reference cycles among frozen objects is found only by a full pass over everything: every
`full_every_s` the objects are unfrozen and collected once (one pause), then frozen again.
"""

from __future__ import annotations

import asyncio
import gc
import time


def freeze_step(last_full: float, full_every_s: float) -> float:
    """One step of `pace`: a full collection of everything when `full_every_s` has passed since
    `last_full`, then a freeze. Returns the time of the last full collection."""
    now = time.monotonic()
    if now - last_full >= full_every_s:
        gc.unfreeze()
        gc.collect()
        last_full = now
    gc.freeze()
    return last_full


async def pace(freeze_every_s: float, full_every_s: float) -> None:
    """Runs until cancelled; `freeze_every_s` <= 0: does nothing (the collector as Python sets
    it)."""
    if freeze_every_s <= 0:
        return
    last_full = time.monotonic()
    while True:
        await asyncio.sleep(freeze_every_s)
        last_full = freeze_step(last_full, full_every_s)
