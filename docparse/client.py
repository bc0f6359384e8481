"""A small synchronous client for docparse.v1 (the full SDK grows here).

- `watch()` is read-only: it follows WatchJob and, when a stream breaks, resumes on a new call
  (any replica) with `after_version`, so it never sees a version twice or goes backwards.
- `result()` downloads the reading package and checks its sha256.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc

from docparse.errors import DocparseError
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc, reading_package_pb2

DEFAULT_TARGET = "127.0.0.1:50050"
TERMINAL = (job_pb2.STATE_SUCCEEDED, job_pb2.STATE_FAILED, job_pb2.STATE_CANCELLED)
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL)


def default_target() -> str:
    return os.environ.get("DOCPARSE_TARGET", DEFAULT_TARGET)


@dataclass
class Answer:
    """A response with the `x-served-by` values of its trailers: the parser_svc replica that
    answered first, then (through a gateway) the gateway."""

    job: job_pb2.Job
    served_by: tuple[str, ...]


def served_by(call: grpc.Call) -> tuple[str, ...]:
    return tuple(str(v) for k, v in (call.trailing_metadata() or ()) if k == "x-served-by")


class Client:
    def __init__(self, target: str | None = None, *, timeout_s: float = 30.0) -> None:
        self.target = target or default_target()
        self.timeout_s = timeout_s
        limit = 65 * 1024 * 1024
        self.channel = grpc.insecure_channel(
            self.target,
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
            ],
        )
        self.stub = parser_service_pb2_grpc.ParserServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, file_name: str, content: bytes, *, request_id: str = "") -> Answer:
        request = parser_service_pb2.SubmitJobRequest(
            file_name=file_name, content=content, request_id=request_id
        )
        try:
            response, call = self.stub.SubmitJob.with_call(request, timeout=self.timeout_s)
        except grpc.RpcError as err:
            raise DocparseError.from_rpc_error(err) from err
        return Answer(response.job, served_by(call))

    def status(self, job_id: str) -> Answer:
        try:
            response, call = self.stub.GetStatus.with_call(
                parser_service_pb2.GetStatusRequest(job_id=job_id), timeout=self.timeout_s
            )
        except grpc.RpcError as err:
            raise DocparseError.from_rpc_error(err) from err
        return Answer(response.job, served_by(call))

    def watch(
        self, job_id: str, *, after_version: int = 0, max_retries: int = 10
    ) -> Iterator[job_pb2.Job]:
        """Yields each new record until the terminal one, resuming broken streams."""
        last = after_version
        failures = 0
        while True:
            stream = self.stub.WatchJob(
                parser_service_pb2.WatchJobRequest(job_id=job_id, after_version=last)
            )
            try:
                for event in stream:
                    if not event.HasField("job") or event.job.version <= last:
                        continue
                    failures = 0
                    last = event.job.version
                    yield event.job
                    if event.job.state in TERMINAL:
                        return
                # The stream ended without a terminal record (e.g. a draining replica).
            except grpc.RpcError as err:
                if err.code() not in RETRYABLE or failures >= max_retries:
                    raise DocparseError.from_rpc_error(err) from err
            finally:
                stream.cancel()
            failures += 1
            time.sleep(min(0.1 * 2**failures, 2.0))

    def result(self, job_id: str) -> reading_package_pb2.ReadingPackage:
        """Downloads the reading package of a SUCCEEDED job and verifies its sha256."""
        chunks: list[bytes] = []
        ref = job_pb2.ResultRef()
        try:
            for message in self.stub.GetResult(
                parser_service_pb2.GetResultRequest(job_id=job_id), timeout=self.timeout_s
            ):
                if message.HasField("result"):
                    ref.CopyFrom(message.result)
                chunks.append(message.chunk)
        except grpc.RpcError as err:
            raise DocparseError.from_rpc_error(err) from err
        data = b"".join(chunks)
        digest = hashlib.sha256(data).hexdigest()
        if digest != ref.sha256 or len(data) != ref.size_bytes:
            raise DocparseError(
                grpc.StatusCode.DATA_LOSS,
                "CHECKSUM_MISMATCH",
                f"result of {job_id}: got {len(data)} bytes sha256 {digest}, "
                f"expected {ref.size_bytes} bytes sha256 {ref.sha256}",
            )
        return reading_package_pb2.ReadingPackage.FromString(data)
