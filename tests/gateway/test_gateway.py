"""The gateway forwards any docparse.v1 call generically and adds what an edge adds."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from tests.conftest import make_stack
from tests.helpers import make_pdf, rpc_error, served_by, stub


def test_gateway_serves_its_own_health(big_stack: LocalStack) -> None:
    for address in big_stack.gateway_addresses:
        with grpc.insecure_channel(address) as channel:
            reply, call = health_pb2_grpc.HealthStub(channel).Check.with_call(
                health_pb2.HealthCheckRequest(service="docparse.v1.ParserService"), timeout=5
            )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert len(served_by(call)) == 1  # answered by the gateway itself, not forwarded


def test_sync_answer_when_the_job_finishes_within_the_wait(big_stack: LocalStack) -> None:
    channel, s = stub(big_stack.gateway_addresses[0])
    with channel:
        reply = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name="small.pdf", content=make_pdf(2), wait_timeout_ms=60_000
            ),
            timeout=60,
        )
    assert reply.job.state == job_pb2.STATE_SUCCEEDED
    assert reply.job.result.page_count == 2


@pytest.fixture(scope="module")
def api_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """API replicas without queue workers: submitted jobs stay QUEUED."""
    with make_stack(
        tmp_path_factory.mktemp("api-only"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_ROLE": "api"},
    ) as stack:
        yield stack


def test_client_deadline_travels_through_the_gateway(api_only: LocalStack) -> None:
    """The server bounds its wait by the caller's deadline, so the async answer arrives before
    the 1.5 s deadline. Had the gateway dropped the deadline, the server would wait 10 min and
    the client would get DEADLINE_EXCEEDED instead."""
    channel, s = stub(api_only.gateway_addresses[0])
    with channel:
        started = time.monotonic()
        reply = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name="waits.pdf", content=make_pdf(1), wait_timeout_ms=600_000
            ),
            timeout=1.5,
        )
        elapsed = time.monotonic() - started
    assert elapsed < 1.5
    assert reply.job.state == job_pb2.STATE_QUEUED


def test_watch_of_an_idle_job_sends_heartbeats(api_only: LocalStack) -> None:
    channel, s = stub(api_only.gateway_addresses[0])
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name="idle.pdf", content=make_pdf(1)),
            timeout=5,
        ).job
        stream = s.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job.job_id), timeout=30)
        first = next(stream)
        second = next(stream)  # heartbeat interval is 2 s in test stacks
        stream.cancel()
    assert first.job.state == job_pb2.STATE_QUEUED
    assert second.HasField("heartbeat") and second.heartbeat.last_version == first.job.version


def test_unknown_method_is_unimplemented(big_stack: LocalStack) -> None:
    with grpc.insecure_channel(big_stack.gateway_addresses[0]) as channel:
        call = channel.unary_unary("/docparse.v1.ParserService/NoSuchMethod")
        err = rpc_error(lambda: call(b"", timeout=5))
    assert err.code == grpc.StatusCode.UNIMPLEMENTED


def test_sigterm_on_a_gateway_ends_its_streams_retryably_at_once(api_only: LocalStack) -> None:
    gateway = api_only.gateways[0]
    channel, s = stub(gateway.address)
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name="idle.pdf", content=make_pdf(1)),
            timeout=5,
        ).job
        streams = [
            s.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job.job_id), timeout=60)
            for _ in range(5)
        ]
        for stream in streams:
            assert next(stream).job.state == job_pb2.STATE_QUEUED
        started = time.monotonic()
        gateway.signal(signal.SIGTERM)
        for stream in streams:
            err = rpc_error(lambda stream=stream: list(stream))
            assert (err.code, err.reason) == (grpc.StatusCode.UNAVAILABLE, "SERVER_SHUTTING_DOWN")
        # Well inside the 20 s grace: the gateway did not wait for the idle streams to end.
        assert time.monotonic() - started < 5
    assert gateway.proc is not None and gateway.proc.wait(30) == 0
    api_only.restart(gateway)
