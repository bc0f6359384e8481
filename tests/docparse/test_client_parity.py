"""The sync and async Python clients are one implementation in two shells: the same methods
with the same parameters, and the same calls and answers on the same offline script (every
operation is written once in docparse.operations, its decisions in docparse.retries and
docparse.waiting; the shells in docparse.client and docparse.aio only do the I/O)."""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Callable
from typing import Any

import pytest

from docparse.aio import AsyncClient
from docparse.client import Client
from docparse.errors import DocparseError
from docparse.v1 import parser_service_pb2
from docparse.waiting import WaitPolicy
from tests.docparse.test_sdk_offline import (
    AsyncScriptedTransport,
    FakeClock,
    ScriptedTransport,
    unavailable,
)


def _public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, callable)
        if not name.startswith("_")
    }


def _shape(signature: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def test_both_clients_have_the_same_methods_and_parameters() -> None:
    sync, aio = _public(Client), _public(AsyncClient)
    assert sorted(sync) == sorted(aio), "a method only one client has"
    differ = {n: (sync[n], aio[n]) for n in sync if _shape(sync[n]) != _shape(aio[n])}
    assert not differ, f"same method, other parameters: {differ}"


def batch(version: int, completed: int, total: int = 2) -> parser_service_pb2.Batch:
    return parser_service_pb2.Batch(
        batch_id="b1", version=version, completed=completed, total=total
    )


def watched(*records: Any) -> list[Any]:
    return [
        r if isinstance(r, Exception) else parser_service_pb2.WatchBatchResponse(batch=r)
        for r in records
    ]


def script() -> dict[str, list[Any]]:
    """A batch watch whose first stream breaks after one record (UNAVAILABLE: backoff, then
    stream again), whose second ends without the final record (one GetBatch, then stream
    again), and whose third brings the end."""
    return {
        "WatchBatch": [
            watched(batch(1, 0), unavailable()),
            watched(batch(2, 1)),
            watched(batch(3, 2)),
        ],
        "GetBatch": [parser_service_pb2.GetBatchResponse(batch=batch(2, 1))],
        "CreateBatch": [parser_service_pb2.CreateBatchResponse(batch=batch(1, 0))],
    }


def run_sync(operation: Callable[[Client], Any]) -> tuple[Any, list[tuple[str, Any]], float]:
    transport, clock = ScriptedTransport(**script()), FakeClock()
    sdk = Client(
        "unused:1",
        transport=transport,
        policy=WaitPolicy(),
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(7),  # the same jitter draws for both clients
    )
    try:
        outcome: Any = operation(sdk)
    except DocparseError as err:
        outcome = (err.code, err.reason)
    return outcome, transport.calls, clock.now


def run_async(operation: Callable[[AsyncClient], Any]) -> tuple[Any, list[tuple[str, Any]], float]:
    transport, clock = AsyncScriptedTransport(**script()), FakeClock()

    async def sleep(seconds: float) -> None:
        clock.sleep(seconds)

    async def run() -> Any:
        sdk = AsyncClient(
            "unused:1",
            transport=transport,
            policy=WaitPolicy(),
            sleep=sleep,
            clock=clock,  # type: ignore[arg-type]
            rng=random.Random(7),
        )
        try:
            return await operation(sdk)
        except DocparseError as err:
            return (err.code, err.reason)

    return asyncio.run(run()), transport.calls, clock.now


async def _collect(items: Any) -> list[Any]:
    return [item async for item in items]


OPERATIONS: list[tuple[str, Callable[[Client], Any], Callable[[AsyncClient], Any]]] = [
    (
        "watch_batch",
        lambda sdk: [(b.version, b.completed) for b in sdk.watch_batch("b1")],
        lambda sdk: _versions(sdk.watch_batch("b1")),
    ),
    (
        "submit_batch",
        lambda sdk: sdk.submit_batch([("a.pdf", b"%PDF-1.7")], request_id="r1").batch_id,
        lambda sdk: _batch_id(sdk.submit_batch([("a.pdf", b"%PDF-1.7")], request_id="r1")),
    ),
]


async def _versions(items: Any) -> list[tuple[int, int]]:
    return [(b.version, b.completed) for b in await _collect(items)]


async def _batch_id(answer: Any) -> str:
    return str((await answer).batch_id)


@pytest.mark.parametrize(
    ("name", "sync_op", "async_op"), OPERATIONS, ids=[o[0] for o in OPERATIONS]
)
def test_both_clients_behave_the_same_on_the_same_script(
    name: str, sync_op: Callable[[Client], Any], async_op: Callable[[AsyncClient], Any]
) -> None:
    sync_outcome, sync_calls, sync_time = run_sync(sync_op)
    async_outcome, async_calls, async_time = run_async(async_op)
    assert sync_outcome == async_outcome
    assert sync_calls == async_calls, "the same calls with the same requests, in the same order"
    assert sync_time == pytest.approx(async_time), "the same waits between them"


def test_the_batch_watch_resumes_after_the_last_version_it_saw() -> None:
    outcome, calls, _ = run_sync(
        lambda sdk: [(b.version, b.completed) for b in sdk.watch_batch("b1")]
    )
    assert outcome == [(1, 0), (2, 1), (3, 2)]
    watches = [request.after_version for method, request in calls if method == "WatchBatch"]
    assert watches == [0, 1, 2], "each stream resumes after the newest record it saw"
    assert [m for m, _ in calls] == ["WatchBatch", "WatchBatch", "GetBatch", "WatchBatch"]
