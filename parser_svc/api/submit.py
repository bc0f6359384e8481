"""SubmitJob's write path: validate, deduplicate, store the upload, create, enqueue.

Two gates make "exactly one job" hold for racing submits: an in-process lock per
upload identity (requests to the same replica queue up instead of all hitting Redis), then one
atomic Lua script across replicas that answers REPLAY / CONFLICT / JOINED or creates the job.
Content dedupe is active-only: once a job has ended, the same upload makes a new job.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server import tracing
from docparse_server.errors import error
from docparse_server.tenancy import DEFAULT_TENANT
from parser_svc import PARSER_VERSION, observability
from parser_svc.api.job_options import JobOptions, check_options, of_job, page_cap
from parser_svc.parsers import ocr
from parser_svc.parsers.detect import sniff
from parser_svc.settings import Settings
from parser_svc.state.admission import Lane, Push
from parser_svc.state.caller_scope import current_caller
from parser_svc.state.lua_scripts import CreateResult
from parser_svc.state.store import JobStore
from parser_svc.webhooks.callbacks import Callbacks
from parser_svc.webhooks.outbox import Hook
from parser_svc.work.blobs import BlobStore
from parser_svc.work.queue import JobQueue

log = logging.getLogger(__name__)


def unsupported(label: str) -> DocparseError:
    return error(
        ErrorReason.UNSUPPORTED_FORMAT,
        f"the content is {label} (by its bytes, whatever its name); "
        "supported: PDF, DOCX, DOC, XLSX, XLS, PPTX",
    )


# Language hints per job at most, and the longest tag accepted (BCP-47 tags are short).
MAX_LANGUAGES = 8
MAX_LANGUAGE_TAG = 35


# A BCP-47 tag's shape: a 2-3 letter language, then subtags of 1-8 letters or digits ('_' is
# accepted for '-', as locale names write it).
_LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*")


def check_languages(tags: list[str]) -> list[str]:
    """The OCR language hints, each installed in this image; INVALID_ARGUMENT otherwise."""
    if not tags:
        return []
    if len(tags) > MAX_LANGUAGES or any(len(t) > MAX_LANGUAGE_TAG for t in tags):
        raise error(
            ErrorReason.LANGUAGE_NOT_INSTALLED,
            f"at most {MAX_LANGUAGES} language tags of at most {MAX_LANGUAGE_TAG} characters",
        )
    malformed = [t for t in tags if not _LANGUAGE_TAG.fullmatch(t)]
    if malformed:
        # The whole tag, not only its language: a tag is stored and echoed in every record.
        raise error(
            ErrorReason.LANGUAGE_NOT_INSTALLED,
            f"{ascii(malformed[0])[:80]} is not a BCP-47 language tag (letters, digits and "
            "hyphens: 'de', 'pt-BR', 'zh-Hant-TW')",
        )
    try:
        return ocr.check_languages(tags)
    except ValueError as err:
        raise error(ErrorReason.LANGUAGE_NOT_INSTALLED, str(err)) from err


class KeyedLocks:
    """One asyncio.Lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


@dataclass(frozen=True)
class _Plan:
    """A checked SubmitJob request: its tenant, content digest, cell, keys, fields, callback."""

    tenant: str
    sha256: str
    cell: str
    request_key: str
    dedupe_key: str
    fields: dict[str, str]
    callback: Hook | None
    # What a reuse of the request_id must match: the content's sha256, and the options.
    fingerprint: str = ""
    options: JobOptions = field(default_factory=JobOptions)


class Submitter:
    def __init__(
        self, settings: Settings, store: JobStore, queue: JobQueue, blobs: BlobStore
    ) -> None:
        self.settings = settings
        self.store = store
        self.queue = queue
        self.blobs = blobs
        self._gates = KeyedLocks()
        self.callbacks = Callbacks(settings, store)

    def check_size(self, content: bytes) -> None:
        """The precise error for an empty or too large upload. Costs nothing: it runs before
        the rate limit."""
        if not content:
            raise error(ErrorReason.EMPTY_CONTENT, "the upload is empty")
        self.check_announced(len(content))

    def check_announced(self, size: int, file_name: str = "") -> None:
        """DOCUMENT_TOO_LARGE when `size` bytes are over the service's or the caller's tenant's
        limit (checked before the bytes are received, for streamed uploads)."""
        limit = self.settings.max_upload_bytes
        caller = current_caller.get()
        if caller and caller.limits.max_upload_bytes:
            limit = min(limit, caller.limits.max_upload_bytes)
        if size > limit:
            named = f"{file_name[:200]!r} has" if file_name else "the upload has"
            raise error(
                ErrorReason.DOCUMENT_TOO_LARGE,
                f"{named} {size} bytes; the limit is {limit}",
                {"limit_bytes": str(limit)},
            )

    @staticmethod
    def content_type(content: bytes) -> str:
        """The detected content type, or UNSUPPORTED_FORMAT. Sniffing is bounded (a few KB of
        any zip member, see detect.py) but still reads the upload: it runs after the rate
        limit."""
        detected = sniff(content)
        if detected.kind is None:
            raise unsupported(detected.label)
        return detected.kind

    async def check_rate(self, files: int = 1) -> None:
        """Per-tenant submits per minute, counted in Redis so every replica shares the count."""
        caller = current_caller.get()
        if not caller or not caller.limits.submits_per_minute:
            return
        used = await self.store.count_submits(caller.tenant, int(time.time() // 60), files)
        if used > caller.limits.submits_per_minute:
            observability.SUBMITS_THROTTLED.labels(caller.tenant, "submits_per_minute").inc()
            retry_after = 60 - int(time.time()) % 60
            raise error(
                ErrorReason.RATE_LIMITED,
                f"tenant {caller.tenant} may submit {caller.limits.submits_per_minute} "
                f"documents a minute; retry in {retry_after} s",
                {"retry_after_s": str(retry_after)},
            )

    async def check_queued(self, files: int = 1) -> None:
        """The tenant's queued jobs (waiting for a parse slot) against its key's
        `max_queued_jobs`: RATE_LIMITED before anything is stored. One read, for keys with
        the limit only."""
        caller = current_caller.get()
        limit = caller.limits.max_queued_jobs if caller else 0
        if not caller or not limit or not self.settings.fair_admission:
            return
        queued = await self.queue.admission.queued(caller.tenant)
        if queued + files > limit:
            observability.SUBMITS_THROTTLED.labels(caller.tenant, "max_queued_jobs").inc()
            raise error(
                ErrorReason.RATE_LIMITED,
                f"tenant {caller.tenant} has {queued} jobs waiting for a parse slot and may "
                f"have {limit}; retry once some have started",
                {"limit": str(limit), "retry_after_s": "5"},
            )

    def lane(self, request: parser_service_pb2.SubmitJobRequest) -> Lane:
        """Interactive when a caller waits for the answer (a server wait) or the upload is
        small; bulk otherwise."""
        small = len(request.content) <= self.settings.admit_interactive_bytes
        return "interactive" if request.wait_timeout_ms > 0 or small else "bulk"

    async def submit(self, request: parser_service_pb2.SubmitJobRequest) -> job_pb2.Job:
        """Creates the job (or answers with the job an earlier request made) and enqueues it.

        Every step is safe to retry after an unknown outcome (docs/operations.md, "Retry
        semantics"): the create script recognises its own job on a re-run; enqueueing is
        idempotent (the queue job id is the job id) and is repeated whenever a submit answers
        with a job that is still QUEUED; what a lost reply or a dead replica left unqueued, the
        sweeper enqueues (parser_svc/work/sweeper.py); an upload whose create may or may not
        have run is kept for the sweeper to enqueue or delete.
        """
        plan = await self._plan(request)
        async with self._gates.hold(plan.dedupe_key or plan.request_key or plan.sha256):
            job_id = self.store.keys.new_id(plan.cell)
            created = await self._create(job_id, request, plan)
            if not created.created:
                return await self._answer_earlier(job_id, created, request, plan)
        observability.job_created(
            job_id,
            tenant=plan.tenant,
            content_type=plan.fields["content_type"],
            size_bytes=len(request.content),
            batch_id="",
            file_name=plan.fields["file_name"],
        )
        await self.enqueue([job_id], self.lane(request))
        # The create's own record (QUEUED, version 1); a re-run of the create that found it
        # (EXISTS, after a lost reply) reads it.
        return created.record or await self.store.get(job_id)

    async def _plan(self, request: parser_service_pb2.SubmitJobRequest) -> _Plan:
        """The checked request (size, rate, type, languages, callback) and what its create
        writes: the record's fields and the keys that deduplicate it."""
        caller = current_caller.get()
        tenant = caller.tenant if caller else DEFAULT_TENANT
        content = request.content
        self.check_size(content)
        await self.check_rate()
        await self.check_queued()
        content_type = self.content_type(content)
        languages = check_languages(list(request.languages))
        options = check_options(request, content_type, self.settings.ocr_dpi)
        callback = await self.callbacks.check(request, tenant)
        sha256 = hashlib.sha256(content).hexdigest()
        keys = self.store.keys
        # Password-protected uploads are never joined: another caller's password may differ.
        # Other language hints, pages, image or OCR modes are another parse.
        hints = ",".join(languages)
        identity = f"{PARSER_VERSION}\0{content_type}\0{sha256}" + (f"\0{hints}" if hints else "")
        cap = page_cap(self.settings.parse_max_pages)
        identity += options.identity() + (f"\0m={cap}" if cap else "")
        # The request_id's match: the bytes, and the options when they are not the defaults.
        fingerprint = sha256
        if hints or options.identity() or cap:
            extra = f"{hints}{options.identity()}" + (f"\0m={cap}" if cap else "")
            fingerprint = hashlib.sha256(f"{sha256}\0{extra}".encode()).hexdigest()
        # Redis Cluster: the job's cell follows its upload, so the same bytes meet their running
        # job there and a retry (same request_id, same bytes) finds its first job there. One
        # Redis: ''.
        cell = keys.place(tenant, identity)
        request_key = keys.request(tenant, request.request_id, cell) if request.request_id else ""
        if request.request_id and keys.cells:
            await self.check_request_content(tenant, request.request_id, fingerprint)
        dedupe_key = "" if request.password else keys.active_upload(tenant, identity, cell)
        fields = {
            "file_name": request.file_name[:512],
            "content_sha256": sha256,
            "content_type": content_type,
            "size_bytes": str(len(content)),
            "tenant": tenant,
            "batch_id": "",
        }
        if hints:
            fields["languages"] = hints
        fields.update(options.fields())
        if cap:
            fields["max_pages"] = str(cap)
        fields.update(tracing.current_carrier())  # a worker continues this trace (worker.py)
        return _Plan(
            tenant, sha256, cell, request_key, dedupe_key, fields, callback, fingerprint, options
        )

    async def _create(
        self, job_id: str, request: parser_service_pb2.SubmitJobRequest, plan: _Plan
    ) -> CreateResult:
        """Stores the upload (and its password) and runs the create script."""
        callback = plan.callback
        if callback:
            # Before the create: a job with a callback never exists without its delivery
            # (parser_svc/webhooks/callbacks.py); one whose create does not happen is dropped.
            await self.callbacks.outbox.add(job_id, plan.tenant, callback)
        await asyncio.to_thread(self.blobs.put_input, job_id, request.content)
        if request.password:
            # Beside the input, owner-only; never in the record. Deleted when the parse ends.
            await asyncio.to_thread(self.blobs.put_secret, job_id, request.password)
        try:
            return await self.store.create(
                job_id,
                plan.fields,
                request_key=plan.request_key,
                dedupe_key=plan.dedupe_key,
                fingerprint=plan.fingerprint,
            )
        except DocparseError as err:
            if err.code != grpc.StatusCode.UNAVAILABLE:
                await asyncio.to_thread(self.blobs.delete_upload, job_id)
                if callback:
                    await self.callbacks.outbox.discard(job_id, callback)
            # UNAVAILABLE: the create may have run. Keep the upload; the sweeper enqueues
            # the job if it exists, or deletes the upload if it does not.
            raise

    async def _answer_earlier(
        self,
        job_id: str,
        created: CreateResult,
        request: parser_service_pb2.SubmitJobRequest,
        plan: _Plan,
    ) -> job_pb2.Job:
        """The job an earlier request made (REPLAY, JOINED), or REQUEST_ID_REUSED (CONFLICT):
        this submit's upload goes, its callback follows the job it answers with."""
        await asyncio.to_thread(self.blobs.delete_upload, job_id)
        callback = plan.callback
        if callback:  # the callback goes with the job this submit answers with
            if created.status != "CONFLICT":
                await self.callbacks.outbox.add(created.job_id, plan.tenant, callback)
            await self.callbacks.outbox.discard(job_id, callback)
        if created.status == "CONFLICT":
            raise await self._reused(request.request_id, created.job_id, plan)
        log.info(
            "submit answered with job %s (%s)",
            created.job_id,
            created.status,
            extra={"event": "job.joined", "job_id": created.job_id, "tenant": plan.tenant},
        )
        job = await self.store.get(created.job_id)
        if job.state == job_pb2.STATE_QUEUED:
            # Its first submit may have lost the reply before enqueueing: enqueue again
            # (a no-op when the queue has it).
            await self.enqueue([job.job_id], self.lane(request))
        return job

    async def _reused(self, request_id: str, first_id: str, plan: _Plan) -> DocparseError:
        """REQUEST_ID_REUSED, saying whether the first job had other content or the same
        content with other options (or languages)."""
        what = "other content"
        with contextlib.suppress(DocparseError):
            first = await self.store.get(first_id)
            if first.content_sha256 == plan.sha256:
                what = (
                    f"the same content with other options ({of_job(first).describe()}, "
                    f"languages {list(first.languages)}; this request: "
                    f"{plan.options.describe()}, languages "
                    f"{[t for t in plan.fields.get('languages', '').split(',') if t]})"
                )
        return error(
            ErrorReason.REQUEST_ID_REUSED,
            f"request_id {request_id!r} was used for {what} (job {first_id}); use a new "
            "request_id for another request",
        )

    async def check_request_content(self, tenant: str, request_id: str, sha256: str) -> None:
        """Redis Cluster: the request_id's first content is kept in the request's own cell
        (SET NX: the first submit's bytes win); other bytes under it are REQUEST_ID_REUSED, as
        the create script says on one Redis (there the job's cell, the upload's, would not
        see another upload's request). A lost reply is harmless: the retry finds its own."""
        if await self.store.first_content(tenant, request_id, sha256) != sha256:
            raise error(
                ErrorReason.REQUEST_ID_REUSED,
                f"request_id {request_id!r} was used for other content or other options",
            )

    async def enqueue(self, job_ids: list[str], lane: Lane = "bulk") -> None:
        """Queues the caller's jobs in `lane` (work/queue.py); idempotent. A failure is left to
        the sweeper, which enqueues every created job the queue does not have: the job exists
        and will run."""
        caller = current_caller.get()
        tenant = caller.tenant if caller else DEFAULT_TENANT
        weight = float(caller.limits.weight or 1) if caller else 1.0
        cap = caller.limits.max_running_jobs if caller else 0
        for job_id in job_ids:
            try:
                await self.queue.enqueue(job_id, Push(job_id, tenant, lane, weight, cap))
            except DocparseError as err:
                log.warning(
                    "enqueue of job %s failed (%s); the sweeper will enqueue it",
                    job_id,
                    err.reason,
                    extra={"event": "job.enqueue_deferred", "job_id": job_id},
                )
