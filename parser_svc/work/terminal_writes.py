"""The writes that end a claimed job (SUCCEEDED with its result inline or in the blob store,
FAILED with its reason), and the retrying every state store call of a worker goes through:
a blip or a Redis restart shorter than one lock duration costs the job nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from docparse.errors import DocparseError
from parser_svc.child.sandbox import Outcome
from parser_svc.settings import Settings
from parser_svc.state.store import JobStore
from parser_svc.work.blobs import BlobStore
from parser_svc.work.progress_writer import LostOwnership, ProgressWriter

T = TypeVar("T")


class TerminalWrites:
    """A worker's state store calls: `retrying` any of them, `failed` and `succeeded` for the
    end of a job (LostOwnership when the job is no longer this execution's)."""

    def __init__(self, settings: Settings, store: JobStore, blobs: BlobStore) -> None:
        self.settings = settings
        self.store = store
        self.blobs = blobs

    async def retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """A state store call that outlasts a blip or a Redis restart: retried with backoff for
        up to one lock duration (after that the lock is gone and another worker redoes the job).
        Every write is safe to repeat: a re-run of a write that went in answers DONE."""
        deadline = time.monotonic() + self.settings.lock_duration_ms / 1000
        delay = 0.1
        while True:
            try:
                return await call()
            except DocparseError as err:
                if err.code != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def failed(
        self, job_id: str, fence: str, outcome: Outcome, writer: ProgressWriter
    ) -> None:
        fields: dict[str, str | int] = {
            "err_reason": outcome.reason,
            "err_message": outcome.message,
            **writer.last_progress(),
        }
        await writer.close()
        result = await self.retrying(lambda: self.store.finish(job_id, fence, "FAILED", fields))
        if not result.ok:
            raise LostOwnership(f"terminal write refused: {result.status}")
        await asyncio.to_thread(self.blobs.delete_upload, job_id)

    async def succeeded(
        self,
        job_id: str,
        fence: str,
        attempt: int,
        outcome: Outcome,
        data: bytes,
        sha256: str,
        writer: ProgressWriter,
    ) -> None:
        fields: dict[str, str | int] = {
            "res_size": len(data),
            "res_sha256": sha256,
            "res_content_type": "application/x-protobuf; proto=docparse.v1.ReadingPackage",
            "res_pages": outcome.pages,
            "res_chars": outcome.chars,
            "ready": outcome.held_pages,
            **writer.last_progress(),
        }
        inline = b""
        blob_key = ""
        if len(data) <= self.settings.inline_result_max_bytes:
            fields["res_storage"] = "inline"
            inline = data
        else:
            blob_key = await asyncio.to_thread(self.blobs.put_result, job_id, attempt, sha256, data)
            fields["res_storage"] = "blob"
            fields["res_blob_key"] = blob_key
        await writer.close()  # no progress write may race the terminal one
        # An error here leaves the outcome unknown (the write may have gone in): the blob stays.
        # The next attempt's claim either finds the job SUCCEEDED with this very blob, or
        # takes the job over and discards what earlier attempts stored.
        result = await self.retrying(
            lambda: self.store.finish(job_id, fence, "SUCCEEDED", fields, inline)
        )
        if not result.ok:
            if blob_key:
                await asyncio.to_thread(self.blobs.delete, blob_key)
            raise LostOwnership(f"terminal write refused: {result.status}")
