"""The gateway's HTTP side, next to gRPC in the same process and asyncio loop: a JSON API,
Server-Sent Events for job and batch progress, and the upload page at `/`.

Routes (all answers JSON unless said otherwise; errors: see gateway.http.errors):

    POST /v1/jobs                    submit one file (multipart `file`, or the raw body)
    GET  /v1/jobs/{id}               the job
    GET  /v1/jobs/{id}/result        the reading package (?format=json|text|markdown|proto),
                                     or some pages, also while it runs (?pages=, .page_results)
    POST /v1/jobs/{id}:cancel        cancel
    GET  /v1/jobs/{id}/events        SSE (gateway.http.sse)
    GET  /v1/jobs/{id}/pages         SSE: the job's pages as they are read (.page_events)
    GET  /v1/jobs                    the caller's jobs, newest first, a page at a time (.listing)
    GET  /v1/jobs/{id}/assets        the job's assets: records, pages, URLs (.assets)
    GET  /v1/jobs/{id}/assets/{aid}  one asset (an image) of the job (.assets)
    GET  /v1/admin/tenants           each tenant's share of parse slots, admin keys only (.admin)
    POST /v1/batches                 submit several files (multipart)
    GET  /v1/batches/{id}            the batch
    GET  /v1/batches/{id}/events     SSE
    GET  /healthz                    200 while serving (503 while starting or shutting down)
    GET  /openapi.json               the OpenAPI 3.1 document of all of these (.openapi)
    GET  /                           the upload page (gateway/static/)

Stateless like the gRPC side: every handler is calls to parser_svc through the gateway's
round-robin upstream channel, nothing kept between requests. CORS, off by default:
gateway.http.cors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse_server.errors import error as rpc_error
from docparse_server.serving import binding, served_by
from docparse_server.tenancy import StreamSlots
from gateway.auth import GatewayAuth
from gateway.http import admin, api, assets, cors, listing, openapi, page_events, page_results, sse
from gateway.http.encodings import identity_bodies
from gateway.http.errors import error_response
from gateway.http.hosts import AllowedHosts
from gateway.http.keys import (
    CLOSING,
    RENDER_LANES,
    RENDERER,
    SERVING,
    SETTINGS,
    STREAMS,
    UPSTREAM,
)
from gateway.http.render_turns import render_lanes, with_render_turn
from gateway.http.rendering import Renderer
from gateway.http.traced import trace_requests
from gateway.http.upstream import HttpError, Upstream
from gateway.settings import GatewaySettings

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
ID = r"[^/:{}]+"
# The page loads nothing from elsewhere and runs no inline script.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


access_log = logging.getLogger("docparse.access")
ERROR_KEY = web.RequestKey("docparse_error", DocparseError)


@web.middleware
async def access_lines(request: web.Request, handler: Handler) -> web.StreamResponse:
    """One access line per HTTP request, next to the gRPC ones (`event: "http"`): the route,
    status, the gRPC code and reason of an error, the job or batch id, the replica that
    answered (`upstream`), the peer. DOCPARSE_GATEWAY_ACCESS_LOG turns these off too."""
    start = time.perf_counter()
    status = 500
    response: web.StreamResponse | None = None
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        if access_log.isEnabledFor(logging.INFO) and request.path != "/healthz":
            _access_line(request, response, status, time.perf_counter() - start)


def _access_line(
    request: web.Request, response: web.StreamResponse | None, status: int, seconds: float
) -> None:
    error = request.get(ERROR_KEY)
    route = request.match_info.route.resource
    extra: dict[str, object] = {
        "event": "http",
        "method": request.method,
        "path": request.path,
        "route": route.canonical if route is not None else "",
        "status": status,
        "code": error.code.name if error else ("OK" if status < 400 else ""),
        "duration_ms": round(seconds * 1000, 2),
        "peer": request.remote or "",
        **{k: v for k, v in request.match_info.items() if k in ("job_id", "batch_id")},
    }
    if error:
        extra["reason"] = error.reason
    headers = response.headers if response is not None else {}
    if location := headers.get("Location", ""):  # a submit: the id it created
        kind, _, created = location.removeprefix("/v1/").partition("/")
        extra["job_id" if kind == "jobs" else "batch_id"] = created
    served = [v.strip() for v in headers.get("X-Served-By", "").split(",") if v.strip()]
    if len(served) > 1:
        extra["upstream"] = served[0]
    access_log.info(
        "%s %s %d %s%.1f ms",
        request.method,
        request.path,
        status,
        f"{error.reason} " if error else "",
        seconds * 1000,
        extra=extra,
    )


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except HttpError as err:
        request[ERROR_KEY] = err.error
        return error_response(err.error, err.served_by or served_by())
    except DocparseError as err:
        request[ERROR_KEY] = err
        return error_response(err, served_by())
    except web.HTTPException as exc:
        if not request.path.startswith("/v1/") or exc.status < 400:
            raise
        code = grpc.StatusCode.NOT_FOUND if exc.status == 404 else grpc.StatusCode.UNIMPLEMENTED
        reason = exc.reason.upper().replace(" ", "_")
        body = {"code": code.name, "reason": reason, "message": exc.reason, "metadata": {}}
        return web.Response(
            status=exc.status,
            text=json.dumps(body),
            content_type="application/json",
            headers={k: v for k, v in exc.headers.items() if k == "Allow"},
        )


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Sec-Fetch-Site values of a request a user made on this origin (or typed/bookmarked).
OWN_SITE = frozenset({"same-origin", "none"})


def cross_site(request: web.Request) -> str:
    """Why a browser request comes from another site ("" when it does not). A plain form
    post or `fetch(..., {mode: "no-cors"})` from any page open in the user's browser needs no
    CORS preflight, so the gateway itself refuses them: Sec-Fetch-Site where the browser sends
    it (every current one), else Origin against Host. Non-browser clients send neither."""
    site = request.headers.get("Sec-Fetch-Site", "").strip().lower()
    if site:
        return "" if site in OWN_SITE else f"Sec-Fetch-Site: {site[:20]}"
    origin = request.headers.get("Origin", "").strip()
    if not origin:
        return ""
    host = origin.partition("://")[2].rstrip("/")
    # The scheme is not compared: behind a TLS proxy the browser's origin is https while the
    # gateway sees http.
    return "" if host and host.lower() == request.host.lower() else "Origin of another site"


@web.middleware
async def same_origin_writes(request: web.Request, handler: Handler) -> web.StreamResponse:
    """POSTs from another site's page are refused (403 PERMISSION_DENIED CROSS_SITE_REQUEST)
    before anything is read: without API keys (`docparse up`'s dev mode) any web page could
    otherwise upload to, or cancel on, the developer's local service."""
    if (
        request.method not in SAFE_METHODS
        and (why := cross_site(request))
        and not cors.allowed_origin(request)  # a page of an origin CORS allows
    ):
        raise HttpError(
            rpc_error(
                ErrorReason.CROSS_SITE_REQUEST,
                f"a browser request from another site ({why}) may not change anything here; "
                "use the page this gateway serves, or call it from a server",
                {"method": request.method},
            )
        )
    return await handler(request)


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(
        STATIC_DIR / "index.html",
        headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-cache"},
    )


# The page's files, listed once: a request names one of them or is 404, so no client-chosen
# path ever reaches the file system (a 5,000-character name made aiohttp's static route 500).
STATIC_FILES = {path.name: path for path in STATIC_DIR.iterdir() if path.is_file()}


async def static_file(request: web.Request) -> web.FileResponse:
    path = STATIC_FILES.get(request.match_info["name"])
    if path is None:
        raise web.HTTPNotFound()
    return web.FileResponse(path, headers={"Cache-Control": "no-cache"})


async def healthz(request: web.Request) -> web.Response:
    if request.app[CLOSING].is_set():
        return web.Response(status=503, text="shutting down\n")
    if not request.app[SERVING].is_set():
        return web.Response(status=503, text="starting\n")
    return web.Response(text="ok\n")


def build_app(
    channel: grpc.aio.Channel, settings: GatewaySettings, auth: GatewayAuth
) -> web.Application:
    app = web.Application(
        middlewares=[
            trace_requests,
            access_lines,
            json_errors,
            AllowedHosts(settings, dev_mode=not auth.required).middleware(),
            identity_bodies,
            cors.preflight,
            same_origin_writes,
        ],
        client_max_size=settings.max_message_bytes,
    )
    app[SETTINGS] = settings
    app[UPSTREAM] = Upstream(channel, settings.default_unary_timeout_s, auth)
    app[CLOSING] = asyncio.Event()
    app[SERVING] = asyncio.Event()
    app[STREAMS] = StreamSlots(
        settings.http_max_event_streams_per_tenant, "event streams on this gateway"
    )

    app[RENDERER] = Renderer(settings.http_render_workers, settings.http_render_memory_mb)
    app[RENDER_LANES] = render_lanes(settings, app[RENDERER])

    async def on_shutdown(app: web.Application) -> None:
        app[CLOSING].set()

    async def on_cleanup(app: web.Application) -> None:
        app[RENDER_LANES].close()

    async def nosniff(request: web.Request, response: web.StreamResponse) -> None:
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        # No "Python/3.x aiohttp/3.y" banner telling a scanner which versions to try.
        response.headers["Server"] = "docparse"

    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
    app.on_response_prepare.append(nosniff)
    app.router.add_post("/v1/jobs", api.submit_job)
    app.router.add_get(f"/v1/jobs/{{job_id:{ID}}}", api.get_job)
    result = with_render_turn(page_results.result_or_pages)
    app.router.add_get(f"/v1/jobs/{{job_id:{ID}}}/result", result)
    app.router.add_post(f"/v1/jobs/{{job_id:{ID}}}:cancel", api.cancel_job)
    app.router.add_get(f"/v1/jobs/{{job_id:{ID}}}/events", sse.job_events)
    app.router.add_get(f"/v1/jobs/{{job_id:{ID}}}/pages", page_events.job_pages)
    app.router.add_post("/v1/batches", api.create_batch)
    app.router.add_get(f"/v1/batches/{{batch_id:{ID}}}", api.get_batch)
    app.router.add_get(f"/v1/batches/{{batch_id:{ID}}}/events", sse.batch_events)
    listing.register(app)
    admin.register(app)
    assets.register(app)
    openapi.register(app)
    cors.setup(app, settings.http_cors_origins, settings.http_cors_max_age_s)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static_file)
    return app


def split_host_port(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)


class MalformedHttpLines(logging.Filter):
    """aiohttp logs a request it cannot even parse (a request line over 8,190 bytes, a bad
    header) at ERROR with a traceback and answers 400 itself: a log flood anyone can cause.
    Such a record becomes one WARNING line naming the problem, without the traceback or the
    request's bytes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = "malformed HTTP request from %s: %s"
            record.args = (
                record.args[0] if isinstance(record.args, tuple) and record.args else "?",
                type(exc).__name__,
            )
            record.exc_info = record.exc_text = None
        return True


_MALFORMED_FILTER = MalformedHttpLines()


class HttpServer:
    """Runs the app on `settings.http_listen`; `stop` ends event streams (browsers reconnect
    to another gateway with Last-Event-ID) and gives other requests the grace period."""

    def __init__(
        self, channel: grpc.aio.Channel, settings: GatewaySettings, auth: GatewayAuth
    ) -> None:
        self.settings = settings
        self.app = build_app(channel, settings, auth)
        logging.getLogger("aiohttp.server").addFilter(_MALFORMED_FILTER)
        self.runner = web.AppRunner(
            self.app,
            handler_cancellation=True,  # a browser that leaves cancels its upstream watch
            shutdown_timeout=settings.shutdown_grace_s,
            access_log=None,
        )

    async def start(self) -> int:
        """Listens (exclusively: no SO_REUSEPORT); DocparseError PORT_IN_USE when taken."""
        host, port = split_host_port(self.settings.http_listen)
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port, reuse_port=False)
        with binding(self.settings.http_listen):
            await site.start()
        bound: int = self.runner.addresses[0][1]
        return bound

    def set_serving(self) -> None:
        """/healthz answers 200 from now on (the gRPC side is SERVING)."""
        self.app[SERVING].set()

    async def stop(self) -> None:
        await self.runner.cleanup()
