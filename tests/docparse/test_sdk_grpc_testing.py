"""The sync SDK's real gRPC seam (GrpcTransport under Client) against grpcio-testing's in-memory
channel: real `grpc.RpcError`s with real trailers (a google.rpc.Status with ErrorInfo, the
replicas' `x-served-by`), no socket and no server.

The offline tests (test_sdk_offline.py) script answers at the Transport seam, above grpc; the
stack tests go through real servers. This file covers what lies between: how grpc's own error
objects become DocparseErrors (reason, metadata, TARGET_UNREACHABLE vs an answered UNAVAILABLE,
MESSAGE_TOO_LARGE), what the retry table does with them, and what goes out on the wire (the API
key, the request_id of every retry). grpcio-testing's server side cannot run the
grpc.aio servicers (grpc/grpc#24942): tests/parser_svc/api/test_rpc_errors.py does the servicer
side in process.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import grpc
import grpc_testing
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from docparse.client import Client
from docparse.errors import DocparseError
from docparse.transport import GrpcTransport
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc

SERVICE = parser_service_pb2.DESCRIPTOR.services_by_name["ParserService"]
TARGET = "parser.test:50051"
REPLICA = ("x-served-by", "parser-0/4242")


def _status(code: grpc.StatusCode, reason: str, message: str, **meta: str) -> Any:
    """Trailers as a docparse server sends them: google.rpc.Status with ErrorInfo."""
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="docparse.dev", metadata=meta))
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=[info])
    return (("grpc-status-details-bin", status.SerializeToString()), REPLICA)


class Wire:
    """A Client whose GrpcTransport talks to a grpc_testing channel; calls run on a thread so
    the test can play the server for each attempt."""

    def __init__(self, api_key: str = "key-1") -> None:
        self.channel = grpc_testing.channel([SERVICE], grpc_testing.strict_real_time())
        transport = GrpcTransport(TARGET, api_key)
        transport.channel.close()
        transport.channel = self.channel
        transport.stub = parser_service_pb2_grpc.ParserServiceStub(self.channel)
        self.slept: list[float] = []
        self.client = Client(TARGET, transport=transport, sleep=self.slept.append)
        self._pool = ThreadPoolExecutor(1)

    def start(self, call: Callable[[Client], Any]) -> Future[Any]:
        return self._pool.submit(call, self.client)

    def take(self, method: str) -> tuple[dict[str, str], Any, Any]:
        metadata, request, rpc = self.channel.take_unary_unary(SERVICE.methods_by_name[method])
        rpc.send_initial_metadata(())
        return dict(metadata), request, rpc

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


@pytest.fixture
def wire() -> Iterator[Wire]:
    w = Wire()
    yield w
    w.close()


def _job(job_id: str, state: int) -> job_pb2.Job:
    return job_pb2.Job(job_id=job_id, state=state, version=3)


def test_an_errorinfo_reaches_the_caller_with_its_reason_and_is_not_retried(wire: Wire) -> None:
    pending = wire.start(lambda c: c.status("nope"))
    metadata, request, rpc = wire.take("GetStatus")
    assert request.job_id == "nope"
    assert metadata["authorization"] == "Bearer key-1"
    rpc.terminate(
        None,
        _status(
            grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND", "job nope does not exist", job_id="nope"
        ),
        grpc.StatusCode.NOT_FOUND,
        "job nope does not exist",
    )
    with pytest.raises(DocparseError) as caught:
        pending.result(timeout=10)
    err = caught.value
    assert (err.code, err.reason, err.metadata) == (
        grpc.StatusCode.NOT_FOUND,
        "JOB_NOT_FOUND",
        {"job_id": "nope"},
    )
    assert wire.slept == []  # a NOT_FOUND is final: no second attempt was made


def test_an_unanswered_unavailable_names_the_target_and_is_retried(
    wire: Wire, caplog: pytest.LogCaptureFixture
) -> None:
    # No ErrorInfo and no x-served-by: no docparse process answered (what a refused connection
    # looks like to grpc). Retried with backoff, and the logged retry names the target.
    caplog.set_level(logging.INFO, logger="docparse.client")
    pending = wire.start(lambda c: c.status("j1"))
    wire.take("GetStatus")[2].terminate(None, (), grpc.StatusCode.UNAVAILABLE, "connect failed")
    wire.take("GetStatus")[2].terminate(
        parser_service_pb2.GetStatusResponse(job=_job("j1", job_pb2.STATE_SUCCEEDED)),
        (REPLICA,),
        grpc.StatusCode.OK,
        "",
    )
    answer = pending.result(timeout=10)
    assert answer.job.job_id == "j1"
    assert len(wire.slept) == 1 and wire.slept[0] > 0
    (retry,) = [r.getMessage() for r in caplog.records if r.name == "docparse.client"]
    assert "retrying GetStatus" in retry and "TARGET_UNREACHABLE" in retry and TARGET in retry


def test_a_submit_retry_sends_the_same_request_id(wire: Wire) -> None:
    pending = wire.start(lambda c: c.submit("a.pdf", b"%PDF-1.7 x"))
    _, first, rpc = wire.take("SubmitJob")
    rpc.terminate(
        None,
        _status(grpc.StatusCode.UNAVAILABLE, "STATE_STORE_UNAVAILABLE", "redis is down"),
        grpc.StatusCode.UNAVAILABLE,
        "redis is down",
    )
    _, second, rpc = wire.take("SubmitJob")
    rpc.terminate(
        parser_service_pb2.SubmitJobResponse(job=_job("j2", job_pb2.STATE_QUEUED)),
        (REPLICA,),
        grpc.StatusCode.OK,
        "",
    )
    answer = pending.result(timeout=10)
    assert answer.job.job_id == "j2" and answer.served_by == ("parser-0/4242",)
    assert second.request_id == first.request_id and uuid.UUID(first.request_id)
    assert second.content == first.content == b"%PDF-1.7 x"


@pytest.mark.parametrize(
    ("code", "reason", "details"),
    [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "DOCUMENT_TOO_LARGE", "the file is over 1 MiB"),
        (grpc.StatusCode.INVALID_ARGUMENT, "UNSUPPORTED_FORMAT", "not a document"),
        (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_INVALID", "unknown key"),
        (grpc.StatusCode.INTERNAL, "", "boom"),
    ],
)
def test_failures_that_cannot_succeed_are_final_at_once(
    wire: Wire, code: grpc.StatusCode, reason: str, details: str
) -> None:
    pending = wire.start(lambda c: c.submit("a.pdf", b"%PDF-1.7 x"))
    trailers = _status(code, reason, details) if reason else (REPLICA,)
    wire.take("SubmitJob")[2].terminate(None, trailers, code, details)
    with pytest.raises(DocparseError) as caught:
        pending.result(timeout=10)
    assert (caught.value.code, caught.value.reason) == (code, reason)
    assert wire.slept == []


def test_grpcs_own_size_limit_is_message_too_large_not_a_retry(wire: Wire) -> None:
    pending = wire.start(lambda c: c.submit("big.pdf", b"%PDF-1.7 x"))
    wire.take("SubmitJob")[2].terminate(
        None,
        (),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "Sent message larger than max (70000000 vs. 68157440)",
    )
    with pytest.raises(DocparseError) as caught:
        pending.result(timeout=10)
    assert caught.value.reason == "MESSAGE_TOO_LARGE"
    assert caught.value.metadata == {"target": TARGET}
    assert "UploadBatch" in caught.value.message
    assert wire.slept == []
