"""Server-Sent Events over StreamResult: a job's pages as they are read, then its final pages.

    GET /v1/jobs/{id}/pages   event: page  id: <cursor>  data: {"page_number", "final",
                                 "attempt", "sha256", "cursor", "markdown", "json_url"}
                              event: end   id: end       data: <Job JSON>

- One `page` event a page of StreamResult (protos/docparse/v1/parser_service.proto says what comes
  when; the gateway asks for up to PAGES_PER_MESSAGE pages a message): drafts (`final` false) while
  the job runs, in any order, then every page of the final package (`final` true, in page order; its
  part is byte for byte that page of GET result). `markdown` is the page rendered by docparse's
  Markdown renderer: here when its part is at most INLINE_RENDER_BYTES (a page of text is a few kB:
  a millisecond), else in the gateway's render workers, off the loop (whose first use starts a
  process: seconds a page shown as soon as it is read should not wait); `json_url` is the page as
  JSON (GET /v1/jobs/{id}/result?pages=<n>, gateway/http/page_results.py).
- The event id is the StreamResult cursor: `Last-Event-ID` (what a browser's EventSource
  sends when it reconnects) or `?cursor=` resumes after it (Last-Event-ID wins: it is the
  newer one when a browser reconnects to a URL that carried a cursor).
- After the last page comes `event: end` with the terminal record and `id: end`; a reconnect
  with that id (the client saw the end) answers 204, which tells an EventSource to stop.
- StreamResult sends nothing while no page is read: the gateway writes a heartbeat comment
  after HEARTBEAT_S of silence, so proxies keep the connection.
- Otherwise as the job's events (gateway/http/sse.py): the tenant's event-stream slots, the
  record read first (404, 410, 503 as HTTP errors), the 200 only once the replica has taken
  the stream (a refused cursor is 400 INVALID_RESUME_CURSOR, a refused stream 429
  TOO_MANY_STREAMS), an upstream failure resumed from the last cursor on any replica within
  `sse_resume_budget_s`, an error it cannot resume from sent as `event: stream-error`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import grpc
from aiohttp import web
from google.protobuf.message import DecodeError

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.render import render
from docparse.streamed_pages import PAGES_PER_MESSAGE, one_page_each
from docparse.v1 import parser_service_pb2
from docparse_server.errors import error
from gateway.http.api import TERMINAL, text, to_json
from gateway.http.errors import echo, error_body
from gateway.http.keys import RENDER_LANES, STREAMS, UPSTREAM
from gateway.http.sse import ACCEPT_WAIT_S, RESUMABLE, _accepted, comment, event, event_stream
from gateway.http.upstream import HttpError

HEARTBEAT_S = 15.0
INLINE_RENDER_BYTES = 64 * 1024
END_ID = "end"
MAX_CURSOR_CHARS = 64
_CLOSED, _IDLE = object(), object()
Message = parser_service_pb2.StreamResultResponse


def page_cursor(request: web.Request) -> str:
    """Where the stream resumes: Last-Event-ID, else `?cursor=`, else '' (the start)."""
    for name, raw in (
        ("Last-Event-ID", request.headers.get("Last-Event-ID", "")),
        ("cursor", request.query.get("cursor", "")),
    ):
        raw = raw.strip()
        if len(raw) > MAX_CURSOR_CHARS:
            raise error(
                ErrorReason.INVALID_RESUME_CURSOR,
                f"{name} is not a cursor of this stream: {echo(raw)}; resume with the id of "
                "the last event received",
                {"parameter": name},
            )
        if raw:
            return text(raw)
    return ""


def checked_part(message: Message) -> bytes:
    """The page part of a StreamResult message, checked against its sha256."""
    data = bytes(message.page_part)
    if hashlib.sha256(data).hexdigest() != message.sha256:
        raise error(
            ErrorReason.UPSTREAM_CONTRACT,
            f"page {message.page_number}'s part does not match the sha256 the replica sent",
            {"page_number": str(message.page_number)},
        )
    return data


async def job_pages(request: web.Request) -> web.StreamResponse:
    """GET /v1/jobs/{id}/pages; one of the tenant's event-stream slots while open."""
    upstream = request.app[UPSTREAM]
    with request.app[STREAMS].slot(upstream.caller(request)):
        job_id = text(request.match_info["job_id"])
        cursor = page_cursor(request)
        message = parser_service_pb2.GetStatusRequest(job_id=job_id)
        reply, served = await upstream.unary(upstream.stub.GetStatus, message, request)
        if cursor == END_ID:
            if reply.job.state in TERMINAL:
                return web.Response(status=204, headers={"X-Served-By": served})
            raise HttpError(
                error(
                    ErrorReason.INVALID_RESUME_CURSOR,
                    f"job {job_id} has not ended: resume with the id of the last page event",
                ),
                served,
            )
        metadata = upstream.metadata(request)

        def open_(after: str) -> Any:
            request_ = parser_service_pb2.StreamResultRequest(
                job_id=job_id, cursor=after, pages_per_message=PAGES_PER_MESSAGE
            )
            return upstream.stub.StreamResult(request_, metadata=metadata)

        first = await _accepted(open_(cursor), ACCEPT_WAIT_S)
        try:
            return await _relay(request, job_id, open_, cursor, served, first)
        finally:
            if first is not None:
                first.cancel()


async def _relay(
    request: web.Request,
    job_id: str,
    open_: Callable[[str], Any],
    cursor: str,
    served: str,
    first: Any,
) -> web.StreamResponse:
    def pump(response: web.StreamResponse, closing: asyncio.Future[Any], budget_s: float) -> Any:
        return _pump(_Pages(request, job_id, response), open_, cursor, closing, budget_s, first)

    return await event_stream(request, served, pump)


class _Pages:
    """Writes the events of one response."""

    def __init__(self, request: web.Request, job_id: str, response: web.StreamResponse) -> None:
        self.lanes = request.app[RENDER_LANES]
        self.result_url = f"/v1/jobs/{quote(job_id, safe='')}/result"
        self.response = response
        self.last = ""  # the cursor of the last page event sent

    async def note(self, text: str) -> None:
        await self.response.write(comment(text))

    async def end(self, message: Message) -> None:
        await self.response.write(event("end", to_json(message.job), END_ID))

    async def error(self, err: DocparseError) -> None:
        await self.response.write(event("stream-error", json.dumps(error_body(err))))

    async def page(self, message: Message) -> None:
        part = checked_part(message)
        if len(part) <= INLINE_RENDER_BYTES:
            try:
                markdown = render(part, "markdown")
            except DecodeError as err:
                raise error(ErrorReason.UPSTREAM_CONTRACT, "a page part does not decode") from err
        else:
            markdown = await self.lanes.for_size(len(part)).renderer.render(part, "markdown")
        data = {
            "page_number": message.page_number,
            "final": message.final,
            "attempt": message.attempt,
            "sha256": message.sha256,
            "cursor": message.cursor,
            "markdown": markdown.decode(),
            "json_url": f"{self.result_url}?pages={message.page_number}",
        }
        await self.response.write(event("page", json.dumps(data), message.cursor))
        self.last = message.cursor


class _Reads:
    """The messages of one upstream call, with a read that outlives a heartbeat."""

    def __init__(self, call: Any, closing: asyncio.Future[Any]) -> None:
        self.call, self.closing = call, closing
        self.pending: asyncio.Future[Any] | None = None

    async def next(self, idle_s: float) -> Any:
        """The next message, grpc.aio.EOF, _IDLE after `idle_s` of silence, or _CLOSED when
        the gateway shuts down. Raises the call's AioRpcError."""
        if self.pending is None:
            self.pending = asyncio.ensure_future(self.call.read())
        done, _ = await asyncio.wait(
            {self.pending, self.closing}, timeout=idle_s, return_when=asyncio.FIRST_COMPLETED
        )
        if self.pending in done:
            read, self.pending = self.pending, None
            return read.result()
        return _CLOSED if self.closing in done else _IDLE

    def cancel(self) -> None:
        if self.pending is not None:
            self.pending.cancel()
        self.call.cancel()


async def _relay_call(pages: _Pages, reads: _Reads) -> None:
    """Relays one upstream call until the stream is over for this response."""
    while True:
        message = await reads.next(HEARTBEAT_S)
        if message is _CLOSED:
            await pages.note("gateway shutting down; reconnect to resume")
            return
        if message is _IDLE:
            await pages.note(f"heartbeat {pages.last}".rstrip())
            continue
        if message is grpc.aio.EOF:
            # Ended without the terminal record: the client's reconnect sorts it out.
            await pages.note(f"upstream ended at cursor {pages.last!r}; reconnect")
            return
        if message.HasField("job"):
            await pages.end(message)
            return
        for page in one_page_each(message):
            await pages.page(page)
            await asyncio.sleep(0)  # a message's pages render in turn with other calls


async def _pump(
    pages: _Pages,
    open_: Callable[[str], Any],
    last: str,
    closing: asyncio.Future[Any],
    budget_s: float,
    first: Any,
) -> None:
    """Relays upstream streams after `last`, starting with `first` (an open one) if given."""
    failing_since: float | None = None
    delay = 0.05
    pages.last = last
    while True:
        reads = _Reads(first if first is not None else open_(pages.last), closing)
        first = None
        sent = pages.last
        try:
            return await _relay_call(pages, reads)
        except grpc.aio.AioRpcError as err:
            failure = DocparseError.from_rpc_error(err)
            if failure.code not in RESUMABLE:
                await pages.error(failure)
                return
            problem = f"upstream {failure.code.name} {failure.reason}".rstrip()
        except DocparseError as err:  # a part that fails its check, a render refused
            await pages.error(err)
            return
        finally:
            reads.cancel()
        now = time.monotonic()
        if pages.last != sent:
            failing_since, delay = None, 0.05  # the upstream answered in between
        failing_since = failing_since or now
        if now - failing_since > budget_s:
            await pages.note(f"{problem}; giving up, reconnect to resume")
            return
        await pages.note(f"{problem}; resuming after cursor {pages.last!r}")
        if closing in (await asyncio.wait({closing}, timeout=delay))[0]:
            return
        delay = min(delay * 2, 1.0)
