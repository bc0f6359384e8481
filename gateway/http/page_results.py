"""GET /v1/jobs/{id}/result?pages=2-5: the reading package restricted to some pages, also while
the job runs.

- `pages` is a selection as a job's own (docparse/page_ranges.py: "1-5,10,20-", 1-based, an
  open end to the last page; "" every page); anything else is 400 INVALID_PAGE_RANGE. Pages
  the document does not have are simply absent.
- A SUCCEEDED job: its package (GET result's, checked against its sha256) with only the
  selected pages and the records of the assets they show; document-wide fields (metadata,
  parser version, warnings) stay, sheets, slides and attachments (not pages) go
  (rendering.render_pages: in the render workers unless the package is small).
- A QUEUED or RUNNING job: the pages read so far, from StreamResult (a page's final where
  there is one, else its draft), as a package of those pages; pages not read yet are absent.
  The stream sends the pages it has at once, then each page as it is read: the gateway reads
  until it has every selected page, the job's end, QUIET_S without a message or SNAPSHOT_S in
  all (so a page read meanwhile may be in the answer too; StreamResult has no "what you have
  now, then stop").
- A FAILED or CANCELLED job: GET result's error.
- Every answer with `pages` says whether it is partial: the header `Docparse-Partial: true`
  (or `false`) and, in format=json, two fields beside the package's: `"partial"` (true while
  the job runs: pages may be missing, drafts may change) and `"draft_pages"` (the page numbers
  whose content is a draft; [] when every page is final). Text, Markdown, HTML and chunks
  render the same restricted package; format=proto is it serialized.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
from aiohttp import web

from docparse import page_ranges
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.v1 import reading_package_pb2 as rp
from docparse_server.errors import error
from gateway.http.api import fetch_result, get_result, send_bytes, text
from gateway.http.keys import RENDER_LANES, UPSTREAM
from gateway.http.page_events import INLINE_RENDER_BYTES, checked_part
from gateway.http.render_turns import TURN, release_turn, renderer
from gateway.http.rendering import HTML_RESULT_CSP, RESULT_FORMATS, render_pages, result_format
from gateway.http.upstream import rpc_failure

PARTIAL_HEADER = "Docparse-Partial"
# How long a running job's stream may stay silent before the pages it sent are all it has,
# and how long it is read at most.
QUIET_S = 0.25
SNAPSHOT_S = 1.0
RUNNING = frozenset({job_pb2.STATE_QUEUED, job_pb2.STATE_RUNNING})
# A bounded selection of at most this many pages ends the read once all of them came.
COUNTED_PAGES = 100_000
Message = parser_service_pb2.StreamResultResponse


async def result_or_pages(request: web.Request) -> web.StreamResponse:
    """GET /v1/jobs/{id}/result: the whole package, or with `pages` some of its pages."""
    if "pages" not in request.query:
        return await get_result(request)
    return await get_pages(request)


def selection_of(spec: str) -> page_ranges.Selection:
    try:
        return page_ranges.parse(spec)
    except page_ranges.PageRangeError as err:
        raise error(ErrorReason.INVALID_PAGE_RANGE, str(err), {"parameter": "pages"}) from err


async def get_pages(request: web.Request) -> web.StreamResponse:
    job_id = text(request.match_info["job_id"])
    fmt, furniture = result_format(request.query)
    selection = selection_of(request.query.get("pages", ""))
    upstream = request.app[UPSTREAM]
    status = parser_service_pb2.GetStatusRequest(job_id=job_id)
    reply, served = await upstream.unary(upstream.stub.GetStatus, status, request)
    drafts: list[int] = []
    partial = False
    if reply.job.state in RUNNING:
        found, ended = await done_pages(request, job_id, selection)
        if ended is None:  # still running: the pages it has
            data = joined(found).SerializeToString(deterministic=True)
            partial = True
            drafts = [number for number, message in found.items() if not message.final]
    if not partial:  # the job ended: its package, exactly (or the result's error)
        data, _ref, served = await fetch_result(request, job_id)
    spec = page_ranges.render(selection)
    if len(data) <= INLINE_RENDER_BYTES:  # a few pages: milliseconds
        data = render_pages(data, spec, fmt, furniture)
    else:  # cutting and rendering megabytes: in the render workers, off the loop
        lane = request.app[RENDER_LANES].for_size(len(data))
        workers = renderer(request) if request.get(TURN) is not None else lane.renderer
        data = await workers.render(data, fmt, furniture, pages=spec)
    release_turn(request)
    if fmt == "json":
        data = with_marks(data, partial, sorted(drafts))
    headers = {
        "X-Served-By": served,
        "Cache-Control": "no-store",
        "Content-Type": RESULT_FORMATS[fmt] + ("" if fmt == "proto" else "; charset=utf-8"),
        PARTIAL_HEADER: "true" if partial else "false",
    }
    if fmt == "html":
        headers["Content-Security-Policy"] = HTML_RESULT_CSP
    return await send_bytes(request, data, headers)


def with_marks(rendered: bytes, partial: bool, drafts: list[int]) -> bytes:
    """The package's JSON object with `partial` and `draft_pages` added as its last fields
    (spliced before its closing brace: the package's JSON may be megabytes)."""
    marks = json.dumps({"partial": partial, "draft_pages": drafts})
    body = rendered.rstrip()
    if not body.endswith(b"}"):  # not an object: nothing to add to
        return rendered
    separator = b", " if body != b"{}" else b""
    return body[:-1] + separator + marks[1:].encode()


def _count(selection: page_ranges.Selection) -> int | None:
    """How many pages a bounded selection names (None: open, or too many to wait for)."""
    if not selection or any(last is None for _, last in selection):
        return None
    total = sum((last or first) - first + 1 for first, last in selection)
    return total if total <= COUNTED_PAGES else None


async def done_pages(
    request: web.Request, job_id: str, selection: page_ranges.Selection
) -> tuple[dict[int, Message], job_pb2.Job | None]:
    """The selected pages a running job's stream has (by number: the final where one came),
    and its terminal record if the job ended meanwhile."""
    upstream = request.app[UPSTREAM]
    call = upstream.stub.StreamResult(
        parser_service_pb2.StreamResultRequest(job_id=job_id),
        timeout=upstream.unary_timeout_s,
        metadata=upstream.metadata(request),
    )
    wanted = _count(selection)
    found: dict[int, Message] = {}
    try:
        await call.initial_metadata()
        until = asyncio.get_running_loop().time() + SNAPSHOT_S
        while wanted is None or len(found) < wanted:
            left = until - asyncio.get_running_loop().time()
            try:
                message: Any = await asyncio.wait_for(call.read(), min(QUIET_S, left))
            except TimeoutError:
                break
            if message is grpc.aio.EOF:
                break
            if message.HasField("job"):
                return found, message.job
            number = message.page_number
            if page_ranges.selects(selection, number):
                checked_part(message)
                if number not in found or message.final or not found[number].final:
                    found[number] = message
    except grpc.aio.AioRpcError as err:
        raise rpc_failure(err) from err
    finally:
        call.cancel()
    return found, None


def joined(found: dict[int, Message]) -> rp.ReadingPackage:
    """One package of page parts, in page order, each asset record once."""
    package = rp.ReadingPackage()
    assets: set[str] = set()
    for number in sorted(found):
        part = rp.ReadingPackage.FromString(found[number].page_part)
        package.content_type = package.content_type or part.content_type
        package.pages.extend(part.pages)
        for asset in part.assets:
            if asset.asset_id not in assets:
                assets.add(asset.asset_id)
                package.assets.append(asset)
    return package
