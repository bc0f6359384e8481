"""Server-Sent Events over WatchJob / WatchBatch, resumable with the record version.

    GET /v1/jobs/{id}/events      event: job    id: <Job.version>    data: <Job JSON>
    GET /v1/batches/{id}/events   event: batch  id: <Batch.version>  data: <Batch JSON>

- `Last-Event-ID` (what a browser's EventSource sends when it reconnects) or `?after_version=`
  is the resume cursor: only records with a greater version are sent (the larger of the two
  wins). A stream whose job / batch already ended at or below the cursor answers 204, which
  tells an EventSource to stop reconnecting.
- Upstream heartbeats become SSE comments (`: heartbeat <version>`); the stream starts with
  `retry:` (the browser's reconnect delay).
- After the terminal record (the batch: every file terminal) comes `event: end` and the stream
  closes.
- When the upstream watch fails (UNAVAILABLE, a replica draining, a connection cut by
  max_connection_age), the gateway opens it again itself with after_version = the last version
  it sent, on whichever replica round robin picks, and says so in a comment (`: resumed ...`).
  The browser sees one unbroken stream. After `sse_resume_budget_s` of failures the stream
  ends (no `end` event) and the browser's own reconnect takes over.
- An error the stream cannot resume from (NOT_FOUND, ...) is sent as `event: stream-error`
  with the JSON error body before closing. Errors before the stream starts (no such job) are
  ordinary HTTP errors (404, 410, 503, ...), checked with one GetStatus / GetBatch first; so
  is a watch the replica refuses (429 TOO_MANY_STREAMS: the tenant's watches there count
  too): the 200 is sent only once the replica has taken the upstream watch.
- Nothing about the stream lives in the gateway beyond the request: any gateway replica serves
  any reconnect.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web
from google.protobuf.message import Message

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.errors import cursor_ahead
from gateway.http.api import TERMINAL, text, to_json
from gateway.http.errors import error_body, parse_uint
from gateway.http.keys import CLOSING, SETTINGS, STREAMS, UPSTREAM
from gateway.http.upstream import HttpError, Metadata, Upstream, rpc_failure

# Upstream failures the gateway resumes from (the stream is fine to reopen with after_version).
RESUMABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    }
)
_CLOSED = object()
# How long the 200 waits for the replica to take the watch (its headers). A replica that says
# nothing by then (stopped, or an older one that sends its headers with the first record, which
# a resumed stream with nothing new gets only at the heartbeat) is left behind: the stream
# starts and opens its watch again, as after any failed one.
ACCEPT_WAIT_S = 5.0
# A reply that carries the record (GetStatusResponse.job, GetBatchResponse.batch), and who
# answered (X-Served-By).
Current = tuple[Message, str]


@dataclass(frozen=True)
class Stream:
    """What differs between the job and the batch stream."""

    # "job" or "batch": the SSE event name, the path parameter `<kind>_id`, and the field
    # that carries the record in the replies of `current` and of `watch`.
    kind: str
    # The record as it is now (GetStatus / GetBatch): the reply and X-Served-By.
    current: Callable[[Upstream, str, web.Request], Awaitable[Current]]
    # Opens the upstream watch (WatchJob / WatchBatch) of an id after a version.
    watch: Callable[[Upstream, str, int, Metadata], Any]
    # Whether a record is the last one.
    final: Callable[[Any], bool]

    def record(self, message: Message) -> Message | None:
        """The record an upstream message carries (None for a heartbeat)."""
        if not message.HasField(self.kind):
            return None
        record: Message = getattr(message, self.kind)
        return record


def batch_done(batch: parser_service_pb2.Batch) -> bool:
    return batch.total > 0 and batch.completed >= batch.total


def job_done(job: job_pb2.Job) -> bool:
    return job.state in TERMINAL


def _job_now(upstream: Upstream, job_id: str, request: web.Request) -> Awaitable[Current]:
    message = parser_service_pb2.GetStatusRequest(job_id=job_id)
    return upstream.unary(upstream.stub.GetStatus, message, request)


def _batch_now(upstream: Upstream, batch_id: str, request: web.Request) -> Awaitable[Current]:
    message = parser_service_pb2.GetBatchRequest(batch_id=batch_id)
    return upstream.unary(upstream.stub.GetBatch, message, request)


def _watch_job(upstream: Upstream, job_id: str, after: int, metadata: Metadata) -> Any:
    message = parser_service_pb2.WatchJobRequest(job_id=job_id, after_version=after)
    return upstream.stub.WatchJob(message, metadata=metadata)


def _watch_batch(upstream: Upstream, batch_id: str, after: int, metadata: Metadata) -> Any:
    message = parser_service_pb2.WatchBatchRequest(batch_id=batch_id, after_version=after)
    return upstream.stub.WatchBatch(message, metadata=metadata)


JOB_STREAM = Stream("job", _job_now, _watch_job, job_done)
BATCH_STREAM = Stream("batch", _batch_now, _watch_batch, batch_done)


def resume_cursor(request: web.Request) -> int:
    cursor = 0
    for name, raw in (
        ("Last-Event-ID", request.headers.get("Last-Event-ID", "")),
        ("after_version", request.query.get("after_version", "")),
    ):
        raw = raw.strip()
        if raw:  # a uint64, as WatchJobRequest.after_version
            cursor = max(cursor, parse_uint(raw, name, ErrorReason.INVALID_RESUME_CURSOR))
    return cursor


async def job_events(request: web.Request) -> web.StreamResponse:
    """GET /v1/jobs/{id}/events."""
    return await events(request, JOB_STREAM)


async def batch_events(request: web.Request) -> web.StreamResponse:
    """GET /v1/batches/{id}/events."""
    return await events(request, BATCH_STREAM)


async def events(request: web.Request, stream: Stream) -> web.StreamResponse:
    """The events of one job or batch; one of the tenant's event-stream slots while open."""
    with request.app[STREAMS].slot(request.app[UPSTREAM].caller(request)):
        id_ = text(request.match_info[f"{stream.kind}_id"])
        after = resume_cursor(request)
        upstream = request.app[UPSTREAM]
        reply, served = await stream.current(upstream, id_, request)
        current: Any = getattr(reply, stream.kind)
        if stream.final(current) and current.version <= after:
            return web.Response(status=204, headers={"X-Served-By": served})
        if after > current.version:  # 400 before the stream, as WatchJob/WatchBatch refuse it
            raise HttpError(cursor_ahead(id_, after, current.version, stream.kind), served)
        metadata = upstream.metadata(request)

        def open_(version: int) -> Any:
            return stream.watch(upstream, id_, version, metadata)

        first = await _accepted(open_(after), ACCEPT_WAIT_S)
        try:
            return await _relay(request, stream, open_, after, served, first)
        finally:
            if first is not None:
                first.cancel()  # the pump cancels it too; not if the response never started


async def _accepted(call: Any, timeout_s: float) -> Any:
    """The upstream watch once the replica has taken it (its headers come as soon as it holds
    one of the tenant's stream slots), so that a refusal (TOO_MANY_STREAMS, PERMISSION_DENIED,
    ...) is an HTTP error with its reason before anything is sent, not a 200 whose stream
    then says so: an EventSource would reconnect into the same refusal every `retry:`. None
    when the replica does not answer in `timeout_s` (the call is cancelled)."""
    headers = asyncio.ensure_future(call.initial_metadata())
    await asyncio.wait({headers}, timeout=timeout_s)
    if not headers.done():
        headers.cancel()
        call.cancel()
        return None
    if call.done() and await call.code() not in (grpc.StatusCode.OK, *RESUMABLE):
        try:
            await call.read()
        except grpc.aio.AioRpcError as err:
            raise rpc_failure(err) from None
    return call


def event(name: str, data: str, event_id: int | str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {name}\ndata: {data}\n\n".encode()


def comment(text: str) -> bytes:
    return f": {text}\n\n".encode()


async def _relay(
    request: web.Request,
    stream: Stream,
    open_: Callable[[int], Any],
    after: int,
    served: str,
    first: Any,
) -> web.StreamResponse:
    def pump(response: web.StreamResponse, closing: asyncio.Future[Any], budget_s: float) -> Any:
        return _pump(response, stream, open_, after, closing, budget_s, first)

    return await event_stream(request, served, pump)


async def event_stream(
    request: web.Request,
    served: str,
    pump: Callable[[web.StreamResponse, asyncio.Future[Any], float], Awaitable[None]],
) -> web.StreamResponse:
    """An event-stream answer (headers, the retry hint) whose events `pump(response, closing,
    resume budget)` writes; a browser that leaves ends it quietly."""
    settings = request.app[SETTINGS]
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache, no-transform",
            "X-Accel-Buffering": "no",
            "X-Served-By": served,
        }
    )
    await response.prepare(request)
    closing = asyncio.ensure_future(request.app[CLOSING].wait())
    try:
        await response.write(f"retry: {settings.sse_retry_ms}\n\n".encode())
        await pump(response, closing, settings.sse_resume_budget_s)
        await response.write_eof()
    except ConnectionResetError:
        pass  # the browser left; its reconnect (if any) resumes from its Last-Event-ID
    finally:
        closing.cancel()
    return response


async def _next(call: Any, closing: asyncio.Future[Any]) -> Any:
    """The next upstream message, grpc.aio.EOF, or _CLOSED when the gateway shuts down."""
    read = asyncio.ensure_future(call.read())
    try:
        await asyncio.wait({read, closing}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not read.done():
            read.cancel()
    return read.result() if read.done() and not read.cancelled() else _CLOSED


async def _pump(
    response: web.StreamResponse,
    stream: Stream,
    open_: Callable[[int], Any],
    last: int,
    closing: asyncio.Future[Any],
    budget_s: float,
    first: Any,
) -> None:
    """Relays upstream watches after `last`, starting with `first` (an open one) if given."""
    failing_since: float | None = None
    delay = 0.05
    while True:
        call = first if first is not None else open_(last)  # the upstream watch after `last`
        first = None
        try:
            while True:
                message = await _next(call, closing)
                if message is _CLOSED:
                    await response.write(comment("gateway shutting down; reconnect to resume"))
                    return
                if message is grpc.aio.EOF:
                    break
                failing_since, delay = None, 0.05  # the upstream answers again
                record = stream.record(message)
                if record is None:
                    await response.write(comment(f"heartbeat {message.heartbeat.last_version}"))
                    continue
                version = int(record.version)  # type: ignore[attr-defined]
                if version <= last:
                    continue  # never send an older record (a replica lagging after failover)
                await response.write(event(stream.kind, to_json(record), version))
                last = version
                if stream.final(record):
                    await response.write(event("end", "{}"))
                    return
            # Ended OK before the final record: the cursor was ahead of the record (a bogus
            # Last-Event-ID, a store that went back after a failover). The client's reconnect
            # sorts it out: 204 if the job is over, else the stream from its cursor.
            await response.write(comment(f"upstream ended at version {last}; reconnect"))
            return
        except grpc.aio.AioRpcError as err:
            error = DocparseError.from_rpc_error(err)
            if error.code not in RESUMABLE:
                await response.write(event("stream-error", json.dumps(error_body(error))))
                return
            problem = f"upstream {error.code.name} {error.reason}".rstrip()
        finally:
            call.cancel()
        now = time.monotonic()
        failing_since = failing_since or now
        if now - failing_since > budget_s:
            await response.write(comment(f"{problem}; giving up, reconnect to resume"))
            return
        await response.write(comment(f"{problem}; resuming after version {last}"))
        if closing in (await asyncio.wait({closing}, timeout=delay))[0]:
            return
        delay = min(delay * 2, 1.0)
