"""The asyncio Python SDK: the same behaviour as docparse.client.Client (same waiting state
machine, same retry rules, same result checks), for asyncio applications.

    async with AsyncClient("127.0.0.1:50050") as client:
        job = await client.parse(Path("report.pdf"))
        package = await client.result(job.job_id)
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from docparse.client import (
    Answer,
    Feed,
    batch_feed,
    batch_request,
    default_target,
    job_feed,
)
from docparse.errors import DocparseError
from docparse.results import AssetChunks, ResultAssembler, check_submit_answer
from docparse.retries import Retrier
from docparse.transport import AsyncTransport, GrpcAsyncTransport
from docparse.uploads import UPLOAD_CHUNK_BYTES, UPLOAD_MIN_BYTES_PER_S, BatchUpload
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from docparse.waiting import Action, BatchWaiter, JobWaiter, R, Waiter, WaitPolicy

T = TypeVar("T")


class AsyncClient:
    def __init__(
        self,
        target: str | None = None,
        *,
        api_key: str | None = None,
        tls_root_cert: bytes | None = None,
        timeout_s: float = 30.0,
        policy: WaitPolicy | None = None,
        transport: AsyncTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.target = target or default_target()
        self.timeout_s = timeout_s
        self.policy = policy or WaitPolicy()
        key = os.environ.get("DOCPARSE_API_KEY", "") if api_key is None else api_key
        self.transport = transport or GrpcAsyncTransport(self.target, key, tls_root_cert)
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _retried(self, method: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """`await attempt()` until it succeeds or docparse.retries says the failure is final
        (the same decisions as the sync client's)."""
        retrier = Retrier(method, self.policy, self._clock(), self._rng)
        while True:
            try:
                return await attempt()
            except DocparseError as err:
                delay = retrier.on_error(err, self._clock())
            await self._sleep(delay)

    async def _call(self, method: str, request: Any, deadline_s: float | None = None) -> Any:
        timeout = self.timeout_s if deadline_s is None else deadline_s
        return await self._retried(method, lambda: self.transport.call(method, request, timeout))

    async def submit(
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
        """Submits once, however often the call itself has to be retried (same request_id)."""
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
        response, replicas = await self._call("SubmitJob", request, deadline)
        return Answer(check_submit_answer(response), replicas)

    async def parse(
        self,
        source: Path | bytes,
        *,
        file_name: str = "",
        request_id: str = "",
        password: str = "",
        languages: list[str] | tuple[str, ...] = (),
        policy: WaitPolicy | None = None,
    ) -> job_pb2.Job:
        if isinstance(source, Path):
            content, file_name = (
                await asyncio.to_thread(source.read_bytes),
                file_name or source.name,
            )
        else:
            content = source
        answer = await self.submit(
            file_name, content, request_id=request_id, password=password, languages=languages
        )
        return await self.wait(answer.job, policy=policy)

    async def status(self, job_id: str) -> Answer:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        response, replicas = await self._call("GetStatus", request)
        return Answer(response.job, replicas)

    async def wait(
        self, job: job_pb2.Job | str, *, policy: WaitPolicy | None = None
    ) -> job_pb2.Job:
        job_id = job if isinstance(job, str) else job.job_id
        waiter = JobWaiter(
            job_id, policy or self.policy, self._clock(), job_pb2.Job(), rng=self._rng
        )
        if isinstance(job, job_pb2.Job):
            waiter.observe(job)
        async for _ in self._follow(waiter, job_feed(job_id)):
            pass
        return waiter.outcome()

    async def watch(
        self, job_id: str, *, after_version: int = 0, policy: WaitPolicy | None = None
    ) -> AsyncIterator[job_pb2.Job]:
        """Every record newer than `after_version` until the terminal one, with the limits
        and resumption of `wait` (see docparse.client.Client.watch)."""
        waiter = JobWaiter(
            job_id,
            policy or self.policy,
            self._clock(),
            job_pb2.Job(),
            cursor=after_version,
            rng=self._rng,
        )
        async for record in self._follow(waiter, job_feed(job_id)):
            yield record

    async def _follow(self, waiter: Waiter[R], feed: Feed[R]) -> AsyncIterator[R]:
        """The waiting loop (decisions in docparse.waiting): yields each new record."""
        while (action := waiter.next_action()) is not Action.DONE:
            left = waiter.check_deadline(self._clock())
            try:  # no asyncio.timeout around a yield: the call's own deadline bounds it
                if action is Action.STREAM:
                    progressed = False
                    request = feed.request(waiter.after_version)
                    async for message in self.transport.stream(feed.method, request, left):
                        waiter.heard()
                        record = feed.record(message)
                        if record is not None and waiter.observe(record):
                            progressed = True
                            yield record
                    delay = waiter.on_stream_end(progressed)
                else:
                    response, _ = await self.transport.call(
                        feed.poll_method, feed.poll_request, self.timeout_s
                    )
                    record = feed.poll_record(response)
                    if waiter.observe(record):
                        yield record
                    delay = waiter.after_poll()
            except DocparseError as err:
                delay = waiter.on_error(err, self._clock())
            if delay > 0:
                await self._sleep(min(delay, max(0.0, waiter.left(self._clock()))))

    async def result(self, job_id: str) -> reading_package_pb2.ReadingPackage:
        return (await self._download(job_id)).package()

    async def download_result(self, job_id: str, path: Path) -> job_pb2.ResultRef:
        assembler = await self._download(job_id)
        return await asyncio.to_thread(assembler.write, path)

    async def _download(self, job_id: str) -> ResultAssembler:
        request = parser_service_pb2.GetResultRequest(job_id=job_id)

        async def attempt() -> ResultAssembler:  # a broken download starts over
            assembler = ResultAssembler(job_id)
            async for message in self.transport.stream("GetResult", request, self.timeout_s * 10):
                assembler.add(message)
            return assembler

        return await self._retried("GetResult", attempt)

    async def asset(
        self, job_id: str, asset_id: str, deployment: str = ""
    ) -> tuple[reading_package_pb2.Asset, bytes]:
        """One asset of a SUCCEEDED job's reading package, checked against its sha256."""
        request = parser_service_pb2.GetAssetRequest(
            job_id=job_id, asset_id=asset_id, deployment=deployment
        )

        async def attempt() -> tuple[reading_package_pb2.Asset, bytes]:
            collected = AssetChunks(asset_id)
            async for message in self.transport.stream("GetAsset", request, self.timeout_s * 10):
                collected.add(message)
            return collected.verified()

        return await self._retried("GetAsset", attempt)

    async def upload_batch(
        self,
        files: Sequence[Path | tuple[str, Path]],
        *,
        request_id: str = "",
        languages: list[str] | tuple[str, ...] = (),
    ) -> parser_service_pb2.Batch:
        """Submits files of any size as one batch through UploadBatch, in chunks read off the
        event loop (see docparse.client.Client.upload_batch)."""
        upload = await asyncio.to_thread(BatchUpload.of, files, request_id, languages)
        deadline = self.timeout_s + upload.total_bytes / UPLOAD_MIN_BYTES_PER_S

        async def requests() -> AsyncIterator[parser_service_pb2.UploadBatchRequest]:
            yield upload.header()
            for name, path, size in upload.files:
                yield upload.file_header(name, size)
                source = await asyncio.to_thread(path.open, "rb")
                try:
                    while chunk := await asyncio.to_thread(source.read, UPLOAD_CHUNK_BYTES):
                        yield parser_service_pb2.UploadBatchRequest(chunk=chunk)
                finally:
                    source.close()

        response, _ = await self._retried(
            "UploadBatch", lambda: self.transport.upload("UploadBatch", requests(), deadline)
        )
        return response.batch  # type: ignore[no-any-return]

    async def cancel(self, job_id: str) -> job_pb2.Job:
        request = parser_service_pb2.CancelJobRequest(job_id=job_id)
        response, _ = await self._call("CancelJob", request)
        return response.job  # type: ignore[no-any-return]

    async def submit_batch(
        self,
        files: list[tuple[str, bytes]],
        *,
        request_id: str = "",
        languages: list[str] | tuple[str, ...] = (),
    ) -> parser_service_pb2.Batch:
        """A small batch in one CreateBatch message (see docparse.client.Client.submit_batch)."""
        response, _ = await self._call("CreateBatch", batch_request(files, request_id, languages))
        return response.batch  # type: ignore[no-any-return]

    async def batch(self, batch_id: str) -> parser_service_pb2.Batch:
        request = parser_service_pb2.GetBatchRequest(batch_id=batch_id)
        response, _ = await self._call("GetBatch", request)
        return response.batch  # type: ignore[no-any-return]

    async def watch_batch(
        self, batch_id: str, *, policy: WaitPolicy | None = None
    ) -> AsyncIterator[parser_service_pb2.Batch]:
        """Every new state of the batch until all its files ended, resuming broken streams
        (see docparse.client.Client.watch_batch)."""
        waiter = BatchWaiter(
            batch_id,
            policy or self.policy,
            self._clock(),
            parser_service_pb2.Batch(),
            rng=self._rng,
        )
        async for record in self._follow(waiter, batch_feed(batch_id)):
            yield record
