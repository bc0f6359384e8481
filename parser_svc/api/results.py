"""GetResult: a SUCCEEDED job's reading package, whole or cut to some pages, and while a job
runs the pages it has read so far (protos/docparse/v1/parser_service.proto says what a client
sees).

The whole package is the stored bytes (inline in Redis, or the blob store) as the terminal
record's ResultRef names them. With `pages`, a SUCCEEDED job's package is cut in a thread
(docparse/package_pages.cut_serialized: only its pages and asset records are decoded); a
QUEUED or RUNNING job's answer joins the page parts its pointers name (state/page_parts.py,
the ones StreamResult sends): what is there now, but for the read that turns the job's drafts
on, which first waits a moment for the pages read before it (draft_backfill.py).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

from docparse import package_pages, page_ranges
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.v1 import reading_package_pb2 as rp
from docparse_server.errors import error
from parser_svc.api import draft_backfill
from parser_svc.state.events import EventHub
from parser_svc.state.page_parts import PageParts, PagePointer
from parser_svc.state.records import is_terminal
from parser_svc.state.store import JobStore
from parser_svc.work.blobs import BlobStore

CHUNK_BYTES = 64 * 1024
PACKAGE_CONTENT_TYPE = "application/x-protobuf; proto=docparse.v1.ReadingPackage"
Response = parser_service_pb2.GetResultResponse


def selection_of(spec: str) -> page_ranges.Selection:
    try:
        return page_ranges.parse(spec)
    except page_ranges.PageRangeError as err:
        raise error(ErrorReason.INVALID_PAGE_RANGE, str(err), {"parameter": "pages"}) from err


def chunked(data: bytes, first: Response) -> AsyncIterator[Response]:
    """`data` in CHUNK_BYTES messages, the first one carrying what `first` holds."""

    async def messages() -> AsyncIterator[Response]:
        for offset in range(0, max(len(data), 1), CHUNK_BYTES):
            message = Response(chunk=data[offset : offset + CHUNK_BYTES], offset=offset)
            if offset == 0:
                message.MergeFrom(first)
            yield message

    return messages()


def _ref_of(data: bytes, package: rp.ReadingPackage) -> job_pb2.ResultRef:
    return job_pb2.ResultRef(
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        content_type=PACKAGE_CONTENT_TYPE,
        page_count=len(package.pages),
    )


def _cut(data: bytes, selection: page_ranges.Selection) -> tuple[bytes, job_pb2.ResultRef]:
    cut = package_pages.cut_serialized(data, selection)
    return cut, _ref_of(cut, rp.ReadingPackage.FromString(cut))


class Results:
    """The result reads of jobs in the shared store: any replica answers."""

    def __init__(
        self, store: JobStore, hub: EventHub, blobs: BlobStore, backfill_wait_s: float
    ) -> None:
        self.store, self.hub, self.blobs = store, hub, blobs
        self.backfill_wait_s = backfill_wait_s
        self.parts = PageParts(store)

    async def package_bytes(self, job: job_pb2.Job) -> bytes:
        """The serialized package of a SUCCEEDED job; the precise error for any other."""
        if job.state != job_pb2.STATE_SUCCEEDED:
            state = job_pb2.State.Name(job.state)
            raise error(
                ErrorReason.JOB_NOT_SUCCEEDED if is_terminal(job) else ErrorReason.RESULT_NOT_READY,
                f"job {job.job_id} is {state}; only SUCCEEDED jobs have a result",
                {"job_id": job.job_id, "state": state},
            )
        if job.result.storage == job_pb2.RESULT_STORAGE_INLINE:
            data = await self.store.get_inline_result(job.job_id)
        else:
            try:
                data = await asyncio.to_thread(self.blobs.read_result, job.result.blob_key)
            except OSError:
                data = None
        if data is None:
            raise error(
                ErrorReason.RESULT_EXPIRED,
                f"the result of job {job.job_id} is no longer stored",
                {"job_id": job.job_id},
            )
        return data

    async def answer(self, request: parser_service_pb2.GetResultRequest) -> AsyncIterator[Response]:
        """GetResult's messages for `request` (its job id checked by the caller)."""
        selection = selection_of(request.pages) if request.pages else None
        job = await self.store.get(request.job_id)
        if selection is not None and not is_terminal(job):
            job, read = await draft_backfill.wanted(
                self.store, self.hub, self.parts, job, self.backfill_wait_s
            )
        if selection is not None and not is_terminal(job):
            data, ref, drafts = await self.read_so_far(job.job_id, selection, read)
            first = Response(result=ref, partial=True, draft_pages=drafts)
            return chunked(data, first)
        data = await self.package_bytes(job)
        if selection is None:
            return chunked(data, Response(result=job.result))
        cut, ref = await asyncio.to_thread(_cut, data, selection)
        return chunked(cut, Response(result=ref))

    async def read_so_far(
        self,
        job_id: str,
        selection: page_ranges.Selection,
        read: list[PagePointer] | None = None,
    ) -> tuple[bytes, job_pb2.ResultRef, list[int]]:
        """The selected pages a running job has read (their parts joined), its ref, and the
        numbers of the drafts among them; `read`: its pointers, if just read."""
        every = await self.parts.ready(job_id) if read is None else read
        pointers = [pointer for pointer in every if page_ranges.selects(selection, pointer.page)]
        parts = await asyncio.to_thread(self._read_parts, job_id, pointers)
        package = package_pages.joined(data for _, data in parts)
        data = package.SerializeToString(deterministic=True)
        drafts = sorted(pointer.page for pointer, _ in parts if pointer.kind == "draft")
        return data, _ref_of(data, package), drafts

    def _read_parts(
        self, job_id: str, pointers: list[PagePointer]
    ) -> list[tuple[PagePointer, bytes]]:
        datas = self.blobs.read_page_parts(job_id, [pointer.ref for pointer in pointers])
        # A part gone with the job's retention is not there.
        return [(p, data) for p, data in zip(pointers, datas, strict=True) if data is not None]
