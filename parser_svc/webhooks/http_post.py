"""The webhook POST (egress.py has the rules it follows): aiohttp with a resolver that returns
only the addresses the policy allows, so the connection goes where the check looked. Imported
by the dispatcher when it starts: a replica that delivers no webhooks does not load aiohttp
(~0.25 s of its start)."""

from __future__ import annotations

import asyncio
import socket

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from docparse.errors import DocparseError
from parser_svc.settings import Settings
from parser_svc.webhooks.egress import AddressPolicy, DeliveryFailed, ip_literal, parse_url


class RefusedAddress(OSError):
    """A name resolved to an address the policy refuses (aiohttp reports it as a DNS error)."""


class CheckedResolver(AbstractResolver):
    """aiohttp's resolver for webhooks: every address of the name is checked and only checked
    addresses are returned, so the connection goes where the check looked."""

    def __init__(self, policy: AddressPolicy) -> None:
        self.policy = policy

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, family=family)
        out: list[ResolveResult] = []
        for fam, _, proto, _, sockaddr in infos:
            address = str(sockaddr[0])
            try:
                self.policy.check(host, [address])
            except DocparseError as err:
                raise RefusedAddress(err.message) from None
            out.append(
                ResolveResult(
                    hostname=host,
                    host=address,
                    port=int(sockaddr[1]),
                    family=fam,
                    proto=proto,
                    flags=socket.AI_NUMERICHOST,
                )
            )
        if not out:
            raise OSError(f"{host} resolves to no address")
        return out

    async def close(self) -> None:
        return None


class Egress:
    """POSTs one webhook: SSRF-checked, bounded in time and in what it reads."""

    def __init__(self, settings: Settings, policy: AddressPolicy) -> None:
        self.policy = policy
        # Connecting has its own, shorter bound: an address that drops SYNs is known as such
        # in seconds, not at the end of the whole request's time.
        self.timeout = aiohttp.ClientTimeout(
            total=settings.webhook_timeout_s,
            sock_connect=min(settings.webhook_connect_timeout_s, settings.webhook_timeout_s),
        )
        self.max_response = settings.webhook_max_response_bytes
        self.concurrency = max(1, settings.webhook_concurrency)
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                resolver=CheckedResolver(self.policy),
                use_dns_cache=False,
                force_close=True,
                limit=self.concurrency,
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self.timeout, trust_env=False
            )
        return self._session

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> int:
        """The answer's status; DeliveryFailed when there is none (refused, timed out)."""
        try:
            target = parse_url(url)
            literal = ip_literal(target.host)
            if literal is not None:  # aiohttp does not ask the resolver about IP literals
                self.policy.check(target.host, [str(literal)])
            async with self.session().post(
                url, data=body, headers=headers, allow_redirects=False
            ) as response:
                await response.content.read(self.max_response)
                return response.status
        except DocparseError as err:
            raise DeliveryFailed(err.message) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            message = f"{type(err).__name__}: {err}"[:500] or "no answer"
            timed_out = isinstance(err, (TimeoutError, aiohttp.ServerTimeoutError))
            raise DeliveryFailed(message, timed_out) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
