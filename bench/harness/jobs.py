"""Jobs through a stack with the blocking gRPC stub: submit, then follow WatchJob to the
terminal record; `metadata` is sent with every call (a stack with API keys: the key)."""

from __future__ import annotations

import grpc

from docparse.v1 import job_pb2, parser_service_pb2
from tests.helpers import stub

Metadata = tuple[tuple[str, str | bytes], ...]


def wait_terminal(
    address: str, job_id: str, timeout: float = 600, metadata: Metadata = ()
) -> job_pb2.Job:
    """Follows WatchJob until the terminal record (the stream ends right after it)."""
    channel, s = stub(address)
    with channel:
        last = job_pb2.Job()
        request = parser_service_pb2.WatchJobRequest(job_id=job_id)
        for event in s.WatchJob(request, timeout=timeout, metadata=metadata):
            if event.HasField("job"):
                last = event.job
        return last


def finished(address: str, job_id: str, metadata: Metadata = ()) -> job_pb2.Job:
    """The job's terminal record, resuming the watch where a stream ends UNAVAILABLE (a
    connection reaching its maximum age on a loaded machine)."""
    while True:
        try:
            return wait_terminal(address, job_id, 600, metadata)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAVAILABLE:
                raise


def run_job(
    address: str,
    request: parser_service_pb2.SubmitJobRequest,
    *,
    resume: bool = False,
    metadata: Metadata = (),
) -> job_pb2.Job:
    """Submits one job and returns its terminal record; `resume`: through `finished`."""
    channel, s = stub(address)
    with channel:
        job = s.SubmitJob(request, timeout=60, metadata=metadata).job
    if resume:
        return finished(address, job.job_id, metadata)
    return wait_terminal(address, job.job_id, 600, metadata)
