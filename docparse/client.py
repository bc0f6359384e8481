"""The synchronous Python SDK.

    with Client("127.0.0.1:50050") as client:
        job = client.parse(Path("report.pdf"))          # submit + wait; raises on failure
        package = client.result(job.job_id)             # downloaded and sha256-checked

- `submit()` never creates duplicates: it always sends a request_id (one is made up if you
  give none) and retries a failed call only with that same id.
- Failed calls are retried only when a retry can succeed (docparse.retries: UNAVAILABLE with
  jittered backoff for 30 s, a rate limit after the delay it names; never DOCUMENT_TOO_LARGE,
  INVALID_ARGUMENT, auth errors or INTERNAL). Each retry is logged on `docparse.client`.
- A SubmitJob answer that is already terminal (the sync answer) is used as is, with no status
  call; one still queued or running (the async answer) is waited for.
- `wait()` is read-only (see docparse.waiting): WatchJob with resume, GetStatus polling as a
  fallback, a deadline that raises WaitTimeout with the job id and last state, JobFailed with
  the reason for FAILED/CANCELLED jobs, and NOT_FOUND as final (`err.expired` tells why).
- Everything goes through one Transport (docparse.transport), the seam tests replace.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from docparse.errors import DocparseError
from docparse.results import AssetChunks, ResultAssembler, check_submit_answer
from docparse.retries import Retrier
from docparse.transport import AnswerObserver, GrpcTransport, Transport
from docparse.uploads import UPLOAD_MIN_BYTES_PER_S, BatchUpload
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from docparse.waiting import (
    Action,
    BatchWaiter,
    JobWaiter,
    R,
    Waiter,
    WaitPolicy,
)

T = TypeVar("T")

DEFAULT_TARGET = "127.0.0.1:50050"


def default_target() -> str:
    return os.environ.get("DOCPARSE_TARGET", DEFAULT_TARGET)


@dataclass
class Answer:
    """A response with the `x-served-by` values of its trailers: the parser_svc replica that
    answered first, then (through a gateway) the gateway."""

    job: job_pb2.Job
    served_by: tuple[str, ...]


@dataclass(frozen=True)
class Feed(Generic[R]):
    """How to follow one kind of record, without I/O (both clients' shells do the calls): the
    stream to open after a version, the record a stream message carries (None for a
    heartbeat), and the plain read that polling makes instead."""

    method: str
    request: Callable[[int], Any]
    record: Callable[[Any], R | None]
    poll_method: str
    poll_request: Any
    poll_record: Callable[[Any], R]


def job_feed(job_id: str) -> Feed[job_pb2.Job]:
    return Feed(
        "WatchJob",
        lambda after: parser_service_pb2.WatchJobRequest(job_id=job_id, after_version=after),
        lambda event: event.job if event.HasField("job") else None,
        "GetStatus",
        parser_service_pb2.GetStatusRequest(job_id=job_id),
        lambda response: response.job,
    )


def batch_feed(batch_id: str) -> Feed[parser_service_pb2.Batch]:
    return Feed(
        "WatchBatch",
        lambda after: parser_service_pb2.WatchBatchRequest(batch_id=batch_id, after_version=after),
        lambda event: event.batch if event.HasField("batch") else None,
        "GetBatch",
        parser_service_pb2.GetBatchRequest(batch_id=batch_id),
        lambda response: response.batch,
    )


def batch_request(
    files: list[tuple[str, bytes]], request_id: str, languages: Sequence[str]
) -> parser_service_pb2.CreateBatchRequest:
    """One CreateBatch message with every file (small batches: gRPC's message size limit)."""
    return parser_service_pb2.CreateBatchRequest(
        files=[parser_service_pb2.BatchFile(file_name=n, content=c) for n, c in files],
        request_id=request_id or uuid.uuid4().hex,
        languages=list(languages),
    )


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
        on_answer: AnswerObserver | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`on_answer(method, served_by)` is told who answered every call, streams and errors
        included (the `x-served-by` values: the replica, then the gateway). `rng` draws the
        retries' jitter (tests pass a seeded one)."""
        self.target = target or default_target()
        self.timeout_s = timeout_s  # per call
        self.policy = policy or WaitPolicy()
        key = os.environ.get("DOCPARSE_API_KEY", "") if api_key is None else api_key
        self.transport = transport or GrpcTransport(self.target, key, tls_root_cert, on_answer)
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- submitting ----------------------------------------------------------------------

    def _retried(self, method: str, attempt: Callable[[], T]) -> T:
        """`attempt()` until it succeeds or docparse.retries says the failure is final."""
        retrier = Retrier(method, self.policy, self._clock(), self._rng)
        while True:
            try:
                return attempt()
            except DocparseError as err:
                delay = retrier.on_error(err, self._clock())
            self._sleep(delay)

    def _call(self, method: str, request: Any, deadline_s: float | None = None) -> Any:
        """A unary call with retries: the response and its `x-served-by` values."""
        timeout = self.timeout_s if deadline_s is None else deadline_s
        return self._retried(method, lambda: self.transport.call(method, request, timeout))

    def submit(
        self,
        file_name: str,
        content: bytes,
        *,
        request_id: str = "",
        password: str = "",
        wait_timeout_ms: int = 0,
        languages: list[str] | tuple[str, ...] = (),
        callback: parser_service_pb2.Callback | None = None,
    ) -> Answer:
        """Submits once, however often the call itself has to be retried (same request_id).
        `wait_timeout_ms`: the server may wait that long for the job to end before answering
        (the sync answer); `languages`: BCP-47 hints for OCR ("en", "zh-Hant"); `callback`:
        a signed webhook when the job ends, `Callback(url=..., secret_name=...)` naming a secret
        the tenant registered (`from docparse.v1.parser_service_pb2 import Callback`)."""
        request = parser_service_pb2.SubmitJobRequest(
            file_name=file_name,
            content=content,
            request_id=request_id or uuid.uuid4().hex,
            password=password,
            wait_timeout_ms=wait_timeout_ms,
            languages=list(languages),
            callback=callback,
        )
        deadline = self.timeout_s + wait_timeout_ms / 1000
        response, replicas = self._call("SubmitJob", request, deadline)
        return Answer(check_submit_answer(response), replicas)

    def parse(
        self,
        source: Path | bytes,
        *,
        file_name: str = "",
        request_id: str = "",
        password: str = "",
        languages: list[str] | tuple[str, ...] = (),
        policy: WaitPolicy | None = None,
    ) -> job_pb2.Job:
        """Submits and waits: the SUCCEEDED record, or JobFailed / WaitTimeout / DocparseError."""
        if isinstance(source, Path):
            content, file_name = source.read_bytes(), file_name or source.name
        else:
            content = source
        answer = self.submit(
            file_name, content, request_id=request_id, password=password, languages=languages
        )
        return self.wait(answer.job, policy=policy)

    # --- reading -------------------------------------------------------------------------

    def status(self, job_id: str) -> Answer:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        response, replicas = self._call("GetStatus", request)
        return Answer(response.job, replicas)

    def wait(self, job: job_pb2.Job | str, *, policy: WaitPolicy | None = None) -> job_pb2.Job:
        """Waits for the job to end (read-only) and returns the SUCCEEDED record."""
        job_id = job if isinstance(job, str) else job.job_id
        waiter = JobWaiter(
            job_id, policy or self.policy, self._clock(), job_pb2.Job(), rng=self._rng
        )
        if isinstance(job, job_pb2.Job):
            waiter.observe(job)  # a terminal answer needs no further call
        for _ in self._follow(waiter, job_feed(job_id)):
            pass
        return waiter.outcome()

    def watch(
        self, job_id: str, *, after_version: int = 0, policy: WaitPolicy | None = None
    ) -> Iterator[job_pb2.Job]:
        """Every record newer than `after_version` until the terminal one, resuming broken
        streams (on any replica) and polling when streaming fails, within the policy's
        limits: WaitTimeout after `timeout_s`; OUT_OF_RANGE AFTER_VERSION_AHEAD at once when
        `after_version` is beyond the job's version. A job that already ended at
        `after_version` yields nothing."""
        waiter = JobWaiter(
            job_id,
            policy or self.policy,
            self._clock(),
            job_pb2.Job(),
            cursor=after_version,
            rng=self._rng,
        )
        yield from self._follow(waiter, job_feed(job_id))

    def _follow(self, waiter: Waiter[R], feed: Feed[R]) -> Iterator[R]:
        """The waiting loop (decisions in docparse.waiting): yields each new record."""
        while (action := waiter.next_action()) is not Action.DONE:
            left = waiter.check_deadline(self._clock())
            try:
                if action is Action.STREAM:
                    progressed = False
                    for message in self.transport.stream(
                        feed.method, feed.request(waiter.after_version), left
                    ):
                        waiter.heard()
                        record = feed.record(message)
                        if record is not None and waiter.observe(record):
                            progressed = True
                            yield record
                    delay = waiter.on_stream_end(progressed)
                else:
                    response, _ = self.transport.call(
                        feed.poll_method, feed.poll_request, self.timeout_s
                    )
                    record = feed.poll_record(response)
                    if waiter.observe(record):
                        yield record
                    delay = waiter.after_poll()
            except DocparseError as err:
                delay = waiter.on_error(err, self._clock())
            if delay > 0:
                self._sleep(min(delay, max(0.0, waiter.left(self._clock()))))

    def result(self, job_id: str) -> reading_package_pb2.ReadingPackage:
        """The reading package of a SUCCEEDED job, checked against its sha256."""
        return self._download(job_id).package()

    def download_result(self, job_id: str, path: Path) -> job_pb2.ResultRef:
        """Writes the serialized package to `path`, verified by sha256 and size on disk."""
        return self._download(job_id).write(path)

    def _download(self, job_id: str) -> ResultAssembler:
        request = parser_service_pb2.GetResultRequest(job_id=job_id)

        def attempt() -> ResultAssembler:  # a broken download starts over
            assembler = ResultAssembler(job_id)
            for message in self.transport.stream("GetResult", request, self.timeout_s * 10):
                assembler.add(message)
            return assembler

        return self._retried("GetResult", attempt)

    def asset(
        self, job_id: str, asset_id: str, deployment: str = ""
    ) -> tuple[reading_package_pb2.Asset, bytes]:
        """One asset (an image) of a SUCCEEDED job's reading package, checked against its
        sha256: the Asset record and the bytes."""
        request = parser_service_pb2.GetAssetRequest(
            job_id=job_id, asset_id=asset_id, deployment=deployment
        )

        def attempt() -> tuple[reading_package_pb2.Asset, bytes]:
            collected = AssetChunks(asset_id)
            for message in self.transport.stream("GetAsset", request, self.timeout_s * 10):
                collected.add(message)
            return collected.verified()

        return self._retried("GetAsset", attempt)

    def cancel(self, job_id: str) -> job_pb2.Job:
        request = parser_service_pb2.CancelJobRequest(job_id=job_id)
        response, _ = self._call("CancelJob", request)
        return response.job  # type: ignore[no-any-return]

    # --- batches -------------------------------------------------------------------------

    def submit_batch(
        self,
        files: list[tuple[str, bytes]],
        *,
        request_id: str = "",
        languages: list[str] | tuple[str, ...] = (),
    ) -> parser_service_pb2.Batch:
        """A small batch in one CreateBatch message (all files together under gRPC's message
        size limit); `upload_batch` streams batches of any size."""
        response, _ = self._call("CreateBatch", batch_request(files, request_id, languages))
        return response.batch  # type: ignore[no-any-return]

    def upload_batch(
        self,
        files: Sequence[Path | tuple[str, Path]],
        *,
        request_id: str = "",
        languages: list[str] | tuple[str, ...] = (),
    ) -> parser_service_pb2.Batch:
        """Submits files of any size as one batch through UploadBatch: each file is read and
        sent in chunks as gRPC's flow control asks for them, so a batch is bounded by the
        server's limits, not by a message size or by memory. Retried (from the start, same
        request_id) as the retry table says; the same request_id answers with the first batch."""
        upload = BatchUpload.of(files, request_id, languages)
        deadline = self.timeout_s + upload.total_bytes / UPLOAD_MIN_BYTES_PER_S
        response, _ = self._retried(
            "UploadBatch",
            lambda: self.transport.upload("UploadBatch", upload.requests(), deadline),
        )
        return response.batch  # type: ignore[no-any-return]

    def batch(self, batch_id: str) -> parser_service_pb2.Batch:
        request = parser_service_pb2.GetBatchRequest(batch_id=batch_id)
        response, _ = self._call("GetBatch", request)
        return response.batch  # type: ignore[no-any-return]

    def watch_batch(
        self, batch_id: str, *, policy: WaitPolicy | None = None
    ) -> Iterator[parser_service_pb2.Batch]:
        """Every new state of the batch until all its files ended, resuming broken streams,
        within the policy's limits (WaitTimeout after `timeout_s`)."""
        waiter = BatchWaiter(
            batch_id,
            policy or self.policy,
            self._clock(),
            parser_service_pb2.Batch(),
            rng=self._rng,
        )
        yield from self._follow(waiter, batch_feed(batch_id))
