"""Every ParserService RPC maps its expected failures to a gRPC status with a docparse
ErrorInfo reason, through one place (docparse_server.serving.ErrorInterceptor).

Servicer-level and in-process: a grpc.aio server on a Unix socket in the test's own event loop,
the real ParserService on the real Redis of the session, no parser_svc process. (grpcio-testing's
in-process server would avoid even the socket, but it cannot run grpc.aio servicers:
grpc/grpc#24942.) The stack tests keep checking the same statuses through a gateway."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from docparse.errors import DocparseError
from docparse.local.embedded_redis import EmbeddedRedis
from docparse.v1 import parser_service_pb2 as ps
from docparse.v1 import parser_service_pb2_grpc
from docparse_server.serving import ErrorInterceptor, InterceptorChain, ServedByInterceptor
from parser_svc.api.service import ParserService
from parser_svc.settings import Settings
from parser_svc.state.events import EventHub
from parser_svc.state.redis_conn import RedisTarget
from parser_svc.state.store import JobStore, connect
from parser_svc.work.blobs import BlobStore
from parser_svc.work.queue import JobQueue

UNKNOWN = uuid.uuid4().hex


def _reason(err: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, str, dict[str, Any]]:
    status = rpc_status.from_call(err)
    assert status is not None, f"{err.code().name} without a google.rpc.Status: {err.details()}"
    found: dict[str, Any] = {}
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            found["reason"], found["domain"] = info.reason, info.domain
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            found["retry_s"] = retry.retry_delay.seconds
    served_by = dict(err.trailing_metadata() or ()).get("x-served-by")
    found["served_by"] = served_by
    return err.code(), str(found.get("reason", "")), found


@pytest.fixture(scope="module", params=["interceptors", "chain"])
async def stub(
    request: pytest.FixtureRequest,
    redis_server: EmbeddedRedis,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[parser_service_pb2_grpc.ParserServiceStub]:
    """The servicer behind ServedBy and Error as two interceptors, and as one InterceptorChain
    (as the replica runs them): the same statuses, reasons and trailers either way."""
    settings = Settings(
        redis_url=redis_server.url,
        env=f"rpc-errors-{uuid.uuid4().hex[:8]}",
        blob_dir=tmp_path_factory.mktemp("blobs"),
    )
    store = JobStore(connect(settings), settings)
    hub = EventHub(RedisTarget.of(settings), timeout_s=settings.redis_timeout_s)
    queue = JobQueue(settings)
    service = ParserService(settings, store, hub, queue, BlobStore(settings.blob_dir, settings.env))
    layers = [ServedByInterceptor(), ErrorInterceptor()]
    interceptors = layers if request.param == "interceptors" else [InterceptorChain(*layers)]
    server = grpc.aio.server(interceptors=interceptors)
    parser_service_pb2_grpc.add_ParserServiceServicer_to_server(service, server)
    socket = Path(tmp_path_factory.mktemp("sock")) / "rpc.sock"
    server.add_insecure_port(f"unix:{socket}")
    await hub.start()
    await server.start()
    channel = grpc.aio.insecure_channel(f"unix:{socket}")
    yield parser_service_pb2_grpc.ParserServiceStub(channel)
    await channel.close()
    await server.stop(None)
    hub.close_streams()
    await queue.close()


UNARY = [
    (
        "SubmitJob",
        ps.SubmitJobRequest(content=b""),
        grpc.StatusCode.INVALID_ARGUMENT,
        "EMPTY_CONTENT",
    ),
    (
        "SubmitJob",
        ps.SubmitJobRequest(content=b"%PDF-1.7\n", request_id="r" * 10_000),
        grpc.StatusCode.INVALID_ARGUMENT,
        "REQUEST_ID_TOO_LONG",
    ),
    (
        "GetStatus",
        ps.GetStatusRequest(job_id="not a job id!"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_JOB_ID",
    ),
    ("GetStatus", ps.GetStatusRequest(job_id=UNKNOWN), grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND"),
    ("CancelJob", ps.CancelJobRequest(job_id=UNKNOWN), grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND"),
    (
        "ListJobs",
        ps.ListJobsRequest(page_token="garbage"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_PAGE_TOKEN",
    ),
    ("CreateBatch", ps.CreateBatchRequest(), grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_BATCH"),
    (
        "GetBatch",
        ps.GetBatchRequest(batch_id=UNKNOWN),
        grpc.StatusCode.NOT_FOUND,
        "BATCH_NOT_FOUND",
    ),
]

STREAMS = [
    (
        "WatchJob",
        ps.WatchJobRequest(job_id="not a job id!"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_JOB_ID",
    ),
    ("WatchJob", ps.WatchJobRequest(job_id=UNKNOWN), grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND"),
    ("GetResult", ps.GetResultRequest(job_id=UNKNOWN), grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND"),
    (
        "GetAsset",
        ps.GetAssetRequest(job_id=UNKNOWN, asset_id="../../etc/passwd"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_ASSET_ID",
    ),
    (
        "WatchBatch",
        ps.WatchBatchRequest(batch_id=UNKNOWN),
        grpc.StatusCode.NOT_FOUND,
        "BATCH_NOT_FOUND",
    ),
    (
        "StreamResult",
        ps.StreamResultRequest(job_id=UNKNOWN),
        grpc.StatusCode.NOT_FOUND,
        "JOB_NOT_FOUND",
    ),
    (
        "StreamResult",
        ps.StreamResultRequest(job_id="not a job id!"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_JOB_ID",
    ),
]


@pytest.mark.parametrize(("method", "request_", "code", "reason"), UNARY)
async def test_unary_rpcs_map_their_errors(
    stub: parser_service_pb2_grpc.ParserServiceStub,
    method: str,
    request_: Any,
    code: grpc.StatusCode,
    reason: str,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await getattr(stub, method)(request_, timeout=10)
    got_code, got_reason, found = _reason(caught.value)
    assert (got_code, got_reason) == (code, reason)
    assert found["domain"] == "docparse"
    assert found["served_by"], "the x-served-by trailer is kept on errors"


@pytest.mark.parametrize(("method", "request_", "code", "reason"), STREAMS)
async def test_streaming_rpcs_map_their_errors(
    stub: parser_service_pb2_grpc.ParserServiceStub,
    method: str,
    request_: Any,
    code: grpc.StatusCode,
    reason: str,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in getattr(stub, method)(request_, timeout=10):
            pass
    got_code, got_reason, _ = _reason(caught.value)
    assert (got_code, got_reason) == (code, reason)


async def test_an_upload_without_a_header_is_a_protocol_error(
    stub: parser_service_pb2_grpc.ParserServiceStub,
) -> None:
    async def requests() -> AsyncIterator[ps.UploadBatchRequest]:
        yield ps.UploadBatchRequest(chunk=b"data before any header")

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UploadBatch(requests(), timeout=10)  # type: ignore[arg-type,misc]
    assert _reason(caught.value)[:2] == (grpc.StatusCode.INVALID_ARGUMENT, "UPLOAD_PROTOCOL")


async def test_the_interceptor_keeps_retry_info_and_lets_other_errors_through(
    tmp_path: Path,
) -> None:
    """A DocparseError naming a delay carries RetryInfo (AIP-193); an unexpected exception is
    not dressed up as a docparse reason (grpc ends it UNKNOWN)."""

    async def limited(request: bytes, context: Any) -> bytes:
        raise DocparseError(
            grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", "slow down", {"retry_after_s": "7"}
        )

    async def broken(request: bytes, context: Any) -> AsyncIterator[bytes]:
        raise RuntimeError("a bug")
        yield b""

    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "Limited": grpc.unary_unary_rpc_method_handler(limited),
        "Broken": grpc.unary_stream_rpc_method_handler(broken),
    }
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", handlers)])
    server.add_insecure_port(f"unix:{tmp_path / 's'}")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"unix:{tmp_path / 's'}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await channel.unary_unary("/t.T/Limited")(b"", timeout=10)
            code, reason, found = _reason(caught.value)
            assert (code, reason, found["retry_s"]) == (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "RATE_LIMITED",
                7,
            )
            with pytest.raises(grpc.aio.AioRpcError) as unexpected:
                async for _ in channel.unary_stream("/t.T/Broken")(b"", timeout=10):
                    pass
            assert unexpected.value.code() == grpc.StatusCode.UNKNOWN
            assert rpc_status.from_call(unexpected.value) is None
    finally:
        await server.stop(None)


def test_rebuild_keeps_the_handler_kind() -> None:
    """The interceptor rebuilds each kind of handler as the same kind."""

    async def fn(request: Any, context: Any) -> Any:
        return request

    kinds: list[grpc.RpcMethodHandler[Any, Any]] = [
        grpc.unary_unary_rpc_method_handler(fn),
        grpc.unary_stream_rpc_method_handler(fn),
        grpc.stream_unary_rpc_method_handler(fn),
        grpc.stream_stream_rpc_method_handler(fn),
    ]
    for handler in kinds:
        rebuilt = ErrorInterceptor().wrap(handler, "/t.T/M")
        assert (rebuilt.request_streaming, rebuilt.response_streaming) == (
            handler.request_streaming,
            handler.response_streaming,
        )
