"""Request bodies are taken as sent: a body with a Content-Encoding is refused before a byte of
it is read (400 CONTENT_ENCODING_REFUSED).

aiohttp inflates gzip, deflate, brotli and zstd request bodies on the fly, and the upload
limits count what comes out: eight 80 KB gzip requests became eight uploads at the size limit
in the gateway's memory, and a 599 KiB batch 600 MiB of stored documents. The documents users
send (PDF, Office, images) are compressed already, so nothing is lost by sending them as they
are; a client that compresses anyway is told so at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from docparse.reasons import ErrorReason
from docparse_server.errors import error as rpc_error
from gateway.http.upstream import HttpError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def identity_bodies(request: web.Request, handler: Handler) -> web.StreamResponse:
    coding = request.headers.get("Content-Encoding", "").strip().lower()
    if coding not in ("", "identity"):
        raise HttpError(
            rpc_error(
                ErrorReason.CONTENT_ENCODING_REFUSED,
                f"request bodies are taken as sent; send this one without Content-Encoding "
                f"{coding[:40]!r} (documents are compressed already)",
                {"content_encoding": coding[:40]},
            )
        )
    return await handler(request)
