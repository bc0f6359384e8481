"""What only an operator can fix about Redis, found at start: `check_at_start` validates the
URL and TLS settings, then pings, and exits 2 with the reason when Redis refuses our
credentials or we refuse its certificate (`refusal_detail` words those refusals, here and for
calls later: store_errors.py). A Redis that is only down or slow does not stop the start.
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.exceptions import (
    AuthenticationError,
    AuthenticationWrongNumberOfArgsError,
    AuthorizationError,
    NoPermissionError,
    RedisClusterException,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from docparse.reasons import ErrorReason
from docparse_server import serving
from docparse_server.errors import refusal_to_start
from parser_svc.state.redis_conn import RedisTarget, RedisUrlError

log = logging.getLogger(__name__)


def refusal_detail(err: BaseException) -> str | None:
    """Words for an answer only an operator can change (credentials, certificates), or None
    for a failure that may pass by itself (down, slow, loading, failing over)."""
    if isinstance(err, AuthenticationError | AuthenticationWrongNumberOfArgsError):
        return "Redis refused the credentials (user or password in DOCPARSE_REDIS_URL)"
    if isinstance(err, AuthorizationError | NoPermissionError):
        return "the Redis ACL user lacks a permission docparse needs (docs/operations.md)"
    # OpenSSL's words, lower-cased (its codes are upper-case forms of the same).
    text = str(err).lower().replace("_", " ")
    if "certificate verify failed" in text:
        return "Redis's TLS certificate is not trusted (DOCPARSE_REDIS_TLS_CA_FILE, host name)"
    if "certificate required" in text:
        return "Redis asks for a client certificate (DOCPARSE_REDIS_TLS_CERT_FILE and _KEY_FILE)"
    if "wrong version number" in text:
        return "Redis does not speak TLS on that port (rediss:// to a plaintext port?)"
    return None


async def check_at_start(target: RedisTarget, service: str, timeout_s: float) -> None:
    """Fails closed on what only an operator can fix: exits 2 with the reason when the URL or
    the TLS settings cannot work, or when Redis refuses our credentials or we refuse its
    certificate. A Redis that does not answer yet is logged and the start goes on."""

    def refuse(message: str) -> None:
        serving.exit_on_startup_error(
            service,
            refusal_to_start(ErrorReason.STATE_STORE_UNAVAILABLE, message),
        )

    try:
        target.validate()
    except RedisUrlError as err:
        refuse(str(err))
    # A TLS server that wants a client certificate we do not send closes the connection with
    # an alert right after the handshake; when our PING crosses that close, the alert is lost
    # and only "connection reset" remains. Three such closes in a row are that refusal.
    for _ in range(3):
        client = target.client(
            socket_timeout=timeout_s, socket_connect_timeout=timeout_s, retry=None
        )
        try:
            async with asyncio.timeout(timeout_s * 2):
                await client.ping()
                await client.eval("return 1", 0)  # every write is a script: an ACL must allow it
                if target.cluster and not await _has_sharded_pubsub(client):
                    refuse(
                        "a Redis Cluster needs Redis 7 or newer (the job events are published "
                        f"on sharded channels, SPUBLISH): {target.redacted()}"
                    )
            return
        except (RedisError, OSError, TimeoutError, RedisClusterException) as err:
            detail = refusal_detail(err)
            if detail is not None:
                refuse(f"{detail}: {target.redacted()}")
            if not (target.tls and target.tls_cert_file is None and _closed(err)):
                log.warning(
                    "Redis does not answer at start (%s: %r); calls answer "
                    "STATE_STORE_UNAVAILABLE until it does",
                    target.redacted(),
                    err,
                    extra={"event": "redis.unavailable_at_start"},
                )
                return
        finally:
            await client.aclose()
        await asyncio.sleep(0.2)
    refuse(
        "Redis closed every TLS connection right after the handshake: it asks for a client "
        f"certificate (DOCPARSE_REDIS_TLS_CERT_FILE and _KEY_FILE): {target.redacted()}"
    )


async def _has_sharded_pubsub(client: aioredis.Redis) -> bool:
    try:
        await client.execute_command("SPUBLISH", "docparse:probe", "")  # type: ignore[no-untyped-call]
    except ResponseError as err:
        if "unknown command" in str(err).lower():
            return False
        raise
    return True


def _closed(err: BaseException) -> bool:
    text = str(err).lower()
    return isinstance(err, RedisConnectionError | OSError) and any(
        words in text for words in ("reset by peer", "closed by server", "connection closed")
    )
