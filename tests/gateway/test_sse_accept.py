"""The gateway's event stream answers 200 only once a replica has taken the upstream watch
(gateway/http/sse.py `_accepted`), against a real grpc.aio server standing in for a replica
that takes the watch, refuses it, or says nothing (stopped, or an older replica that sends its
headers with the first record). The whole path through a stack is in test_hostile_http."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from docparse.errors import DocparseError
from docparse.v1 import parser_service_pb2, parser_service_pb2_grpc
from docparse_server.serving import ErrorInterceptor
from gateway.http.sse import _accepted
from gateway.http.upstream import HttpError


class _Replica(parser_service_pb2_grpc.ParserServiceServicer):
    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def WatchJob(
        self, request: parser_service_pb2.WatchJobRequest, context: Any
    ) -> AsyncIterator[parser_service_pb2.WatchJobResponse]:
        if request.job_id == "refused":
            raise DocparseError(
                grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_STREAMS", "over", {"limit": "3"}
            )
        if request.job_id == "taken":
            await context.send_initial_metadata(())
        try:
            await asyncio.sleep(60)  # no record: "silent" sends nothing at all
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield parser_service_pb2.WatchJobResponse()


@pytest.fixture
async def replica() -> AsyncIterator[tuple[parser_service_pb2_grpc.ParserServiceStub, _Replica]]:
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])  # as the replica's
    servicer = _Replica()
    parser_service_pb2_grpc.add_ParserServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield parser_service_pb2_grpc.ParserServiceStub(channel), servicer
    await server.stop(0)


def _watch(stub: parser_service_pb2_grpc.ParserServiceStub, job_id: str) -> Any:
    return stub.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job_id))


async def test_a_taken_watch_is_handed_on_open(
    replica: tuple[parser_service_pb2_grpc.ParserServiceStub, _Replica],
) -> None:
    stub, _ = replica
    call = _watch(stub, "taken")
    assert await _accepted(call, 5) is call
    assert not call.done()
    call.cancel()


async def test_a_refused_watch_is_the_http_error_before_the_stream(
    replica: tuple[parser_service_pb2_grpc.ParserServiceStub, _Replica],
) -> None:
    stub, _ = replica
    with pytest.raises(HttpError) as raised:
        await _accepted(_watch(stub, "refused"), 5)
    error = raised.value.error
    assert (error.code, error.reason, error.metadata["limit"]) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "TOO_MANY_STREAMS",
        "3",
    )


async def test_a_silent_replica_is_left_behind_after_the_wait(
    replica: tuple[parser_service_pb2_grpc.ParserServiceStub, _Replica],
) -> None:
    stub, servicer = replica
    call = _watch(stub, "silent")
    started = time.monotonic()
    assert await _accepted(call, 0.3) is None
    assert 0.3 <= time.monotonic() - started < 5
    # Its watch is cancelled, on the replica too: it holds no stream slot there.
    await asyncio.wait_for(servicer.cancelled.wait(), 5)
    assert call.cancelled()
