"""Webhook egress, SSRF-safe: a callback URL must be http(s) with a host; the host is resolved
by us, every address it resolves to must be public (or listed in `webhook_allow_cidrs`), and the
connection goes to the addresses checked (aiohttp connects to what our resolver returns, no
second lookup); no proxy from the environment, no redirect followed, a timeout, and at most
`webhook_max_response_bytes` read. The POST itself is in http_post.py (aiohttp is imported only
by a replica that delivers webhooks). The rest of the webhook path:
parser_svc/webhooks/callbacks.py."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from docparse.reasons import ErrorReason
from docparse_server.errors import error
from parser_svc.webhooks.signing import config_error

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_URL = 2048
# Hosts that are numbers in another notation than dotted decimal ("2130706433", "0x7f.1",
# "127.1"): resolvers read some of them as addresses, URL parsers as names; never delivered.
_NUMERIC_HOST = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]*))*\.?", re.I)


def parse_cidrs(text: str) -> tuple[IPNetwork, ...]:
    """DOCPARSE_WEBHOOK_ALLOW_CIDRS: comma separated networks; WEBHOOK_CONFIG_INVALID if one
    does not parse."""
    try:
        return tuple(ipaddress.ip_network(part.strip()) for part in text.split(",") if part.strip())
    except ValueError as err:
        raise config_error(f"DOCPARSE_WEBHOOK_ALLOW_CIDRS: {err}") from err


class AddressPolicy:
    """Which addresses a webhook may reach: public ones, and what the allow-list names."""

    def __init__(self, allow: tuple[IPNetwork, ...]) -> None:
        self.allow = allow

    def allowed(self, address: IPAddress) -> bool:
        if any(address.version == net.version and address in net for net in self.allow):
            return True
        if isinstance(address, ipaddress.IPv6Address):
            if any(address in net for net in _NEVER_V6):
                return False
            embedded = address.ipv4_mapped or address.sixtofour
            if embedded is None and address in _NAT64:
                embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
            if embedded is not None:
                return self.allowed(embedded)
        return address.is_global and not address.is_multicast

    def allows_text(self, text: str) -> bool:
        return self.allowed(ipaddress.ip_address(text.split("%", 1)[0]))

    def check(self, host: str, addresses: list[str]) -> None:
        """CALLBACK_NOT_ALLOWED naming the first address the policy refuses."""
        for text in addresses:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            if not self.allowed(address):
                raise error(
                    ErrorReason.CALLBACK_NOT_ALLOWED,
                    f"the callback host {host!r} is {address}, a private, loopback, link-local, "
                    "multicast or reserved address; DOCPARSE_WEBHOOK_ALLOW_CIDRS does not list it",
                )


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# IPv6 ranges Python counts as global that reach no public host of their own: IPv4-compatible
# (deprecated; `::a00:1` is 10.0.0.1 to a stack that still maps it), IPv4-translated (SIIT),
# local-use NAT64 (a site's own translator, RFC 8215) and site-local (deprecated, still routed
# inside some sites). Refused unless DOCPARSE_WEBHOOK_ALLOW_CIDRS lists them.
_NEVER_V6 = tuple(
    ipaddress.IPv6Network(net)
    for net in ("::/96", "::ffff:0:0:0/96", "64:ff9b:1::/48", "fec0::/10")
)


def ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class Target:
    url: str
    host: str
    port: int


def parse_url(url: str) -> Target:
    """CALLBACK_INVALID unless `url` is an http(s) URL with a host, no credentials, at most
    MAX_URL characters."""
    if len(url) > MAX_URL:
        raise error(ErrorReason.CALLBACK_INVALID, f"the callback URL is over {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise error(
            ErrorReason.CALLBACK_INVALID, f"the callback URL does not parse: {err}"
        ) from err
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise error(ErrorReason.CALLBACK_INVALID, "the callback must be an http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise error(ErrorReason.CALLBACK_INVALID, "the callback URL may not carry user:password")
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        raise error(
            ErrorReason.CALLBACK_INVALID, "the callback URL contains spaces or control bytes"
        )
    if ip_literal(parts.hostname) is None and _NUMERIC_HOST.fullmatch(parts.hostname):
        raise error(
            ErrorReason.CALLBACK_INVALID,
            f"the callback host {parts.hostname!r} is a number, not a name or a dotted address: "
            "write an IPv4 address as four decimal parts (203.0.113.7)",
        )
    return Target(url, parts.hostname, port or (443 if parts.scheme == "https" else 80))


async def resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class DeliveryFailed(Exception):
    """An attempt that got no 2xx answer; the message is kept as the delivery's last error.
    `timed_out`: no answer within the connect or the total timeout (what opens a host's
    circuit, parser_svc/webhooks/slots.py)."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out
