"""Tracing of the gateway's HTTP side: one server span per request, the child of the caller's
`traceparent` header when it sends a valid one, else the root of a new trace. Upstream calls
made while it runs carry it (gateway/http/upstream.py), so parser_svc and its workers continue
the same trace. A job's id (from the `Location` of a submit's answer) is an attribute. Free
when tracing is off (docparse_server/tracing.py): the handler is called directly."""

from __future__ import annotations

from aiohttp import web

from docparse_server import tracing
from gateway.http.cors import Handler


@web.middleware
async def trace_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not tracing.enabled():
        return await handler(request)
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else request.path
    attributes = {"http.request.method": request.method, "http.route": route}
    with tracing.span(
        f"{request.method} {route}",
        parent=tracing.carrier_from(request.headers),
        attributes=attributes,
        kind="server",
    ) as current:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            tracing.set_attributes(current, {"http.response.status_code": exc.status})
            raise
        tracing.set_attributes(current, {"http.response.status_code": response.status})
        location = response.headers.get("Location", "")
        if location.startswith("/v1/jobs/"):
            tracing.set_attributes(current, {"docparse.job_id": location.rsplit("/", 1)[-1]})
        return response
