"""The docparse.v1.ParserService servicer. Holds no job state of its own: every call reads or
writes the shared store, so any replica answers any call."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc, reading_package_pb2
from docparse_server import tracing
from docparse_server.errors import check_request_id, error
from docparse_server.tenancy import DEFAULT_TENANT, Caller, StreamSlots
from parser_svc import observability
from parser_svc.api.batches import Batches
from parser_svc.api.listing import JobListing
from parser_svc.api.page_stream import PageStream, parse_cursor
from parser_svc.api.read_limits import ReadLimit
from parser_svc.api.results import CHUNK_BYTES, Results
from parser_svc.api.status_answers import EncodedJobs
from parser_svc.api.submit import Submitter
from parser_svc.api.tenant_shares import tenant_shares
from parser_svc.api.uploads import UPLOAD_ACCEPTED, receive_batch_upload
from parser_svc.api.watch import watch_job
from parser_svc.parsers import mime_for_ext
from parser_svc.settings import Settings
from parser_svc.state.caller_scope import current_caller, current_tenant
from parser_svc.state.events import EventHub
from parser_svc.state.records import is_terminal
from parser_svc.state.store import JobStore
from parser_svc.work.blobs import BlobStore
from parser_svc.work.queue import JobQueue

log = logging.getLogger(__name__)
Context = grpc.aio.ServicerContext[Any, Any]
# Assets are named <32 hex digits>.<extension>: png, jpeg, jp2, ...
MAX_ASSET_EXT = 8


def _check_job_id(job_id: str) -> None:
    if not job_id or len(job_id) > 64 or not all(c.isalnum() or c in "-_" for c in job_id):
        raise error(ErrorReason.INVALID_JOB_ID, f"not a job id: {job_id[:80]!r}")


async def _checked_header(
    requests: AsyncIterator[parser_service_pb2.UploadBatchRequest],
) -> AsyncIterator[parser_service_pb2.UploadBatchRequest]:
    """An upload's messages, its header's request_id bounded before anything is stored."""
    async for request in requests:
        if request.HasField("header"):
            check_request_id(request.header.request_id)
        yield request


class ParserService(parser_service_pb2_grpc.ParserServiceServicer):
    def __init__(
        self,
        settings: Settings,
        store: JobStore,
        hub: EventHub,
        queue: JobQueue,
        blobs: BlobStore,
    ) -> None:
        self.settings = settings
        self.store = store
        self.hub = hub
        self.queue = queue
        self.blobs = blobs
        self.submitter = Submitter(settings, store, queue, blobs)
        self.batches = Batches(store, hub, self.submitter)
        self.streams = StreamSlots(settings.max_streams_per_tenant, "watch streams on this replica")
        self.uploads = StreamSlots(
            settings.max_uploads_per_tenant,
            "uploads on this replica",
            reason=ErrorReason.TOO_MANY_UPLOADS,
            per_key=lambda limits: 0,  # no per-key override: the replica's memory is what it bounds
        )
        self.encoded = EncodedJobs()
        self.listing = JobListing(store, settings, self.encoded)
        self.results = Results(store, hub, blobs, settings.draft_backfill_wait_s)
        self.pages = PageStream(store, hub, blobs, self.results.package_bytes)
        wait_s = settings.read_limit_max_wait_s
        self.list_limit = ReadLimit(
            "ListJobs", settings.list_jobs_per_s, settings.list_jobs_burst, max_wait_s=wait_s
        )
        self.result_limit = ReadLimit(
            "GetResult/GetAsset",
            settings.result_reads_per_s,
            settings.result_reads_burst,
            max_wait_s=wait_s,
        )

    async def SubmitJob(
        self, request: parser_service_pb2.SubmitJobRequest, context: Context
    ) -> parser_service_pb2.SubmitJobResponse:
        check_request_id(request.request_id)
        with tracing.span(
            "docparse.v1.ParserService/SubmitJob",
            parent=tracing.carrier_from(context.invocation_metadata() or ()),
            kind="server",
        ) as current:
            job = await self.submitter.submit(request)  # the record keeps this span's context
            tracing.set_attributes(current, {"docparse.job_id": job.job_id})
        if request.wait_timeout_ms and not is_terminal(job):
            job = await self._wait_in_slot(job, request.wait_timeout_ms / 1000, context)
        return parser_service_pb2.SubmitJobResponse(job=job)

    async def _wait_in_slot(
        self, job: job_pb2.Job, budget_s: float, context: Context
    ) -> job_pb2.Job:
        """A sync wait watches the job like a stream, so it takes one of the tenant's stream
        slots; a tenant that has none free gets the async answer at once (never an error: the
        job is made)."""
        try:
            with self.streams.slot(current_caller.get() or Caller()):
                return await self._wait(job, budget_s, context)
        except DocparseError as err:
            if err.reason != ErrorReason.TOO_MANY_STREAMS:
                raise
            return job

    async def _wait(self, job: job_pb2.Job, budget_s: float, context: Context) -> job_pb2.Job:
        remaining = context.time_remaining()
        if remaining is not None:
            budget_s = min(budget_s, max(0.0, remaining - 0.2))
        latest = job
        try:
            async with asyncio.timeout(budget_s):
                async for event in self._watch(job.job_id, job.version):
                    if event.HasField("job"):
                        latest = event.job
        except TimeoutError:
            pass  # the async answer: the job is still queued or running
        except DocparseError as err:
            if err.reason != ErrorReason.SERVER_SHUTTING_DOWN:
                raise
        return latest

    def _watch(
        self, job_id: str, after_version: int
    ) -> AsyncIterator[parser_service_pb2.WatchJobResponse]:
        return watch_job(
            self.store,
            self.hub,
            job_id,
            after_version,
            resync_s=self.settings.watch_resync_s,
            heartbeat_s=self.settings.watch_heartbeat_s,
        )

    async def GetStatus(
        self, request: parser_service_pb2.GetStatusRequest, context: Context
    ) -> parser_service_pb2.GetStatusResponse:
        """The servicer interface's GetStatus; the server answers with `get_status_encoded`."""
        encoded = await self.get_status_encoded(request, context)
        return parser_service_pb2.GetStatusResponse.FromString(encoded)

    async def get_status_encoded(
        self, request: parser_service_pb2.GetStatusRequest, context: Context
    ) -> bytes:
        """GetStatus, its answer already encoded (parser_svc/api/status_answers.py): the server
        registers this method with no response serializer (`parser_service_handlers`)."""
        _check_job_id(request.job_id)
        record = await self.store.get_record(request.job_id)
        return self.encoded.status(request.job_id, record)

    async def WatchJob(
        self, request: parser_service_pb2.WatchJobRequest, context: Context
    ) -> AsyncIterator[parser_service_pb2.WatchJobResponse]:
        with self.streams.slot(current_caller.get() or Caller()):
            _check_job_id(request.job_id)
            # Headers now, not with the first message: the stream is taken (the gateway's SSE
            # answers 200 only then, and an HTTP error for a refusal before it).
            await context.send_initial_metadata(())
            async for event in self._watch(request.job_id, request.after_version):
                yield event

    async def StreamResult(
        self, request: parser_service_pb2.StreamResultRequest, context: Context
    ) -> AsyncIterator[parser_service_pb2.StreamResultResponse]:
        with self.streams.slot(current_caller.get() or Caller()):
            _check_job_id(request.job_id)
            parse_cursor(request.cursor)  # a cursor not made here: refused before the headers
            # Headers now, as WatchJob's: the gateway's page events answer 200 only then.
            await context.send_initial_metadata(())
            stream = self.pages.stream(request.job_id, request.cursor, request.pages_per_message)
            async for message in stream:
                yield message

    async def GetResult(
        self, request: parser_service_pb2.GetResultRequest, context: Context
    ) -> AsyncIterator[parser_service_pb2.GetResultResponse]:
        """The package of a SUCCEEDED job, or some of its pages, also while it runs
        (parser_svc/api/results.py)."""
        _check_job_id(request.job_id)
        await self.result_limit.take(current_tenant() or DEFAULT_TENANT)
        async for message in await self.results.answer(request):
            yield message

    async def GetAsset(
        self, request: parser_service_pb2.GetAssetRequest, context: Context
    ) -> AsyncIterator[parser_service_pb2.GetAssetResponse]:
        """Streams one asset of a SUCCEEDED job from this deployment's blob store."""
        try:
            _check_job_id(request.job_id)
            await self.result_limit.take(current_tenant() or DEFAULT_TENANT)
            asset = await self._asset(request)
            data = await asyncio.to_thread(self.blobs.read_asset, request.job_id, asset.asset_id)
        except OSError as err:  # missing, or unreadable: the path stays in the server's log
            if not isinstance(err, FileNotFoundError):
                log.warning("asset unreadable: %s", err, extra={"job_id": request.job_id})
            raise error(
                ErrorReason.ASSET_NOT_FOUND,
                f"job {request.job_id} has no asset {request.asset_id!r}",
                {"job_id": request.job_id, "asset_id": request.asset_id},
            ) from err
        asset.size_bytes = len(data)
        asset.sha256 = hashlib.sha256(data).hexdigest()
        for offset in range(0, max(len(data), 1), CHUNK_BYTES):
            message = parser_service_pb2.GetAssetResponse(
                chunk=data[offset : offset + CHUNK_BYTES], offset=offset
            )
            if offset == 0:
                message.asset.CopyFrom(asset)
            yield message

    async def _asset(self, request: parser_service_pb2.GetAssetRequest) -> Any:
        env = self.settings.env
        if request.deployment and request.deployment != env:
            raise error(
                ErrorReason.ASSET_OTHER_DEPLOYMENT,
                f"the asset belongs to deployment {request.deployment[:80]!r}; this is {env!r}: "
                "ask that deployment",
                {"deployment": request.deployment[:80], "this_deployment": env},
            )
        name = request.asset_id
        stem, _, ext = name.partition(".")
        if (
            len(stem) != 32
            or not all(c in "0123456789abcdef" for c in stem)
            or not (ext.isascii() and ext.isalnum() and len(ext) <= MAX_ASSET_EXT)
        ):
            raise error(
                ErrorReason.INVALID_ASSET_ID,
                f"not an asset id: {name[:80]!r} (32 hex digits, a dot, an extension)",
            )
        job = await self.store.get(request.job_id)
        if job.state != job_pb2.STATE_SUCCEEDED:
            await self.results.package_bytes(job)  # raises the precise FAILED_PRECONDITION
        return reading_package_pb2.Asset(
            asset_id=name,
            mime_type=mime_for_ext(ext),
            deployment=env,
            job_id=request.job_id,
        )

    async def ListJobs(
        self, request: parser_service_pb2.ListJobsRequest, context: Context
    ) -> parser_service_pb2.ListJobsResponse:
        """The servicer interface's ListJobs; the server answers with `list_jobs_encoded`."""
        encoded = await self.list_jobs_encoded(request, context)
        return parser_service_pb2.ListJobsResponse.FromString(encoded)

    async def list_jobs_encoded(
        self, request: parser_service_pb2.ListJobsRequest, context: Context
    ) -> bytes:
        """The caller's jobs, newest first, a page at a time (parser_svc/api/listing.py),
        already encoded as GetStatus's answer is."""
        tenant = current_tenant() or DEFAULT_TENANT
        await self.list_limit.take(tenant)
        return await self.listing.page_encoded(tenant, request)

    async def GetTenantShares(
        self, request: parser_service_pb2.GetTenantSharesRequest, context: Context
    ) -> parser_service_pb2.GetTenantSharesResponse:
        """Operators only: each tenant's share now (parser_svc/api/tenant_shares.py)."""
        return await tenant_shares(self.settings, self.queue)

    async def CancelJob(
        self, request: parser_service_pb2.CancelJobRequest, context: Context
    ) -> parser_service_pb2.CancelJobResponse:
        _check_job_id(request.job_id)
        job = await self.store.get(request.job_id)
        result = await self.store.cancel(request.job_id) if not is_terminal(job) else None
        if result is None or result.status == "TERMINAL":
            job = await self.store.get(request.job_id)
            state = job_pb2.State.Name(job.state)
            raise error(
                ErrorReason.JOB_ALREADY_ENDED,
                f"job {job.job_id} already ended {state}; nothing to cancel",
                {"job_id": job.job_id, "state": state},
            )
        await self.queue.discard(request.job_id)
        # Its upload and password file go now; a running parse already has the file open
        # and stops at its next page write, which is refused.
        await asyncio.to_thread(self.blobs.delete_upload, request.job_id)
        observability.job_finished(request.job_id, "CANCELLED")
        return parser_service_pb2.CancelJobResponse(job=await self.store.get(request.job_id))

    async def CreateBatch(
        self, request: parser_service_pb2.CreateBatchRequest, context: Context
    ) -> parser_service_pb2.CreateBatchResponse:
        check_request_id(request.request_id)
        batch = await self.batches.create(
            request.files, request.request_id, list(request.languages), request.callback
        )
        return parser_service_pb2.CreateBatchResponse(batch=batch)

    async def UploadBatch(
        self,
        request_iterator: AsyncIterator[parser_service_pb2.UploadBatchRequest],
        context: Context,
    ) -> parser_service_pb2.UploadBatchResponse:
        with self.uploads.slot(current_caller.get() or Caller()):
            batch_id, request_id, files, hook = await receive_batch_upload(
                _checked_header(request_iterator),
                self.batches.new_id,
                self.submitter,
                accepted=lambda: context.send_initial_metadata(UPLOAD_ACCEPTED),
            )
            batch = await self.batches.create_stored(batch_id, files, request_id, hook)
        return parser_service_pb2.UploadBatchResponse(batch=batch)

    async def GetBatch(
        self, request: parser_service_pb2.GetBatchRequest, context: Context
    ) -> parser_service_pb2.GetBatchResponse:
        _check_job_id(request.batch_id)
        return parser_service_pb2.GetBatchResponse(batch=await self.batches.get(request.batch_id))

    async def WatchBatch(
        self, request: parser_service_pb2.WatchBatchRequest, context: Context
    ) -> AsyncIterator[parser_service_pb2.WatchBatchResponse]:
        with self.streams.slot(current_caller.get() or Caller()):
            _check_job_id(request.batch_id)
            # As WatchJob: headers once the stream is taken.
            await context.send_initial_metadata(())
            async for event in self.batches.watch(
                request.batch_id,
                request.after_version,
                heartbeat_s=self.settings.watch_heartbeat_s,
                resync_s=self.settings.watch_resync_s,
            ):
                yield event


SERVICE = parser_service_pb2.DESCRIPTOR.services_by_name["ParserService"]
# The handler factory for each shape of method: (client streams, server streams).
_HANDLER_KINDS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def parser_service_handlers(service: ParserService) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """A handler for each method of the service in the proto, made as the generated
    registration makes it (its request decoded, its response encoded by the message classes of
    parser_service_pb2), except GetStatus and ListJobs: they answer with the bytes
    `get_status_encoded` and `list_jobs_encoded` return, so their handlers have no response
    serializer."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in SERVICE.methods:
        request = getattr(parser_service_pb2, method.input_type.name)
        response = getattr(parser_service_pb2, method.output_type.name)
        make = _HANDLER_KINDS[(method.client_streaming, method.server_streaming)]
        handlers[method.name] = make(
            getattr(service, method.name),
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
    handlers["GetStatus"] = grpc.unary_unary_rpc_method_handler(
        service.get_status_encoded,
        request_deserializer=parser_service_pb2.GetStatusRequest.FromString,
    )
    handlers["ListJobs"] = grpc.unary_unary_rpc_method_handler(
        service.list_jobs_encoded,
        request_deserializer=parser_service_pb2.ListJobsRequest.FromString,
    )
    return handlers


def add_parser_service(service: ParserService, server: grpc.aio.Server) -> None:
    """Registers the service's handlers (`parser_service_handlers`) on `server`, both ways the
    generated registration does: a generic handler and registered methods."""
    handlers = parser_service_handlers(service)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),)
    )
    server.add_registered_method_handlers(SERVICE.full_name, handlers)
