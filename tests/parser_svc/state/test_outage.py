"""Redis goes away under a running stack: clients hear UNAVAILABLE (never NOT_FOUND) within
their deadline, nothing is created, and the same processes recover when Redis returns."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import redis

from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from tests.conftest import make_stack
from tests.fixtures import wordperfect
from tests.helpers import eventually, make_pdf, rpc_error, stub, submit, wait_terminal

DEADLINE_S = 5.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(tmp_path_factory.mktemp("outage"), replicas=2, gateways=1) as running:
        yield running


@pytest.fixture(scope="module")
def short_retention(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """Finished jobs are kept 2 s, so expiry happens within a test."""
    with make_stack(
        tmp_path_factory.mktemp("retention"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_RETENTION_S": "2"},
    ) as running:
        yield running


def _job_keys(stack: LocalStack) -> set[bytes]:
    client = redis.Redis.from_url(stack.redis_url)
    try:
        return set(client.scan_iter(match="docparse:test:job:*", count=1000))
    finally:
        client.close()


def test_outage_answers_unavailable_and_recovers_without_restart(stack: LocalStack) -> None:
    assert stack.redis is not None
    gateway = stack.gateway_addresses[0]
    done = submit(gateway, make_pdf(2), "before.pdf")
    assert wait_terminal(gateway, done.job_id).state == job_pb2.STATE_SUCCEEDED
    pids = [child.pid for child in stack.parsers + stack.gateways]
    keys_before = _job_keys(stack)

    stack.redis.stop()
    try:
        for address in [gateway, *stack.parser_addresses]:
            channel, s = stub(address)
            with channel:
                calls = {
                    "GetStatus": lambda s=s: s.GetStatus(
                        parser_service_pb2.GetStatusRequest(job_id=done.job_id),
                        timeout=DEADLINE_S,
                    ),
                    "WatchJob": lambda s=s: list(
                        s.WatchJob(
                            parser_service_pb2.WatchJobRequest(job_id=done.job_id),
                            timeout=DEADLINE_S,
                        )
                    ),
                    "SubmitJob": lambda s=s: s.SubmitJob(
                        parser_service_pb2.SubmitJobRequest(
                            file_name="during.pdf", content=make_pdf(1)
                        ),
                        timeout=DEADLINE_S,
                    ),
                }
                for name, call in calls.items():
                    started = time.monotonic()
                    err = rpc_error(call)
                    elapsed = time.monotonic() - started
                    assert err.code == grpc.StatusCode.UNAVAILABLE, (name, address, err)
                    assert err.reason == "STATE_STORE_UNAVAILABLE", (name, address, err)
                    assert elapsed < DEADLINE_S, (name, address, elapsed)
    finally:
        stack.redis.start()

    assert _job_keys(stack) == keys_before  # no job was created during the outage
    # The same processes answer normally again: old jobs are there (AOF), new ones run.
    assert [child.pid for child in stack.parsers + stack.gateways] == pids
    assert all(child.alive() for child in stack.parsers + stack.gateways)
    channel, s = stub(gateway)
    with channel:
        again = s.GetStatus(parser_service_pb2.GetStatusRequest(job_id=done.job_id), timeout=10)
    assert again.job.state == job_pb2.STATE_SUCCEEDED
    after = submit(gateway, make_pdf(3), "after.pdf")
    assert wait_terminal(gateway, after.job_id).state == job_pb2.STATE_SUCCEEDED


def _status_error(
    s: parser_service_pb2_grpc.ParserServiceStub, job_id: str
) -> DocparseError | None:
    """The error GetStatus answers for `job_id`, or None while it still answers a record."""
    try:
        s.GetStatus(parser_service_pb2.GetStatusRequest(job_id=job_id), timeout=5)
    except grpc.RpcError as err:
        return DocparseError.from_rpc_error(err)
    return None


def test_unknown_job_is_not_found_and_expired_job_says_so(short_retention: LocalStack) -> None:
    gateway = short_retention.gateway_addresses[0]
    channel, s = stub(gateway)
    with channel:
        missing = rpc_error(
            lambda: s.GetStatus(parser_service_pb2.GetStatusRequest(job_id="0" * 32), timeout=5)
        )
        assert (missing.code, missing.reason) == (grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND")

        job = submit(gateway, make_pdf(1), "short-lived.pdf")
        final = wait_terminal(gateway, job.job_id)
        assert final.state == job_pb2.STATE_SUCCEEDED
        # Retention is 2 s in this stack: poll until the record is gone (a condition).
        expired = eventually(lambda: _status_error(s, job.job_id), 30, "the record to expire")
    assert (expired.code, expired.reason) == (grpc.StatusCode.NOT_FOUND, "JOB_EXPIRED")
    expire_ms = int(expired.metadata["expire_time_ms"])
    assert expire_ms == final.expire_time.ToMilliseconds()


def test_bad_requests_get_precise_errors(stack: LocalStack, tmp_path: Path) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        empty = rpc_error(lambda: s.SubmitJob(parser_service_pb2.SubmitJobRequest(), timeout=5))
        assert (empty.code, empty.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_CONTENT")
        text = rpc_error(
            lambda: s.SubmitJob(
                parser_service_pb2.SubmitJobRequest(file_name="x.pdf", content=wordperfect()),
                timeout=5,
            )
        )
        assert (text.code, text.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "UNSUPPORTED_FORMAT")
        bad_id = rpc_error(
            lambda: s.GetStatus(parser_service_pb2.GetStatusRequest(job_id="../etc"), timeout=5)
        )
        assert (bad_id.code, bad_id.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_JOB_ID")


def test_hung_redis_is_unavailable_within_the_deadline(stack: LocalStack) -> None:
    """A Redis that accepts connections but never answers (SIGSTOP) must not hang calls."""
    assert stack.redis is not None and stack.redis.proc is not None
    gateway = stack.gateway_addresses[0]
    job = submit(gateway, make_pdf(1), "hang.pdf")
    assert wait_terminal(gateway, job.job_id).state == job_pb2.STATE_SUCCEEDED
    stack.redis.proc.send_signal(signal.SIGSTOP)
    try:
        channel, s = stub(gateway)
        with channel:
            started = time.monotonic()
            err = rpc_error(
                lambda: s.GetStatus(
                    parser_service_pb2.GetStatusRequest(job_id=job.job_id), timeout=DEADLINE_S
                )
            )
            elapsed = time.monotonic() - started
    finally:
        stack.redis.proc.send_signal(signal.SIGCONT)
    assert (err.code, err.reason) == (grpc.StatusCode.UNAVAILABLE, "STATE_STORE_UNAVAILABLE")
    assert elapsed < DEADLINE_S
    channel, s = stub(gateway)
    with channel:
        reply = s.GetStatus(parser_service_pb2.GetStatusRequest(job_id=job.job_id), timeout=10)
    assert reply.job.state == job_pb2.STATE_SUCCEEDED
