"""GET /v1/jobs/{id}/result takes its render turn (gateway/http/render_queue.py) before it asks
a replica for the result: a request waiting for a render worker holds no package, and one over
its tenant's limit is refused (429 TOO_MANY_RENDERS) before anything is fetched. The lane
(small results apart) comes from the job's ResultRef, read with a GetStatus first. format=proto
needs no render and takes no turn, nor does a job without a result (the handler answers its
error). The handler releases the turn once the render is done (`release_turn`), so writing the
answer to a slow client holds no worker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from docparse.v1 import job_pb2, parser_service_pb2
from gateway.http.keys import RENDER_LANES, RENDERER, UPSTREAM
from gateway.http.render_queue import Lane, Lanes, RenderQueue, Turn
from gateway.http.rendering import Renderer, result_format
from gateway.http.upstream import HttpError
from gateway.settings import GatewaySettings

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
TURN = "docparse.render_turn"
LANE = "docparse.render_lane"


def render_lanes(settings: GatewaySettings, big: Renderer) -> Lanes:
    def queue(workers: int) -> RenderQueue:
        return RenderQueue(
            workers, settings.http_render_per_tenant, settings.http_render_max_waiting
        )

    small = None
    if settings.http_render_small_bytes > 0:
        small = Lane(queue(1), Renderer(1, settings.http_render_memory_mb))
    return Lanes(
        Lane(queue(settings.http_render_workers), big), small, settings.http_render_small_bytes
    )


async def _lane(request: web.Request) -> Lane | None:
    """The lane of the job's result, or None when it has none to render (not SUCCEEDED, not
    found, not this tenant's): the handler's own call then answers with the precise error."""
    upstream, job_id = request.app[UPSTREAM], request.match_info["job_id"]
    try:
        reply, _ = await upstream.unary(
            upstream.stub.GetStatus, parser_service_pb2.GetStatusRequest(job_id=job_id), request
        )
    except HttpError:
        return None
    if reply.job.state != job_pb2.STATE_SUCCEEDED:
        return None
    return request.app[RENDER_LANES].for_size(reply.job.result.size_bytes)


def with_render_turn(handler: Handler) -> Handler:
    async def in_turn(request: web.Request) -> web.StreamResponse:
        fmt, _furniture = result_format(request.query)
        if fmt == "proto":
            return await handler(request)
        tenant = request.app[UPSTREAM].caller(request).tenant
        lane = await _lane(request)
        if lane is None:
            return await handler(request)
        async with lane.queue.turn(tenant) as turn:
            request[TURN], request[LANE] = turn, lane
            return await handler(request)

    return in_turn


def renderer(request: web.Request) -> Renderer:
    """The render workers of the request's lane."""
    lane = request.get(LANE)
    return lane.renderer if isinstance(lane, Lane) else request.app[RENDERER]


def release_turn(request: web.Request) -> None:
    """The render is done: its worker goes to the next in line."""
    turn = request.get(TURN)
    if isinstance(turn, Turn):
        turn.release()
