"""The synchronous Python SDK.

    with Client("127.0.0.1:50050") as client:
        job = client.parse(Path("report.pdf"))          # submit + wait; raises on failure
        package = client.result(job.job_id)             # downloaded and sha256-checked

- `submit()` never creates duplicates: it always sends a request_id (one is made up if you
  give none) and retries a failed call only with that same id.
- A SubmitJob answer that is already terminal (the sync answer) is used as is, with no status
  call; one still queued or running (the async answer) is waited for.
- `wait()` is read-only (see docparse.waiting): WatchJob with resume, GetStatus polling as a
  fallback, a deadline that raises WaitTimeout with the job id and last state, JobFailed with
  the reason for FAILED/CANCELLED jobs, and NOT_FOUND as final (`err.expired` tells why).
- Everything goes through one Transport (docparse.transport), the seam tests replace.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from docparse.errors import DocparseError
from docparse.results import ResultAssembler, check_submit_answer
from docparse.transport import GrpcTransport, Transport
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from docparse.waiting import TERMINAL, TRANSIENT, Action, Waiter, WaitPolicy

DEFAULT_TARGET = "127.0.0.1:50050"


def default_target() -> str:
    return os.environ.get("DOCPARSE_TARGET", DEFAULT_TARGET)


@dataclass
class Answer:
    """A response with the `x-served-by` values of its trailers: the parser_svc replica that
    answered first, then (through a gateway) the gateway."""

    job: job_pb2.Job
    served_by: tuple[str, ...]


class Client:
    def __init__(
        self,
        target: str | None = None,
        *,
        api_key: str | None = None,
        tls_root_cert: bytes | None = None,
        timeout_s: float = 30.0,
        policy: WaitPolicy | None = None,
        transport: Transport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target or default_target()
        self.timeout_s = timeout_s  # per call
        self.policy = policy or WaitPolicy()
        key = os.environ.get("DOCPARSE_API_KEY", "") if api_key is None else api_key
        self.transport = transport or GrpcTransport(self.target, key, tls_root_cert)
        self._sleep = sleep
        self._clock = clock

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- submitting ----------------------------------------------------------------------

    def submit(
        self,
        file_name: str,
        content: bytes,
        *,
        request_id: str = "",
        password: str = "",
        wait_timeout_ms: int = 0,
    ) -> Answer:
        """Submits once, however often the call itself has to be retried."""
        request = parser_service_pb2.SubmitJobRequest(
            file_name=file_name,
            content=content,
            request_id=request_id or uuid.uuid4().hex,
            password=password,
            wait_timeout_ms=wait_timeout_ms,
        )
        deadline = self._clock() + self.policy.timeout_s
        delay = self.policy.backoff_s
        while True:
            try:
                response, replicas = self.transport.call("SubmitJob", request, self.timeout_s)
                return Answer(check_submit_answer(response), replicas)
            except DocparseError as err:
                if err.code not in TRANSIENT or self._clock() + delay > deadline:
                    raise
            self._sleep(delay)
            delay = min(delay * 2, self.policy.max_backoff_s)

    def parse(
        self,
        source: Path | bytes,
        *,
        file_name: str = "",
        request_id: str = "",
        password: str = "",
        policy: WaitPolicy | None = None,
    ) -> job_pb2.Job:
        """Submits and waits: the SUCCEEDED record, or JobFailed / WaitTimeout / DocparseError."""
        if isinstance(source, Path):
            content, file_name = source.read_bytes(), file_name or source.name
        else:
            content = source
        answer = self.submit(file_name, content, request_id=request_id, password=password)
        return self.wait(answer.job, policy=policy)

    # --- reading -------------------------------------------------------------------------

    def status(self, job_id: str) -> Answer:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        response, replicas = self.transport.call("GetStatus", request, self.timeout_s)
        return Answer(response.job, replicas)

    def wait(self, job: job_pb2.Job | str, *, policy: WaitPolicy | None = None) -> job_pb2.Job:
        """Waits for the job to end (read-only) and returns the SUCCEEDED record."""
        waiter = Waiter(
            job if isinstance(job, str) else job.job_id, policy or self.policy, self._clock()
        )
        if isinstance(job, job_pb2.Job):
            waiter.observe(job)  # a terminal answer needs no further call
        while (action := waiter.next_action()) is not Action.DONE:
            left = waiter.check_deadline(self._clock())
            try:
                if action is Action.STREAM:
                    for record in self._watch_once(waiter.job_id, waiter.after_version, left):
                        waiter.observe(record)
                    continue  # the stream ended (after the terminal record, or a drain)
                waiter.observe(self.status(waiter.job_id).job)
                if not waiter.finished:
                    self._sleep(min(self.policy.poll_interval_s, max(0.0, left)))
            except DocparseError as err:
                self._sleep(min(waiter.on_error(err), max(0.0, left)))
        return waiter.outcome()

    def _watch_once(
        self, job_id: str, after_version: int, timeout: float | None
    ) -> Iterator[job_pb2.Job]:
        request = parser_service_pb2.WatchJobRequest(job_id=job_id, after_version=after_version)
        for event in self.transport.stream("WatchJob", request, timeout):
            if event.HasField("job"):
                yield event.job

    def watch(
        self, job_id: str, *, after_version: int = 0, max_retries: int = 10
    ) -> Iterator[job_pb2.Job]:
        """Every new record until the terminal one, resuming broken streams (on any replica)."""
        last = after_version
        failures = 0
        while True:
            try:
                for job in self._watch_once(job_id, last, timeout=None):
                    if job.version <= last:
                        continue
                    failures, last = 0, job.version
                    yield job
                    if job.state in TERMINAL:
                        return
            except DocparseError as err:
                if err.code not in TRANSIENT or failures >= max_retries:
                    raise
            failures += 1
            self._sleep(min(self.policy.backoff_s * 2**failures, self.policy.max_backoff_s))

    def result(self, job_id: str) -> reading_package_pb2.ReadingPackage:
        """The reading package of a SUCCEEDED job, checked against its sha256."""
        return self._download(job_id).package()

    def download_result(self, job_id: str, path: Path) -> job_pb2.ResultRef:
        """Writes the serialized package to `path`, verified by sha256 and size on disk."""
        return self._download(job_id).write(path)

    def _download(self, job_id: str) -> ResultAssembler:
        assembler = ResultAssembler(job_id)
        request = parser_service_pb2.GetResultRequest(job_id=job_id)
        for message in self.transport.stream("GetResult", request, self.timeout_s * 10):
            assembler.add(message)
        return assembler

    def cancel(self, job_id: str) -> job_pb2.Job:
        request = parser_service_pb2.CancelJobRequest(job_id=job_id)
        response, _ = self.transport.call("CancelJob", request, self.timeout_s)
        return response.job  # type: ignore[no-any-return]

    # --- batches -------------------------------------------------------------------------

    def submit_batch(
        self, files: list[tuple[str, bytes]], *, request_id: str = ""
    ) -> parser_service_pb2.Batch:
        request = parser_service_pb2.CreateBatchRequest(
            files=[parser_service_pb2.BatchFile(file_name=n, content=c) for n, c in files],
            request_id=request_id or uuid.uuid4().hex,
        )
        delay = self.policy.backoff_s
        for _ in range(6):
            try:
                response, _ = self.transport.call("CreateBatch", request, self.timeout_s)
                return response.batch  # type: ignore[no-any-return]
            except DocparseError as err:
                if err.code not in TRANSIENT:
                    raise
            self._sleep(delay)
            delay = min(delay * 2, self.policy.max_backoff_s)
        raise DocparseError(grpc.StatusCode.UNAVAILABLE, "RETRIES_EXHAUSTED", "CreateBatch")

    def batch(self, batch_id: str) -> parser_service_pb2.Batch:
        request = parser_service_pb2.GetBatchRequest(batch_id=batch_id)
        response, _ = self.transport.call("GetBatch", request, self.timeout_s)
        return response.batch  # type: ignore[no-any-return]

    def watch_batch(
        self, batch_id: str, *, max_retries: int = 10
    ) -> Iterator[parser_service_pb2.Batch]:
        """Every new state of the batch until all its files ended, resuming broken streams."""
        last, failures = 0, 0
        while True:
            request = parser_service_pb2.WatchBatchRequest(batch_id=batch_id, after_version=last)
            try:
                for event in self.transport.stream("WatchBatch", request, None):
                    if event.HasField("batch") and event.batch.version > last:
                        failures, last = 0, event.batch.version
                        yield event.batch
                        if event.batch.completed >= event.batch.total:
                            return
            except DocparseError as err:
                if err.code not in TRANSIENT or failures >= max_retries:
                    raise
            failures += 1
            self._sleep(min(self.policy.backoff_s * 2**failures, self.policy.max_backoff_s))
