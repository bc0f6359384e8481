"""GET /v1/jobs/{id}/result?pages=2-5: the reading package restricted to some pages, also while
the job runs: GetResult with `pages` (parser_svc/api/results.py), rendered here.

- `pages` is a selection as a job's own (docparse/page_ranges.py: "1-5,10,20-", 1-based, an
  open end to the last page; "" every page); anything else is 400 INVALID_PAGE_RANGE. Pages
  the document does not have are simply absent.
- A SUCCEEDED job: its package with only the selected pages and the records of the assets
  they show; document-wide fields (metadata, parser version, warnings) stay, sheets, slides
  and attachments (not pages) go. The service cuts it without decoding the rest, so page 2 of
  a 30 MB package costs page 2.
- A QUEUED or RUNNING job: the selected pages read so far, at once (a page's final where there
  is one, else its draft), as a package of those pages; pages not read yet are absent.
- A FAILED or CANCELLED job: GET result's error.
- Every answer with `pages` says whether it is partial: the header `Docparse-Partial: true`
  (or `false`) and, in format=json, two fields beside the package's: `"partial"` (true while
  the job runs: pages may be missing, drafts may change) and `"draft_pages"` (the page numbers
  whose content is a draft; [] when every page is final). Text, Markdown, HTML and chunks
  render the same restricted package; format=proto is it serialized.
"""

from __future__ import annotations

import json

from aiohttp import web

from docparse import page_ranges
from docparse.reasons import ErrorReason
from docparse_server.errors import error
from gateway.http.api import get_result, send_bytes, text
from gateway.http.keys import RENDER_LANES
from gateway.http.page_events import INLINE_RENDER_BYTES
from gateway.http.render_turns import TURN, release_turn, renderer
from gateway.http.rendering import HTML_RESULT_CSP, RESULT_FORMATS, render_pages, result_format
from gateway.http.result_fetch import fetch_package

PARTIAL_HEADER = "Docparse-Partial"


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
    spec = page_ranges.render(selection_of(request.query.get("pages", "")))
    data, answer, served = await fetch_package(request, job_id, spec)
    if len(data) <= INLINE_RENDER_BYTES:  # a few pages: milliseconds
        data = render_pages(data, spec, fmt, furniture)
    else:  # rendering megabytes: in the render workers, off the loop
        lane = request.app[RENDER_LANES].for_size(len(data))
        workers = renderer(request) if request.get(TURN) is not None else lane.renderer
        data = await workers.render(data, fmt, furniture, pages=spec)
    release_turn(request)
    if fmt == "json":
        data = with_marks(data, answer.partial, answer.draft_pages)
    headers = {
        "X-Served-By": served,
        "Cache-Control": "no-store",
        "Content-Type": RESULT_FORMATS[fmt] + ("" if fmt == "proto" else "; charset=utf-8"),
        PARTIAL_HEADER: "true" if answer.partial else "false",
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
