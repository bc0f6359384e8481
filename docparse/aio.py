"""The asyncio Python SDK: the same behaviour as docparse.client.Client, for asyncio
applications. Both run the same operations (docparse.operations: same requests, same waiting
state machine, same retry rules, same result checks); this shell performs their I/O
(docparse.effects) with awaits, and file work in a thread, off the event loop.

    async with AsyncClient("127.0.0.1:50050") as client:
        job = await client.parse(Path("report.pdf"))
        package = await client.result(job.job_id)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from docparse import effects
from docparse.page_reads import PageReads
from docparse.shells import AsyncShell
from docparse.transport import AnswerObserver, AsyncTransport, GrpcAsyncTransport
from docparse.uploads import UPLOAD_CHUNK_BYTES, BatchUpload
from docparse.v1 import parser_service_pb2

T = TypeVar("T")


async def chunked(upload: BatchUpload) -> AsyncIterator[parser_service_pb2.UploadBatchRequest]:
    """The UploadBatch stream, each chunk read in a thread as gRPC asks for it."""
    yield upload.header()
    for name, path, size in upload.files:
        yield upload.file_header(name, size)
        source = await asyncio.to_thread(path.open, "rb")
        try:
            while chunk := await asyncio.to_thread(source.read, UPLOAD_CHUNK_BYTES):
                yield parser_service_pb2.UploadBatchRequest(chunk=chunk)
        finally:
            source.close()


class AsyncClient(PageReads[AsyncTransport, Callable[[float], Awaitable[None]]], AsyncShell):
    def _connect(
        self, api_key: str, tls_root_cert: bytes | None, on_answer: AnswerObserver | None
    ) -> AsyncTransport:
        return GrpcAsyncTransport(self.target, api_key, tls_root_cert, on_answer)

    def _default_sleep(self) -> Callable[[float], Awaitable[None]]:
        return asyncio.sleep

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the I/O -------------------------------------------------------------------------

    async def _perform(self, effect: effects.Effect) -> Any:
        match effect:
            case effects.Call(method, request, deadline_s):
                return await self.transport.call(method, request, deadline_s)
            case effects.Open(method, request, deadline_s):
                return aiter(self.transport.stream(method, request, deadline_s))
            case effects.Receive(stream):
                return await anext(stream, effects.END)
            case effects.Leave(stream):
                aclose = getattr(stream, "aclose", None)  # a transport's async generator
                return await aclose() if aclose is not None else None
            case effects.Upload(method, upload, deadline_s):
                return await self.transport.upload(method, chunked(upload), deadline_s)
            case effects.Sleep(seconds):
                return await self._sleep(seconds)
            case effects.Blocking(run):
                return await asyncio.to_thread(run)
        raise TypeError(f"not an effect: {effect!r}")

    async def _records(self, run: effects.Run[Any]) -> AsyncIterator[Any]:
        """Performs the plan's effects in turn, handing out the records it emits (no
        asyncio.timeout around a yield: each call's own deadline bounds it)."""
        while (effect := run.step()) is not None:
            if isinstance(effect, effects.Emit):
                yield effect.record
                continue
            try:
                run.answer(await self._perform(effect))
            except Exception as err:  # the plan decides what a failure means
                run.fail(err)

    async def _run(self, plan: effects.Plan[T]) -> T:
        run = effects.Run(plan)
        async for _ in self._records(run):
            pass  # a wait's records: only its outcome counts
        return run.result()
