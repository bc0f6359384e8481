"""The motivating bug, disproved: any replica answers any call about any job."""

from __future__ import annotations

import grpc

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from tests.helpers import make_pdf, served_by, stub, submit, wait_terminal

POLLS = 20


def _poll(address: str, job_id: str) -> tuple[job_pb2.Job, list[str]]:
    """One GetStatus on a brand-new channel (no connection reuse, no stickiness)."""
    channel, s = stub(address)
    with channel:
        response, call = s.GetStatus.with_call(
            parser_service_pb2.GetStatusRequest(job_id=job_id), timeout=10
        )
    return response.job, served_by(call)


def _poll_during_and_after(
    addresses: list[str], watch_address: str
) -> list[tuple[job_pb2.Job, list[str]]]:
    job = submit(addresses[0], make_pdf(40), "forty.pdf")
    results = [_poll(addresses[i % len(addresses)], job.job_id) for i in range(POLLS // 2)]
    # The second half strictly after the job ended: wait for the terminal record, not a clock.
    assert wait_terminal(watch_address, job.job_id).state == job_pb2.STATE_SUCCEEDED
    results += [_poll(addresses[i % len(addresses)], job.job_id) for i in range(POLLS // 2)]
    return results


def _assert_history(results: list[tuple[job_pb2.Job, list[str]]], parser_values: set[str]) -> None:
    assert len(results) == POLLS
    versions = [job.version for job, _ in results]
    assert versions == sorted(versions), f"versions went down: {versions}"
    assert results[-1][0].state == job_pb2.STATE_SUCCEEDED
    answered = {value for _, values in results for value in values if value in parser_values}
    assert len(answered) >= 3, f"only {answered} answered"


def _parser_identities(stack: LocalStack) -> set[str]:
    identities = set()
    for address in stack.parser_addresses:
        channel, s = stub(address)
        with channel:
            try:
                s.GetStatus.with_call(
                    parser_service_pb2.GetStatusRequest(job_id="probe"), timeout=5
                )
            except grpc.RpcError as err:
                values = [v for k, v in err.trailing_metadata() if k == "x-served-by"]
                identities.add(str(values[0]))
    assert len(identities) == 4
    return identities


def test_polls_through_alternating_gateways_all_succeed(big_stack: LocalStack) -> None:
    parsers = _parser_identities(big_stack)
    results = _poll_during_and_after(big_stack.gateway_addresses, big_stack.gateway_addresses[0])
    _assert_history(results, parsers)
    for _, values in results:
        # The replica's identity first, then the gateway's own.
        assert values[0] in parsers and values[-1] not in parsers


def test_polls_straight_to_each_replica_all_succeed(big_stack: LocalStack) -> None:
    parsers = _parser_identities(big_stack)
    results = _poll_during_and_after(big_stack.parser_addresses, big_stack.parser_addresses[1])
    _assert_history(results, parsers)
