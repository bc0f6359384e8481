"""Which Host names the HTTP side answers in dev mode: DNS rebinding.

Without API keys (`docparse up`'s dev mode) the only thing between a web page and the
developer's jobs is the browser's same-origin rule, and DNS rebinding defeats it: a page of
attacker.example re-resolves its own name to 127.0.0.1, and its requests reach the gateway
with `Host: attacker.example` and a matching Origin, as if same-origin. So in dev mode a
request must name the gateway by a loopback name or address (localhost, *.localhost,
127.0.0.0/8, ::1), the address it listens on, or a name in
DOCPARSE_GATEWAY_HTTP_ALLOWED_HOSTS; anything else is 403 CROSS_SITE_REQUEST before it is
read. With API keys a rebinding page has no key to send (keys travel in headers, never
cookies), so the check is off unless the list is set.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from docparse.reasons import ErrorReason
from docparse_server.errors import error as rpc_error
from gateway.http.upstream import HttpError
from gateway.settings import GatewaySettings

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def host_name(host_header: str) -> str:
    """The name or address of a Host header, without its port or IPv6 brackets, lower-case."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _loopback(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class AllowedHosts:
    def __init__(self, settings: GatewaySettings, dev_mode: bool) -> None:
        listed = {n.strip().lower() for n in settings.http_allowed_hosts.split(",") if n.strip()}
        self.names = listed | {host_name(settings.http_listen)}
        self.active = dev_mode or bool(listed)

    def allows(self, host_header: str) -> bool:
        name = host_name(host_header)
        return not self.active or _loopback(name) or name in self.names

    def middleware(self) -> Any:
        @web.middleware
        async def allowed_host(request: web.Request, handler: Handler) -> web.StreamResponse:
            if not self.allows(request.host):
                raise HttpError(
                    rpc_error(
                        ErrorReason.CROSS_SITE_REQUEST,
                        f"this gateway does not answer to the host name {request.host[:80]!r} "
                        "(DNS rebinding?); use localhost or 127.0.0.1, or list the name in "
                        "DOCPARSE_GATEWAY_HTTP_ALLOWED_HOSTS",
                        {"host": request.host[:80]},
                    )
                )
            return await handler(request)

        return allowed_host
