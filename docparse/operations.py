"""Every operation of the Python SDK, written once and without I/O (docparse.effects): what to
send, how to read the answers, when to retry (docparse.retries) and how to wait
(docparse.waiting). `docparse.client.Client` runs these plans with blocking calls,
`docparse.aio.AsyncClient` with awaits; each client method is the plan of the same name.

- `submit` never creates duplicates: it always sends a request_id (one is made up if you give
  none) and retries a failed call only with that same id.
- A SubmitJob answer that is already terminal (the sync answer) is used as is, with no status
  call; one still queued or running (the async answer) is waited for.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

from docparse.effects import END, Blocking, Call, Open, Plan, Receive, Records, Sleep, once
from docparse.effects import Upload as UploadEffect
from docparse.errors import DocparseError
from docparse.job_options import Mode, image_mode
from docparse.job_options import ocr_mode as to_ocr_mode
from docparse.results import AssetChunks, ResultAssembler, check_submit_answer
from docparse.retries import Retrier
from docparse.shells import answering, iterating
from docparse.transport import AnswerObserver
from docparse.uploads import UPLOAD_MIN_BYTES_PER_S, BatchUpload, Files
from docparse.uploads import batch_request as batch_request  # re-exported: docparse.client
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from docparse.waiting import BatchWaiter, JobWaiter, WaitPolicy, batch_feed, follow, job_feed

T = TypeVar("T")
TransportT = TypeVar("TransportT")  # docparse.transport.Transport, or AsyncTransport
SleepT = TypeVar("SleepT")  # how the shell sleeps
# Language hints for OCR: BCP-47 tags ("en", "zh-Hant").
Languages: TypeAlias = list[str] | tuple[str, ...]

DEFAULT_TARGET = "127.0.0.1:50050"


def default_target() -> str:
    return os.environ.get("DOCPARSE_TARGET", DEFAULT_TARGET)


def api_key_or_env(api_key: str | None) -> str:
    return os.environ.get("DOCPARSE_API_KEY", "") if api_key is None else api_key


class ClientState(Generic[TransportT, SleepT]):
    """What both clients hold: the target, a transport, the per-call timeout, the wait policy,
    the clock, a way to sleep and the source of the retries' jitter. A shell says which
    transport it opens by default and how it sleeps (`_connect`, `_default_sleep`)."""

    def __init__(
        self,
        target: str | None = None,
        *,
        api_key: str | None = None,
        tls_root_cert: bytes | None = None,
        timeout_s: float = 30.0,
        policy: WaitPolicy | None = None,
        transport: TransportT | None = None,
        sleep: SleepT | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_answer: AnswerObserver | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`target` defaults to DOCPARSE_TARGET (else 127.0.0.1:50050), `api_key` to
        DOCPARSE_API_KEY; `tls_root_cert` (PEM, b"" for the system roots) connects over TLS.
        `on_answer(method, served_by)` is told who answered every call, streams and errors
        included (the `x-served-by` values: the replica, then the gateway; a stream left
        before its end, as at its terminal record, is given 1 s to end by itself for them).
        `sleep` defaults to time.sleep (Client) or asyncio.sleep (AsyncClient); `rng` draws
        the retries' jitter (tests pass a seeded one, and a transport and a clock of their own)."""
        self.target = target or default_target()
        self.timeout_s = timeout_s  # per call
        self.policy = policy or WaitPolicy()
        key = api_key_or_env(api_key)
        self.transport = transport or self._connect(key, tls_root_cert, on_answer)
        self._sleep = sleep or self._default_sleep()
        self._clock = clock
        self._rng = rng or random.Random()

    def _connect(
        self, api_key: str, tls_root_cert: bytes | None, on_answer: AnswerObserver | None
    ) -> TransportT:
        raise NotImplementedError

    def _default_sleep(self) -> SleepT:
        raise NotImplementedError


@dataclass
class Answer:
    """A response with the `x-served-by` values of its trailers: the parser_svc replica that
    answered first, then (through a gateway) the gateway."""

    job: job_pb2.Job
    served_by: tuple[str, ...]


# --- the building blocks -----------------------------------------------------------------


def retried(client: ClientState[Any, Any], method: str, attempt: Callable[[], Plan[T]]) -> Plan[T]:
    """`attempt()` until it succeeds or docparse.retries says the failure is final."""
    retrier = Retrier(method, client.policy, client._clock(), client._rng)
    while True:
        try:
            return (yield from attempt())
        except DocparseError as err:
            delay = retrier.on_error(err, client._clock())
        yield Sleep(delay)


def call(
    client: ClientState[Any, Any], method: str, request: Any, deadline_s: float | None = None
) -> Plan[Any]:
    """A unary call with retries: the response and its `x-served-by` values."""
    timeout = client.timeout_s if deadline_s is None else deadline_s
    return (yield from retried(client, method, lambda: once(Call(method, request, timeout))))


class Collector(Protocol):
    def add(self, message: Any) -> None: ...


C = TypeVar("C", bound=Collector)


def collected(
    client: ClientState[Any, Any], method: str, request: Any, collector: Callable[[], C]
) -> Plan[C]:
    """A download with retries: the stream read into a new collector each attempt (a broken
    download starts over)."""

    def attempt() -> Plan[C]:
        into = collector()
        stream = yield Open(method, request, client.timeout_s * 10)
        while (message := (yield Receive(stream))) is not END:
            into.add(message)
        return into

    return (yield from retried(client, method, attempt))


class BaseClient(ClientState[TransportT, SleepT]):
    """The operations of both clients, each written once as a plan: a method of
    docparse.client.Client, a coroutine of docparse.aio.AsyncClient (docparse.shells). A plan
    calls another as `BaseClient.submit(self, ...)`."""

    # --- submitting ----------------------------------------------------------------------------

    @answering
    def submit(
        self,
        file_name: str,
        content: bytes,
        *,
        request_id: str = "",
        password: str = "",
        wait_timeout_ms: int = 0,
        languages: Languages = (),
        callback: parser_service_pb2.Callback | None = None,
        pages: str = "",
        images: Mode = "",
        ocr_mode: Mode = "",
        ocr_dpi: int = 0,
    ) -> Plan[Answer]:
        """Submits once, however often the call itself has to be retried (same request_id).
        `wait_timeout_ms`: the server may wait that long for the job to end before answering
        (the sync answer); `languages`: BCP-47 hints for OCR ("en", "zh-Hant"); `callback`:
        a signed webhook when the job ends, `Callback(url=..., secret_name=...)` naming a secret
        the tenant registered (`from docparse.v1.parser_service_pb2 import Callback`); `pages`:
        the PDF pages to read ("1-5,10,20-"); `images`: "none", "referenced" (the server's
        default) or "all"; `ocr_mode`: "auto" (default), "force" or "off"; `ocr_dpi`: the OCR
        render resolution (72 to 400; 0: the server's)."""
        request = parser_service_pb2.SubmitJobRequest(
            file_name=file_name,
            content=content,
            request_id=request_id or uuid.uuid4().hex,
            password=password,
            wait_timeout_ms=wait_timeout_ms,
            languages=list(languages),
            callback=callback,
            pages=pages,
            images=image_mode(images),
            ocr_mode=to_ocr_mode(ocr_mode),
            ocr_dpi=ocr_dpi,
        )
        deadline = self.timeout_s + wait_timeout_ms / 1000
        response, replicas = yield from call(self, "SubmitJob", request, deadline)
        return Answer(check_submit_answer(response), replicas)

    @answering
    def parse(
        self,
        source: Path | bytes,
        *,
        file_name: str = "",
        request_id: str = "",
        password: str = "",
        languages: Languages = (),
        policy: WaitPolicy | None = None,
        pages: str = "",
        images: Mode = "",
        ocr_mode: Mode = "",
        ocr_dpi: int = 0,
    ) -> Plan[job_pb2.Job]:
        """Submits and waits: the SUCCEEDED record, or JobFailed / WaitTimeout / DocparseError.
        The options are submit's."""
        if isinstance(source, Path):
            content, file_name = (yield Blocking(source.read_bytes)), file_name or source.name
        else:
            content = source
        answer = yield from BaseClient.submit(
            self,
            file_name,
            content,
            request_id=request_id,
            password=password,
            languages=languages,
            pages=pages,
            images=images,
            ocr_mode=ocr_mode,
            ocr_dpi=ocr_dpi,
        )
        return (yield from BaseClient.wait(self, answer.job, policy=policy))

    # --- reading -------------------------------------------------------------------------------

    @answering
    def status(self, job_id: str) -> Plan[Answer]:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        response, replicas = yield from call(self, "GetStatus", request)
        return Answer(response.job, replicas)

    @answering
    def wait(
        self, job: job_pb2.Job | str, *, policy: WaitPolicy | None = None
    ) -> Plan[job_pb2.Job]:
        """Waits for the job to end (read-only) and returns the SUCCEEDED record."""
        job_id = job if isinstance(job, str) else job.job_id
        waiter = JobWaiter(
            job_id, policy or self.policy, self._clock(), job_pb2.Job(), rng=self._rng
        )
        if isinstance(job, job_pb2.Job):
            waiter.observe(job)  # a terminal answer needs no further call
        # its records go nowhere: only the outcome counts
        yield from follow(waiter, job_feed(job_id), self._clock, self.timeout_s)
        return waiter.outcome()

    @iterating
    def watch(
        self, job_id: str, *, after_version: int = 0, policy: WaitPolicy | None = None
    ) -> Records[job_pb2.Job]:
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
        yield from follow(waiter, job_feed(job_id), self._clock, self.timeout_s)

    @answering
    def result(self, job_id: str) -> Plan[reading_package_pb2.ReadingPackage]:
        """The reading package of a SUCCEEDED job, checked against its sha256."""
        return (yield from self._download(job_id)).package()

    @answering
    def download_result(self, job_id: str, path: Path) -> Plan[job_pb2.ResultRef]:
        """Writes the serialized package to `path`, verified by sha256 and size on disk."""
        assembler = yield from self._download(job_id)
        ref: job_pb2.ResultRef = yield Blocking(lambda: assembler.write(path))
        return ref

    def _download(self, job_id: str) -> Plan[ResultAssembler]:
        request = parser_service_pb2.GetResultRequest(job_id=job_id)
        return (yield from collected(self, "GetResult", request, lambda: ResultAssembler(job_id)))

    @answering
    def asset(
        self, job_id: str, asset_id: str, deployment: str = ""
    ) -> Plan[tuple[reading_package_pb2.Asset, bytes]]:
        """One asset (an image) of a SUCCEEDED job's reading package, checked against its
        sha256: the Asset record and the bytes."""
        request = parser_service_pb2.GetAssetRequest(
            job_id=job_id, asset_id=asset_id, deployment=deployment
        )
        return (
            yield from collected(self, "GetAsset", request, lambda: AssetChunks(asset_id))
        ).verified()

    @answering
    def cancel(self, job_id: str) -> Plan[job_pb2.Job]:
        request = parser_service_pb2.CancelJobRequest(job_id=job_id)
        response, _ = yield from call(self, "CancelJob", request)
        return response.job  # type: ignore[no-any-return]

    # --- batches -------------------------------------------------------------------------------

    @answering
    def submit_batch(
        self,
        files: list[tuple[str, bytes]],
        *,
        request_id: str = "",
        languages: Languages = (),
        callback: parser_service_pb2.Callback | None = None,
    ) -> Plan[parser_service_pb2.Batch]:
        """A small batch in one CreateBatch message (all files together under gRPC's message
        size limit); `upload_batch` streams batches of any size. `callback`: one signed
        `batch.completed` webhook once every file has ended (none per file)."""
        request = batch_request(files, request_id, languages, callback)
        response, _ = yield from call(self, "CreateBatch", request)
        return response.batch  # type: ignore[no-any-return]

    @answering
    def upload_batch(
        self,
        files: Files,
        *,
        request_id: str = "",
        languages: Languages = (),
        callback: parser_service_pb2.Callback | None = None,
    ) -> Plan[parser_service_pb2.Batch]:
        """Submits files of any size as one batch through UploadBatch: each file is read and
        sent in chunks as gRPC's flow control asks for them, so a batch is bounded by the
        server's limits, not by a message size or by memory. Retried (from the start, same
        request_id) as the retry table says; the same request_id answers with the first batch.
        `callback` as submit_batch's."""
        upload: BatchUpload = yield Blocking(
            lambda: BatchUpload.of(files, request_id, languages, callback)
        )
        deadline = self.timeout_s + upload.total_bytes / UPLOAD_MIN_BYTES_PER_S
        effect = UploadEffect("UploadBatch", upload, deadline)
        response, _ = yield from retried(self, "UploadBatch", lambda: once(effect))
        return response.batch  # type: ignore[no-any-return]

    @iterating
    def watch_batch(
        self, batch_id: str, *, policy: WaitPolicy | None = None
    ) -> Records[parser_service_pb2.Batch]:
        """Every new state of the batch until all its files ended, resuming broken streams,
        within the policy's limits (WaitTimeout after `timeout_s`)."""
        waiter = BatchWaiter(
            batch_id,
            policy or self.policy,
            self._clock(),
            parser_service_pb2.Batch(),
            rng=self._rng,
        )
        yield from follow(waiter, batch_feed(batch_id), self._clock, self.timeout_s)

    @answering
    def batch(self, batch_id: str) -> Plan[parser_service_pb2.Batch]:
        request = parser_service_pb2.GetBatchRequest(batch_id=batch_id)
        response, _ = yield from call(self, "GetBatch", request)
        return response.batch  # type: ignore[no-any-return]
