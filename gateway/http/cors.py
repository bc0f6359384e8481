"""CORS for the HTTP API: pages of the origins an operator names
(DOCPARSE_GATEWAY_HTTP_CORS_ORIGINS) may call it from a browser. Off by default.

- A preflight (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin, for a
  route that takes that method, answers 204 with the allowed methods and headers and
  `Access-Control-Max-Age`; from any other origin (or for a method the route does not take)
  403 PERMISSION_DENIED `CORS_NOT_ALLOWED`. With CORS off, every preflight for a path that
  exists is that same 403 (CORS is off, not the method missing); an OPTIONS that is no
  preflight (no `Access-Control-Request-Method`) stays 405, an unknown path 404.
- Every answer to an allowed origin, errors and event streams included, carries
  `Access-Control-Allow-Origin` (that origin, or `*` when any is allowed), `Vary: Origin` and
  the response headers a page may read (`Location`, `ETag`, `X-Served-By`, ...).
- POSTs from an allowed origin pass the gateway's cross-site check (CROSS_SITE_REQUEST).

No credentials mode: API keys travel in `Authorization` / `X-Api-Key`, never in cookies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from docparse.reasons import ErrorReason
from docparse_server.errors import error
from gateway.http.upstream import HttpError

ALLOW_HEADERS = (
    "Authorization, X-Api-Key, Content-Type, Idempotency-Key, Last-Event-ID, "
    "X-Docparse-Password, Range, If-None-Match, If-Range"
)
EXPOSE_HEADERS = (
    "Location, ETag, X-Served-By, Retry-After, Content-Range, Accept-Ranges, WWW-Authenticate, "
    "Docparse-Partial"
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ORIGINS = web.AppKey("cors_origins", frozenset)
MAX_AGE = web.AppKey("cors_max_age_s", int)


def parse_origins(value: str) -> frozenset[str]:
    """The configured origins, normalised (lower case, no trailing slash); "*" stays "*"."""
    return frozenset(o.strip().rstrip("/").lower() for o in value.split(",") if o.strip())


def allowed_origin(request: web.Request) -> str:
    """The value of Access-Control-Allow-Origin for this request, "" when it gets none."""
    origins = request.app.get(ORIGINS, frozenset())
    origin = request.headers.get("Origin", "").strip()
    if not origins or not origin:
        return ""
    if "*" in origins:
        return "*"
    return origin if origin.rstrip("/").lower() in origins else ""


def denied(why: str) -> HttpError:
    return HttpError(
        error(
            ErrorReason.CORS_NOT_ALLOWED,
            f"cross-origin request refused: {why} (DOCPARSE_GATEWAY_HTTP_CORS_ORIGINS)",
        )
    )


@web.middleware
async def preflight(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answers CORS preflights itself (no route takes OPTIONS)."""
    if request.method != "OPTIONS" or "Access-Control-Request-Method" not in request.headers:
        return await handler(request)
    missing = request.match_info.http_exception
    if isinstance(missing, web.HTTPNotFound):
        return await handler(request)  # the usual 404
    if not request.app.get(ORIGINS):
        raise denied("CORS is off on this gateway, no origin is allowed")
    origin = allowed_origin(request)
    if not origin:
        raise denied("this origin is not allowed")
    wanted = request.headers["Access-Control-Request-Method"].strip().upper()
    methods: set[str] = set()
    if isinstance(missing, web.HTTPMethodNotAllowed):
        methods = set(missing.allowed_methods)
    if wanted not in methods:
        raise denied(f"{request.path} does not take {wanted[:16]}")
    return web.Response(
        status=204,
        headers={
            "Access-Control-Allow-Methods": ", ".join(sorted(methods)),
            "Access-Control-Allow-Headers": ALLOW_HEADERS,
            "Access-Control-Max-Age": str(request.app[MAX_AGE]),
        },
    )


async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: the CORS headers of every answer to an allowed origin."""
    origin = allowed_origin(request)
    if not origin:
        return
    response.headers["Access-Control-Allow-Origin"] = origin
    response.headers["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
    vary = response.headers.get("Vary", "")
    if "origin" not in vary.lower():
        response.headers["Vary"] = f"{vary}, Origin" if vary else "Origin"


def setup(app: web.Application, origins: str, max_age_s: int) -> None:
    """CORS for `origins` (the setting's text); nothing at all when it is empty."""
    parsed = parse_origins(origins)
    if not parsed:
        return
    app[ORIGINS] = parsed
    app[MAX_AGE] = max_age_s
    app.on_response_prepare.append(add_headers)
