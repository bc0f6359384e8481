"""Jobs through a stack with the blocking gRPC stub: submit, then follow WatchJob to the
terminal record."""

from __future__ import annotations

import grpc

from docparse.v1 import job_pb2, parser_service_pb2
from tests.helpers import stub, wait_terminal


def finished(address: str, job_id: str) -> job_pb2.Job:
    """The job's terminal record, resuming the watch where a stream ends UNAVAILABLE (a
    connection reaching its maximum age on a loaded machine)."""
    while True:
        try:
            return wait_terminal(address, job_id, timeout=600)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE:
                raise


def run_job(
    address: str, request: parser_service_pb2.SubmitJobRequest, *, resume: bool = False
) -> job_pb2.Job:
    """Submits one job and returns its terminal record; `resume`: through `finished`."""
    channel, s = stub(address)
    with channel:
        job = s.SubmitJob(request, timeout=60).job
    if resume:
        return finished(address, job.job_id)
    return wait_terminal(address, job.job_id, timeout=600)
