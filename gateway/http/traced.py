"""Tracing of the gateway's HTTP side: one server span per request, the child of the caller's
`traceparent` header when it sends a valid one, else the root of a new trace. Upstream calls
made while it runs carry it (gateway/http/upstream.py), so parser_svc and its workers continue
the same trace. The job (or batch) a request names in its path is the attribute
`docparse.job_id` (`docparse.batch_id`); a submit's, from the `Location` of its answer. Free
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
    for name in ("job_id", "batch_id"):
        if named := request.match_info.get(name):
            attributes[f"docparse.{name}"] = named
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
        for prefix, name in (("/v1/jobs/", "job_id"), ("/v1/batches/", "batch_id")):
            if location.startswith(prefix):
                tracing.set_attributes(current, {f"docparse.{name}": location.rsplit("/", 1)[-1]})
        return response
