"""The synchronous Python SDK.

    with Client("127.0.0.1:50050") as client:
        job = client.parse(Path("report.pdf"))          # submit + wait; raises on failure
        package = client.result(job.job_id)             # downloaded and sha256-checked
        for job in client.iter_jobs(limit=100):           # the newest jobs (docparse.listing)
            print(job.job_id, job.state)

- Each method is the operation of the same name in docparse.operations, written once for this
  client and the asyncio one (docparse.aio.AsyncClient): this shell only performs its I/O
  (docparse.effects) with blocking calls, so both clients behave alike.
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

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from docparse import effects
from docparse.operations import (
    DEFAULT_TARGET,
    Answer,
    batch_request,
    default_target,
)
from docparse.page_reads import PageReads
from docparse.results import AssetChunks
from docparse.shells import BlockingShell
from docparse.transport import AnswerObserver, GrpcTransport, Transport
from docparse.uploads import UPLOAD_CHUNK_BYTES, UPLOAD_MIN_BYTES_PER_S, BatchUpload
from docparse.waiting import Feed, batch_feed, job_feed

# Names this module offered before the split; they now live in docparse.operations,
# docparse.results, docparse.uploads and docparse.waiting.
__all__ = [
    "DEFAULT_TARGET",
    "UPLOAD_CHUNK_BYTES",
    "UPLOAD_MIN_BYTES_PER_S",
    "Answer",
    "AssetChunks",
    "BatchUpload",
    "Client",
    "Feed",
    "batch_feed",
    "batch_request",
    "default_target",
    "job_feed",
]

T = TypeVar("T")


class Client(PageReads[Transport, Callable[[float], None]], BlockingShell):
    def _connect(
        self, api_key: str, tls_root_cert: bytes | None, on_answer: AnswerObserver | None
    ) -> Transport:
        return GrpcTransport(self.target, api_key, tls_root_cert, on_answer)

    def _default_sleep(self) -> Callable[[float], None]:
        return time.sleep

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the I/O -------------------------------------------------------------------------

    def _perform(self, effect: effects.Effect) -> Any:
        match effect:
            case effects.Call(method, request, deadline_s):
                return self.transport.call(method, request, deadline_s)
            case effects.Open(method, request, deadline_s):
                return iter(self.transport.stream(method, request, deadline_s))
            case effects.Receive(stream):
                return next(stream, effects.END)
            case effects.Leave(stream):
                close = getattr(stream, "close", None)  # a transport's generator
                return close() if close is not None else None
            case effects.Upload(method, upload, deadline_s):
                return self.transport.upload(method, upload.requests(), deadline_s)
            case effects.Sleep(seconds):
                return self._sleep(seconds)
            case effects.Blocking(run):
                return run()
        raise TypeError(f"not an effect: {effect!r}")

    def _records(self, run: effects.Run[Any]) -> Iterator[Any]:
        """Performs the plan's effects in turn, handing out the records it emits."""
        while (effect := run.step()) is not None:
            if isinstance(effect, effects.Emit):
                yield effect.record
                continue
            try:
                run.answer(self._perform(effect))
            except Exception as err:  # the plan decides what a failure means
                run.fail(err)

    def _run(self, plan: effects.Plan[T]) -> T:
        run = effects.Run(plan)
        for _ in self._records(run):
            pass  # a wait's records: only its outcome counts
        return run.result()
