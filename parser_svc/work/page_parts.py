"""Draft page parts of a running job, published as the parse child writes them
(parser_svc/child/draft_pages.py): stored in the blob store, a batch to a pack
(work/part_packs.py), then pointed at in Redis (parser_svc/state/page_parts.py), blob first,
so a reader that finds a pointer always finds its bytes.

Drafts are a courtesy to readers, never a condition of the job: a draft that cannot be stored
(a Redis blip, a full disk) is skipped with a log line, and the job goes on; its page is read
from the final package at the end like every page. Once the job is no longer this execution's
(another worker took it over, or it was cancelled) nothing more is published.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from docparse.errors import DocparseError
from parser_svc.child.draft_pages import draft_path
from parser_svc.child.sandbox import Draft
from parser_svc.state.page_parts import PageParts, PartKind, PutResult
from parser_svc.work.blobs import BlobStore

log = logging.getLogger(__name__)


class PagePublisher:
    """Publishes the page parts of one execution of a job (its fence and attempt)."""

    def __init__(
        self, parts: PageParts, blobs: BlobStore, job_id: str, fence: str, attempt: int
    ) -> None:
        self.parts, self.blobs = parts, blobs
        self.job_id, self.fence, self.attempt = job_id, fence, attempt
        self.stopped = False
        # The pages this execution's drafts were pointed at (Progress.ready_pages).
        self.ready: set[int] = set()

    def _store(self, data: bytes) -> str:
        return self.blobs.put_page_part(self.job_id, hashlib.sha256(data).hexdigest(), data)

    async def publish(self, number: int, data: bytes, kind: PartKind) -> PutResult:
        """Stores the part `data` of page `number` and points the page at it."""
        ref = await asyncio.to_thread(self._store, data)
        return await self.parts.put(self.job_id, self.fence, self.attempt, number, ref, kind)

    def _store_drafts(self, scratch: Path, drafts: list[Draft]) -> list[tuple[int, str]]:
        """Stores these drafts (their bytes, or the file the child wrote): (page, ref) each.
        One trip to a thread and one pack for all of them."""
        numbers, parts = [], []
        for number, data in drafts:
            try:
                part = data if data is not None else draft_path(scratch, number).read_bytes()
            except OSError as err:
                log.info("job %s: draft of page %d skipped: %s", self.job_id, number, err)
                continue
            numbers.append(number)
            parts.append((hashlib.sha256(part).hexdigest(), part))
        try:
            refs = self.blobs.put_page_parts(self.job_id, parts)
        except OSError as err:
            log.info("job %s: %d drafts skipped: %s", self.job_id, len(parts), err)
            return []
        return list(zip(numbers, refs, strict=True))

    async def publish_drafts(self, scratch: Path, drafts: list[Draft]) -> None:
        """These drafts, unless the job is no longer this execution's or the publisher is
        stopped (the parse ended: the finals are as near): stored, then pointed at in one
        step."""
        stored = await asyncio.to_thread(self._store_drafts, scratch, drafts)
        if self.stopped or not stored:
            return
        try:
            results = await self.parts.put_many(
                self.job_id, self.fence, self.attempt, stored, "draft"
            )
        except DocparseError as err:
            log.info("job %s: %d drafts skipped: %s", self.job_id, len(stored), err)
            return
        for (number, _), result in zip(stored, results, strict=True):
            self.stopped = self.stopped or not result.ok
            if result.ok:
                self.ready.add(number)


class DraftQueue:
    """The drafts the child announces (in lines that gather them: child/draft_pages.py),
    published by a task of their own: the child's events are never held up by a store write,
    and drafts that arrive while a batch is being written go with the next one."""

    def __init__(self, publisher: PagePublisher, scratch: Path) -> None:
        self.publisher, self.scratch = publisher, scratch
        self.pending: list[Draft] = []
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        # Told after each batch is published (the worker's progress writer: ready pages).
        self.on_published: Callable[[], None] = lambda: None

    async def add(self, drafts: list[Draft]) -> None:
        if not drafts:
            return
        self.pending.extend(drafts)
        self.wake.set()
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            if self.publisher.stopped:
                return
            drafts, self.pending = self.pending, []
            await self.publisher.publish_drafts(self.scratch, drafts)
            self.on_published()

    async def close(self) -> None:
        """Stops publishing (what is pending is dropped) once the write under way is done."""
        self.publisher.stopped = True
        self.wake.set()
        if self.task is not None:
            await self.task
