"""Queue workers: take jobs from BullMQ, claim them in the state store, run the parse in a
subprocess, report progress per page and store the result.

BullMQ renews its locks on this event loop, so nothing here blocks it: the parse runs in a child
process, and every file this touches (the shared volume's blobs, the parse's scratch directory)
is read, written and deleted in a thread. Every state write carries the fencing token this
worker got at claim time (BullMQ's lock token: the worker's uuid and a counter of its fetches,
unique to this execution); once another worker has taken the job over, or the job was
cancelled, this one's writes are refused and it stops the parse.

Failures: a crashed parser (or a lost worker, seen as a job claimed again) is retried with
backoff up to `max_attempts` executions; a document failure (corrupt, password, too large,
timeout) ends the job at once. Either way the final failure also lands in BullMQ's failed set.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from docparse import page_ranges
from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2
from docparse_server import tracing
from docparse_server.cpus import usable_cpus
from parser_svc import observability
from parser_svc.child import landlock
from parser_svc.child.fork_server import ForkServer
from parser_svc.child.privileges import ChildScratch
from parser_svc.child.sandbox import Limits, Outcome, ProgressCallback, run_parse
from parser_svc.parsers import ParseOptions
from parser_svc.settings import Settings
from parser_svc.state.page_parts import PageParts
from parser_svc.state.queue_store import FinalFailure, queue_worker
from parser_svc.state.records import parse_overrides
from parser_svc.state.store import JobStore
from parser_svc.work import free_cores
from parser_svc.work.blobs import BlobStore
from parser_svc.work.draft_switch import DraftSwitch
from parser_svc.work.job_tracing import job_span, trace_parent
from parser_svc.work.page_parts import DraftQueue, PagePublisher
from parser_svc.work.progress_writer import PROGRESS_WRITE_INTERVAL_S, LostOwnership, ProgressWriter
from parser_svc.work.queue import JobQueue
from parser_svc.work.sweeper import Sweeper
from parser_svc.work.terminal_writes import TerminalWrites

log = logging.getLogger(__name__)
RETRYABLE_REASONS = frozenset({ErrorReason.PARSER_CRASHED, ErrorReason.WORKER_LOST})


class RetryableFailure(Exception):
    """Raised to BullMQ so it schedules another attempt with backoff."""


class ParseWorker:
    def __init__(self, settings: Settings, store: JobStore, blobs: BlobStore) -> None:
        self.settings = settings
        self.store = store
        self.blobs = blobs
        self._worker: Any = None  # BullMQ's Worker (parser_svc.state.queue_store)
        self._queue: JobQueue | None = None
        self._sweeper: asyncio.Task[None] | None = None
        # Parse children are forked from this (parser_svc.child.zygote), not the server process.
        self._fork_server = (
            ForkServer(settings.fork_server_huge_pages, settings.fork_server_ocr_preload)
            if settings.parse_launch == "fork_server"
            else None
        )
        # Each job's scratch directory, owned by the uid its child drops to (child/privileges.py).
        self._scratch = ChildScratch(settings.child_uid, settings.child_gid)
        landlock.announce(settings.child_landlock)  # children confine their files (once)
        # Parses running now: a new one reads its OCR pages on the cores they leave free.
        self._parsing = 0
        # Jobs between their claim and the end of their parse (the ones preparing included).
        self._active = 0
        self._page_threads = settings.ocr_page_threads or usable_cpus()
        self.writes = TerminalWrites(settings, store, blobs)
        idle = lambda: not self._active  # noqa: E731
        self._spares = free_cores.SpareReadier(
            self._fork_server, lambda: self._queue, idle, settings.spare_after_idle_ms / 1000
        )

    def start(self) -> None:
        s = self.settings
        if self._fork_server is not None:
            self._fork_server.start()  # it imports the parsers while the worker starts
        # With fair admission bulk jobs get `worker_concurrency` slots, the interactive lane more.
        reserve = s.admit_reserve if s.fair_admission else 0
        opts: dict[str, Any] = {
            "concurrency": (s.worker_concurrency or usable_cpus()) + reserve,
            "lockDuration": s.lock_duration_ms,
            "stalledInterval": s.lock_duration_ms,
            # Stalls are counted on the record (attempt), which ends poison jobs itself.
            "maxStalledCount": s.max_attempts,
            "runRetryDelay": 1000,
        }
        self._worker = queue_worker(s, self._process, opts)
        self._queue = queue = JobQueue(s)
        for ended in ("completed", "failed"):  # out of BullMQ's active list: admit the next
            self._worker.on(ended, lambda *_: queue.admit_soon())
        sweeper = Sweeper(s, self.store, self._queue, self.blobs)
        self._sweeper = asyncio.get_running_loop().create_task(sweeper.run())
        self._spares.soon()  # the first job's child too, once the fork server has started

    async def close(self, timeout_s: float) -> None:
        """Stops taking jobs and waits up to `timeout_s` for in-flight ones; what is still
        running then is abandoned to the lock expiry, and another replica takes it over."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self._queue is not None:
            await self._queue.close()
        if self._worker is not None:
            try:
                await asyncio.wait_for(self._worker.close(), timeout_s)
            except TimeoutError:
                log.warning("jobs still running at shutdown; their locks will expire")
                await self._worker.close(force=True)
        await self._spares.close()
        if self._fork_server is not None:
            await asyncio.to_thread(self._fork_server.close)

    async def _process(self, queue_job: Any, token: str) -> str:
        job_id = str(queue_job.data["job_id"])
        if self._queue is not None:  # it left the queue's wait list: admit the next job
            self._queue.admit_soon(job_id)
        # The fence is the lock token alone: it is new for every fetch of every worker, so no
        # attempt number is needed to tell executions apart. The record's `attempt` (counted by
        # the claim script) is the one attempt counter of the job; BullMQ's attemptsMade only
        # says whether BullMQ would run this job again (last_try).
        fence = token
        lock_key = self.store.keys.queue_lock(self.settings.queue_name, job_id)
        attempts = int(queue_job.opts.get("attempts") or self.settings.max_attempts)
        # BullMQ runs the job again only if this execution fails and was not its last.
        last_try = queue_job.attemptsMade + 1 >= attempts
        try:
            return await self._execute(job_id, fence, lock_key, token, last_try)
        except (RetryableFailure, FinalFailure):
            raise
        except Exception as err:
            if last_try:
                # The queue gives up on the job after this: its record must end too, or it
                # would read QUEUED or RUNNING until it expires.
                await self._give_up(job_id, fence, lock_key, token, err)
            raise

    async def _give_up(
        self, job_id: str, fence: str, lock_key: str, token: str, err: Exception
    ) -> None:
        reason = err.reason if isinstance(err, DocparseError) else ErrorReason.WORKER_FAILED
        message = f"the queue gave up on the job after its last attempt failed: {err}"
        try:
            result = await self.writes.retrying(
                lambda: self.store.give_up(
                    job_id, fence, reason, message[:500], lock_key=lock_key, lock_token=token
                )
            )
        except DocparseError as final:
            log.error("job %s: could not record that the queue gave up: %s", job_id, final)
            return
        if result.status == "OK":
            await asyncio.to_thread(self.blobs.delete_upload, job_id)
            observability.job_finished(job_id, "FAILED", reason)

    async def _execute(
        self, job_id: str, fence: str, lock_key: str, token: str, last_try: bool
    ) -> str:
        # Retried through a blip (a re-run of a claim that went in answers DONE): a slow reply
        # never costs an attempt. Quiet: the next write publishes the record (ProgressWriter).
        claim = await self.writes.retrying(
            lambda: self.store.claim(job_id, fence, lock_key=lock_key, lock_token=token, quiet=True)
        )
        if not claim.ok:
            log.info("job %s not claimed: %s", job_id, claim.status, extra={"job_id": job_id})
            if claim.status in ("TERMINAL", "NOT_FOUND"):  # ended (cancelled) before any parse
                await asyncio.to_thread(self.blobs.delete_upload, job_id)
            return claim.status
        record = claim.record
        if record is None:  # not expected: a claim that is in answers with its record
            record = await self.writes.retrying(lambda: self.store.get(job_id))
        writer = ProgressWriter(self.store, job_id, fence, PROGRESS_WRITE_INTERVAL_S)
        writer.start()
        try:
            with job_span(job_id, record, await trace_parent(self.store, job_id)):
                return await self._run_claimed(job_id, fence, record, last_try, writer)
        finally:
            await writer.close()

    async def _run_claimed(
        self,
        job_id: str,
        fence: str,
        record: job_pb2.Job,
        last_try: bool,
        writer: ProgressWriter,
    ) -> str:
        observability.job_claimed(job_id, record.attempt)
        if record.attempt > 1:
            await asyncio.to_thread(self.blobs.discard_results, job_id)
        try:
            if record.attempt > self.settings.max_attempts:
                # Claimed again and again: workers keep dying on it (a poison document).
                outcome = Outcome(
                    ErrorReason.WORKER_LOST,
                    f"the job was taken over {record.attempt - 1} times after workers stopped "
                    "while parsing it",
                )
            else:
                self._active += 1
                try:
                    outcome = await self._parse(
                        job_id, fence, record, parse_overrides(record), writer
                    )
                finally:
                    self._active -= 1
                if not self._active:
                    self._spares.soon()
            created_ms = record.create_time.ToMilliseconds()
            if not outcome.reason:
                observability.job_finished(
                    job_id, "SUCCEEDED", attempt=record.attempt, create_ms=created_ms
                )
                return "SUCCEEDED"
            retry = record.attempt < self.settings.max_attempts and not last_try
            if outcome.reason in RETRYABLE_REASONS and retry:
                await writer.close()  # no progress write after the job is handed back
                if (await self.writes.retrying(lambda: self.store.release(job_id, fence))).ok:
                    observability.job_retried(job_id, record.attempt, outcome.reason)
                    raise RetryableFailure(f"{outcome.reason}: {outcome.message}")
                raise LostOwnership("release refused")
            await self.writes.failed(job_id, fence, outcome, writer)
            observability.job_finished(
                job_id, "FAILED", outcome.reason, attempt=record.attempt, create_ms=created_ms
            )
            raise FinalFailure(f"{outcome.reason}: {outcome.message}")
        except LostOwnership as lost:
            log.warning("job %s: %s", job_id, lost, extra={"event": "job.lost", "job_id": job_id})
            return "LOST"

    def _prepare(
        self, job_id: str, job_options: dict[str, Any]
    ) -> tuple[Path, int, tempfile.TemporaryDirectory[str], ParseOptions] | None:
        """The stored upload and its size, a scratch directory for the package and the assets,
        and the options for the child (the password is read from beside the upload); None when
        the upload is gone. Blocking (the shared volume): one trip to a thread for all three,
        since each trip waits for the loop and the fork waits for all of them. The child's OCR
        pages are read on the cores the replica's other parses leave free (at least one): a
        lone long scan uses them all, a full replica does not oversubscribe its CPUs."""
        input_path = self.blobs.path(self.blobs.input_key(job_id))
        try:
            size = input_path.stat().st_size
        except FileNotFoundError:
            return None
        scratch = self._scratch.make()
        options = self.settings.parse_options(
            password=self.blobs.read_secret(job_id),
            job_id=job_id,
            assets_dir=Path(scratch.name) / "assets",
            **self._scratch.drop_to(),
            **job_options,
            ocr_page_threads=max(1, self._page_threads - self._parsing),
        )
        return input_path, size, scratch, options

    async def _parse(
        self,
        job_id: str,
        fence: str,
        record: job_pb2.Job,
        job_options: dict[str, Any],
        writer: ProgressWriter,
    ) -> Outcome:
        prepared = await asyncio.to_thread(self._prepare, job_id, job_options)
        if prepared is None:
            return Outcome(ErrorReason.WORKER_LOST, "the uploaded document is no longer stored")
        input_path, size, scratch, options = prepared
        free = self._page_threads - (self._active - 1)  # the cores the others leave
        options.page_processes = await free_cores.page_processes(
            self._queue, free, self.settings.pdf_split_min_pages, record.content_type, size
        )

        drafts, switch = self._drafts(job_id, fence, record.attempt, Path(scratch.name), writer)

        async def on_progress(done: int, total: int, stage: str) -> None:
            # each report of the child is an event of its span (parse.child, below)
            tracing.add_current_event("parse.progress", done=done, total=total, stage=stage)
            await switch.on_progress(total)
            try:
                await writer.report(done, total, stage)
            except LostOwnership as err:
                raise await self._lost(job_id, err) from None

        output_path, assets_dir = Path(scratch.name) / "package.pb", Path(scratch.name) / "assets"
        collected: list[tuple[bytes, str]] = []

        def collect() -> tuple[bytes, str]:
            return self._collect(job_id, assets_dir, output_path)

        async def on_done() -> None:
            # The child has written its package and is exiting (its page tables' teardown takes
            # a few ms): collected meanwhile, used only if the child then exits 0.
            collected.append(await asyncio.to_thread(collect))

        succeeded = False
        try:
            run = (record.content_type, input_path, output_path, options)
            outcome = await self._run_child(job_id, run, on_progress, on_done, drafts)
            try:
                writer.check()  # a write the timer made while the last page ran was refused
            except LostOwnership as err:
                raise await self._lost(job_id, err) from None
            if not outcome.reason:
                if not collected:
                    collected.append(await asyncio.to_thread(collect))
                data, sha256 = collected[0]
                await self.writes.succeeded(
                    job_id, fence, record.attempt, outcome, data, sha256, writer
                )
                succeeded = True
        finally:
            # The upload goes once the job has its result; the scratch directory always.
            await asyncio.to_thread(self._clean_up, job_id if succeeded else "", scratch)
        return outcome

    async def _lost(self, job_id: str, err: LostOwnership) -> LostOwnership:
        if err.status != "FENCED":  # the job ended (cancelled) mid-parse
            await asyncio.to_thread(self.blobs.delete_upload, job_id)
        return err

    def _drafts(
        self, job_id: str, fence: str, attempt: int, scratch: Path, writer: ProgressWriter
    ) -> tuple[DraftQueue, DraftSwitch]:
        """Publishes the draft page parts the child writes under `scratch` (work/page_parts.py);
        the pages published go into `writer`'s next write (Progress.ready_pages). The switch
        turns them on once a reader asks (its look, or a write's answer: draft_switch.py)."""
        parts = PageParts(self.store)
        publisher = PagePublisher(parts, self.blobs, job_id, fence, attempt)
        drafts, switch = DraftQueue(publisher, scratch), DraftSwitch(parts, job_id, scratch)
        writer.ready = lambda: page_ranges.of_pages(publisher.ready)
        drafts.on_published, writer.drafts_wanted = writer.nudge, switch.turn_on
        return drafts, switch

    async def _run_child(
        self,
        job_id: str,
        run: tuple[str, Path, Path, ParseOptions],
        on_progress: ProgressCallback,
        on_done: Callable[[], Awaitable[None]],
        drafts: DraftQueue,
    ) -> Outcome:
        """The parse child of the job (`run`: content type, input, output, options), in a
        span of its own and counted among the replica's running parses."""
        content_type, input_path, output_path, options = run
        s = self.settings
        limits = Limits(s.parse_timeout_s, s.parse_cpu_s, s.parse_memory_mb)
        started = time.monotonic()
        # The child itself exports nothing: its span is its run as this supervisor saw it.
        with tracing.span("parse.child", attributes={"docparse.job_id": job_id}) as current:
            self._parsing += 1
            try:
                outcome = await run_parse(
                    content_type, input_path, output_path, limits, on_progress, options,
                    self._fork_server, on_done, drafts.add,
                )  # fmt: skip
            finally:
                self._parsing -= 1
                await drafts.close()
            tracing.set_attributes(
                current,
                {"docparse.content_type": content_type, "docparse.pages": outcome.pages,
                 "docparse.reason": outcome.reason, "docparse.processes": outcome.processes},
            )  # fmt: skip
        observability.parse_observed(
            content_type, time.monotonic() - started, outcome.processes, outcome.start
        )
        return outcome

    def _collect(self, job_id: str, assets_dir: Path, output_path: Path) -> tuple[bytes, str]:
        """Stores the assets (before any SUCCEEDED record can point at them) and reads and
        hashes the package: one trip to a thread."""
        self.blobs.put_assets(job_id, assets_dir)
        data = output_path.read_bytes()
        return data, hashlib.sha256(data).hexdigest()

    def _clean_up(self, job_id: str, scratch: tempfile.TemporaryDirectory[str]) -> None:
        if job_id:
            self.blobs.delete_upload(job_id)
        scratch.cleanup()
