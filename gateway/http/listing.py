"""GET /v1/jobs: the caller's jobs, newest first, a page at a time (ListJobs upstream).

Query parameters: `state` (repeated, or comma separated: `STATE_RUNNING` or `running`),
`batch_id`, `page_size` (0 or absent: 50; at most 500), `page_token` (the `next_page_token` of
the previous page, with the same filters). The answer is the ListJobsResponse in JSON:
`{"jobs": [...], "next_page_token": "..."}`; an empty token means the last page.
"""

from __future__ import annotations

from aiohttp import web

from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.errors import error
from gateway.http.api import json_response, text
from gateway.http.errors import echo, parse_uint
from gateway.http.keys import UPSTREAM
from gateway.http.upstream import HttpError

MAX_INT32 = 2**31 - 1
_STATES: dict[str, job_pb2.State.ValueType] = {
    name.removeprefix("STATE_").lower(): value
    for name, value in job_pb2.State.items()
    if value != job_pb2.STATE_UNSPECIFIED
}


def _states(request: web.Request) -> list[job_pb2.State.ValueType]:
    states: list[job_pb2.State.ValueType] = []
    for raw in request.query.getall("state", []):
        for word in (w.strip() for w in raw.split(",")):
            if not word:
                continue
            value = _STATES.get(word.lower().removeprefix("state_"))
            if value is None:
                raise HttpError(
                    error(
                        ErrorReason.INVALID_STATE,
                        f"state must be one of {', '.join(_STATES).upper()}: {echo(word)}",
                        {"parameter": "state"},
                    )
                )
            states.append(value)
    return states


async def list_jobs(request: web.Request) -> web.Response:
    query = request.query
    page_size = 0
    if raw := query.get("page_size", "").strip():
        page_size = parse_uint(raw, "page_size", ErrorReason.INVALID_PAGE_SIZE, MAX_INT32)
    message = parser_service_pb2.ListJobsRequest(
        page_size=page_size,
        page_token=text(query.get("page_token", "")),
        states=_states(request),
        batch_id=text(query.get("batch_id", "")),
    )
    upstream = request.app[UPSTREAM]
    reply, served = await upstream.unary(upstream.stub.ListJobs, message, request)
    return json_response(reply, served)


def register(app: web.Application) -> None:
    app.router.add_get("/v1/jobs", list_jobs)
