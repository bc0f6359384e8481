"""The render queue's order and limits on their own (gateway/http/render_queue.py): tenants take
turns round-robin, each in its own order; a tenant over its limit and a full queue are refused
with TOO_MANY_RENDERS; a request that leaves while waiting frees its place and a released turn
is not released twice."""

from __future__ import annotations

import asyncio

import pytest

from docparse.errors import DocparseError
from gateway.http.render_queue import RenderQueue


async def take(
    queue: RenderQueue, tenant: str, name: str, order: list[str], gate: asyncio.Event
) -> None:
    async with queue.turn(tenant):
        order.append(name)
        await gate.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_tenants_take_turns_round_robin() -> None:
    async def run() -> list[str]:
        queue = RenderQueue(workers=1, per_tenant=0, max_waiting=0)
        order: list[str] = []
        gates = {name: asyncio.Event() for name in ("a0", "a1", "a2", "a3", "b0", "b1")}
        tasks = []
        for name in ("a0", "a1", "a2", "a3", "b0", "b1"):
            tasks.append(asyncio.create_task(take(queue, name[0], name, order, gates[name])))
            await settle()
        assert queue.waiting("a") == 3 and queue.waiting("b") == 2
        for _ in range(6):
            gates[order[-1]].set()
            await settle()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(run()) == ["a0", "b0", "a1", "b1", "a2", "a3"]


def test_limits_and_leaving() -> None:
    async def run() -> None:
        queue = RenderQueue(workers=1, per_tenant=2, max_waiting=2)
        order: list[str] = []
        gate = asyncio.Event()
        a0 = asyncio.create_task(take(queue, "a", "a0", order, gate))
        a1 = asyncio.create_task(take(queue, "a", "a1", order, gate))
        await settle()
        with pytest.raises(DocparseError) as over:
            async with queue.turn("a"):
                pass
        assert over.value.reason == "TOO_MANY_RENDERS" and over.value.metadata["limit"] == "2"
        b0 = asyncio.create_task(take(queue, "b", "b0", order, gate))
        await settle()
        with pytest.raises(DocparseError) as full:  # two waiting: the gateway's queue is full
            async with queue.turn("c"):
                pass
        assert full.value.reason == "TOO_MANY_RENDERS"
        a1.cancel()  # leaves while waiting: its place is free, it never runs
        await settle()
        assert queue.waiting() == 1
        gate.set()
        await asyncio.gather(a0, b0)
        assert order == ["a0", "b0"] and queue.waiting() == 0
        async with queue.turn("c") as turn:
            turn.release()
            turn.release()
            async with queue.turn("d"):  # the released worker is free at once
                pass

    asyncio.run(run())
