"""Queue workers: take jobs from BullMQ, claim them in the state store, run the parse in a
subprocess, report progress per page and store the result.

BullMQ renews its locks on this event loop, so nothing here blocks it: the parse runs in a child
process and file I/O is small. Every state write carries the fencing token this worker got at
claim time; once another worker has taken the job over, this one's writes are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import tempfile
from pathlib import Path
from typing import Any

from bullmq import Worker

from docparse.errors import DocparseError
from parser_svc.blobs import BlobStore
from parser_svc.queue import bullmq_options
from parser_svc.sandbox import Limits, Outcome, run_parse
from parser_svc.settings import Settings
from parser_svc.store import JobStore

log = logging.getLogger(__name__)


class LostOwnership(Exception):
    """The state store refused a write: another worker owns the job, or it already ended."""


class ParseWorker:
    def __init__(self, settings: Settings, store: JobStore, blobs: BlobStore) -> None:
        self.settings = settings
        self.store = store
        self.blobs = blobs
        self._worker: Worker | None = None

    def start(self) -> None:
        s = self.settings
        opts: dict[str, Any] = {
            **bullmq_options(s),
            "concurrency": s.worker_concurrency,
            "lockDuration": s.lock_duration_ms,
            "stalledInterval": s.lock_duration_ms,
            "maxStalledCount": 2,
            "runRetryDelay": 1000,
        }
        self._worker = Worker(s.queue_name, self._process, opts)

    async def close(self) -> None:
        if self._worker is not None:
            await self._worker.close()

    async def _process(self, queue_job: Any, token: str) -> str:
        job_id = str(queue_job.data["job_id"])
        fence = f"{token}:{queue_job.attemptsMade}"
        claim = await self.store.claim(job_id, fence)
        if not claim.ok:
            log.info("job %s not claimed: %s", job_id, claim.status)
            return claim.status
        record = await self.store.get(job_id)
        try:
            await self._run(job_id, fence, record.attempt, record.content_type)
        except LostOwnership as lost:
            log.warning("job %s: %s", job_id, lost)
            return "LOST"
        return "DONE"

    async def _run(self, job_id: str, fence: str, attempt: int, content_type: str) -> None:
        input_path = self.blobs.path(f"{self.settings.env}/inputs/{job_id}")

        async def on_progress(done: int, total: int, stage: str) -> None:
            result = await self.store.progress(job_id, fence, done=done, total=total, stage=stage)
            if result.status in ("FENCED", "TERMINAL", "NOT_FOUND"):
                raise LostOwnership(f"progress refused: {result.status}")

        s = self.settings
        limits = Limits(s.parse_timeout_s, s.parse_cpu_s, s.parse_memory_mb)
        with tempfile.TemporaryDirectory(prefix="docparse-") as tmp:
            output_path = Path(tmp) / "package.pb"
            if not input_path.exists():
                outcome = Outcome("WORKER_LOST", "the uploaded document is no longer stored")
            else:
                outcome = await run_parse(
                    content_type, input_path, output_path, limits, on_progress
                )
            if outcome.reason:
                await self._finish_failed(job_id, fence, outcome)
            else:
                await self._finish_succeeded(job_id, fence, attempt, outcome, output_path)
        with contextlib.suppress(OSError):
            input_path.unlink()

    async def _finish_failed(self, job_id: str, fence: str, outcome: Outcome) -> None:
        fields: dict[str, str | int] = {
            "err_reason": outcome.reason,
            "err_message": outcome.message,
        }
        result = await self.store.finish(job_id, fence, "FAILED", fields)
        if not result.ok:
            raise LostOwnership(f"terminal write refused: {result.status}")

    async def _finish_succeeded(
        self, job_id: str, fence: str, attempt: int, outcome: Outcome, output_path: Path
    ) -> None:
        data = await asyncio.to_thread(output_path.read_bytes)
        sha256 = hashlib.sha256(data).hexdigest()
        fields: dict[str, str | int] = {
            "res_size": len(data),
            "res_sha256": sha256,
            "res_content_type": "application/x-protobuf; proto=docparse.v1.ReadingPackage",
            "res_pages": outcome.pages,
            "res_chars": outcome.chars,
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
        try:
            result = await self.store.finish(job_id, fence, "SUCCEEDED", fields, inline)
        except DocparseError:
            if blob_key:
                self.blobs.delete(blob_key)
            raise
        if not result.ok:
            if blob_key:
                self.blobs.delete(blob_key)
            raise LostOwnership(f"terminal write refused: {result.status}")
