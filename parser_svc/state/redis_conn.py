"""Every Redis client of parser_svc is made here, from `DOCPARSE_REDIS_URL` and the TLS settings:
the state store's (store.py; the sweeper uses it), the event hub's pub/sub connection
(events.py), the queue's (queue.py) and BullMQ's own worker connections (`bullmq_connection`).

URLs (user and password URL-encoded):

    redis://[[user]:password@]host[:port][/db]      an ACL user, or the default user's password
    rediss://[[user]:password@]host[:port][/db]     TLS: DOCPARSE_REDIS_TLS_CA_FILE (else the
                                                    system's CAs), _CERT_FILE + _KEY_FILE when
                                                    the server asks for a client certificate
    unix:///path/to/redis.sock[?db=0]
    redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]
        [?sentinel_username=...&sentinel_password=...]
                                                    the primary Sentinel names `service`; user
                                                    and password are the primary's, the query's
                                                    the sentinels' own (most have none)
    rediss+sentinel://...                           the same, TLS to sentinels and primary
    redis+cluster://[[user]:password@]host:port[,host:port...]
                                                    Redis Cluster: any of its nodes (more than
                                                    one, so a start finds one up); the client
                                                    learns the rest and follows failovers
    rediss+cluster://...                            the same over TLS

A server's certificate is checked against the CA and the host name (or IP) in the URL: there is
no switch to turn that off. What an operator must fix (a URL that is not one of these, TLS files
missing, credentials or a certificate Redis or we refuse) stops parser_svc at start
(redis_start_check.py, exit 2 with the reason); a Redis that is only down or slow does not: calls
answer STATE_STORE_UNAVAILABLE until it is back.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.connection import (
    BlockingConnectionPool,
    SSLConnection,
    UnixDomainSocketConnection,
    parse_url,
)
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

from parser_svc.settings import Settings
from parser_svc.state import redis_cancel
from parser_svc.state.redis_cluster import cluster_client
from parser_svc.state.redis_sentinel import (
    BlockingSentinelPool,
    PrimaryConnection,
    PrimarySSLConnection,
)

log = logging.getLogger(__name__)
redis_cancel.apply()  # before any client exists: a cancelled call ends its task on 3.11 too
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SCHEMES = ("redis", "rediss", "unix", *SENTINEL_SCHEMES, *CLUSTER_SCHEMES)
DEFAULT_SENTINEL_PORT = 26379
# Above BullMQ's longest blocking wait for a job (10 s; 5 s when idle).
BULLMQ_READ_TIMEOUT_S = 15.0


class RedisUrlError(ValueError):
    """DOCPARSE_REDIS_URL or the TLS settings cannot work; the message says why."""


@dataclass(frozen=True)
class SentinelSpec:
    hosts: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None
    sentinel_username: str | None
    sentinel_password: str | None


@dataclass(frozen=True)
class RedisTarget:
    """Where Redis is and how to reach it: the URL plus what a URL cannot carry (TLS files)."""

    url: str
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None

    @classmethod
    def of(cls, settings: Settings) -> RedisTarget:
        return cls(
            settings.redis_url,
            settings.redis_tls_ca_file,
            settings.redis_tls_cert_file,
            settings.redis_tls_key_file,
        )

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme.lower()

    @property
    def tls(self) -> bool:
        return self.scheme in ("rediss", "rediss+sentinel", "rediss+cluster")

    @property
    def cluster(self) -> bool:
        return self.scheme in CLUSTER_SCHEMES

    def redacted(self) -> str:
        """The URL without its passwords, for logs and errors."""
        parts = urlsplit(self.url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, hosts = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{hosts}" if ":" in userinfo else f"{user}@{hosts}"
        query = "&".join(
            f"{key}=***" if "password" in key else f"{key}={quote(value)}"
            for key, values in parse_qs(parts.query).items()
            for value in values
        )
        return parts._replace(netloc=netloc, query=query).geturl()

    def validate(self) -> None:
        """RedisUrlError when the URL or the TLS settings cannot work; nothing is connected."""
        if self.scheme not in SCHEMES:
            raise RedisUrlError(
                f"DOCPARSE_REDIS_URL {self.redacted()!r}: the scheme must be one of "
                + ", ".join(f"{s}://" for s in SCHEMES)
            )
        if self.scheme in SENTINEL_SCHEMES:
            self.sentinel_spec()
        elif self.cluster:
            self.cluster_spec()
        else:
            try:
                parse_url(self.url)
            except ValueError as err:
                raise RedisUrlError(f"DOCPARSE_REDIS_URL {self.redacted()!r}: {err}") from err
        files = {
            "DOCPARSE_REDIS_TLS_CA_FILE": self.tls_ca_file,
            "DOCPARSE_REDIS_TLS_CERT_FILE": self.tls_cert_file,
            "DOCPARSE_REDIS_TLS_KEY_FILE": self.tls_key_file,
        }
        given = {name: path for name, path in files.items() if path is not None}
        if given and not self.tls:
            raise RedisUrlError(
                f"{', '.join(given)} set, but DOCPARSE_REDIS_URL is {self.scheme}:// (no TLS): "
                "use rediss:// (or rediss+sentinel://), or unset them"
            )
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise RedisUrlError(
                "DOCPARSE_REDIS_TLS_CERT_FILE and DOCPARSE_REDIS_TLS_KEY_FILE go together"
            )
        for name, path in given.items():
            if not path.is_file():
                raise RedisUrlError(f"{name}={path}: no such file")
        if self.tls:
            try:
                self._ssl_context_check()
            except (OSError, ssl.SSLError) as err:
                raise RedisUrlError(f"the Redis TLS files cannot be loaded: {err}") from err

    def _ssl_context_check(self) -> None:
        self.ssl_context()

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS settings as a context: the server's certificate checked against the CA
        and its name (or IP), the client certificate when one is set."""
        context = ssl.create_default_context(
            cafile=str(self.tls_ca_file) if self.tls_ca_file else None
        )
        if self.tls_cert_file is not None and self.tls_key_file is not None:
            context.load_cert_chain(str(self.tls_cert_file), str(self.tls_key_file))
        return context

    def _tls_kwargs(self, *, flag: bool = True) -> dict[str, Any]:
        """The TLS options, with `ssl=True` where the connection class is not chosen yet
        (redis.asyncio.Redis, a Sentinel pool); from_url picks it from the scheme."""
        if not self.tls:
            return {}
        return {
            **({"ssl": True} if flag else {}),
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": True,
            "ssl_ca_certs": str(self.tls_ca_file) if self.tls_ca_file else None,
            "ssl_certfile": str(self.tls_cert_file) if self.tls_cert_file else None,
            "ssl_keyfile": str(self.tls_key_file) if self.tls_key_file else None,
        }

    def _hosts(self, default_port: int) -> tuple[list[tuple[str, int]], str | None, str | None]:
        """The host:port list of a sentinel or cluster URL, and its user and password."""
        where = f"DOCPARSE_REDIS_URL {self.redacted()!r}"
        netloc = urlsplit(self.url).netloc
        username = password = None
        if "@" in netloc:
            userinfo, netloc = netloc.rsplit("@", 1)
            user, _, secret = userinfo.partition(":")
            username = unquote(user) or None
            password = unquote(secret) or None
        hosts = []
        for item in netloc.split(","):
            host, port = item.strip(), default_port
            if host.startswith("["):  # [::1]:26379
                bracketed, _, rest = host[1:].partition("]")
                host, port_text = bracketed, rest.removeprefix(":")
            else:
                host, _, port_text = host.partition(":")
            try:
                port = int(port_text) if port_text else default_port
            except ValueError:
                raise RedisUrlError(f"{where}: {item!r} is not host:port") from None
            if not host:
                raise RedisUrlError(f"{where}: a node without a host")
            hosts.append((host, port))
        return hosts, username, password

    def cluster_spec(self) -> tuple[list[tuple[str, int]], str | None, str | None]:
        """The seed nodes, user and password of a redis+cluster:// URL; RedisUrlError when
        it is not one (a cluster has database 0 only, and no parameters are known)."""
        parts = urlsplit(self.url)
        if parts.path.strip("/") not in ("", "0") or parts.query:
            raise RedisUrlError(
                f"DOCPARSE_REDIS_URL {self.redacted()!r}: a cluster URL is "
                "redis+cluster://[user:password@]host:port[,host:port...] (database 0 only)"
            )
        return self._hosts(6379)

    def sentinel_spec(self) -> SentinelSpec:
        """The parts of a redis+sentinel:// URL; RedisUrlError when it is not one."""
        parts = urlsplit(self.url)
        where = f"DOCPARSE_REDIS_URL {self.redacted()!r}"
        hosts, username, password = self._hosts(DEFAULT_SENTINEL_PORT)
        segments = [unquote(s) for s in parts.path.split("/") if s]
        if not segments or len(segments) > 2:
            raise RedisUrlError(f"{where}: the path must be /<service name>[/<db>]")
        try:
            db = int(segments[1]) if len(segments) == 2 else 0
        except ValueError:
            raise RedisUrlError(f"{where}: the database {segments[1]!r} is not a number") from None
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        unknown = set(query) - {"sentinel_username", "sentinel_password"}
        if unknown:
            raise RedisUrlError(f"{where}: unknown parameters {sorted(unknown)}")
        return SentinelSpec(
            hosts=tuple(hosts),
            service=segments[0],
            db=db,
            username=username,
            password=password,
            sentinel_username=query.get("sentinel_username") or None,
            sentinel_password=query.get("sentinel_password") or None,
        )

    def _sentinel(self, spec: SentinelSpec, options: dict[str, Any]) -> Sentinel:
        """The sentinels, asked with the same deadlines as the data connections."""
        sentinel_kwargs: dict[str, Any] = {
            "username": spec.sentinel_username,
            "password": spec.sentinel_password,
            **self._tls_kwargs(),
        }
        for key in ("socket_timeout", "socket_connect_timeout"):
            if options.get(key) is not None:
                sentinel_kwargs[key] = options[key]
        return Sentinel(list(spec.hosts), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call, unused-ignore]

    def client(
        self,
        *,
        decode_responses: bool = False,
        max_connections: int | None = None,
        pool_timeout_s: float | None = None,
        **options: Any,
    ) -> aioredis.Redis:
        """A client (a pool of connections) to the primary; `options` as redis.asyncio.Redis
        takes them. With `max_connections`, a call that finds them all in use waits up to
        `pool_timeout_s` for one (redis-py's default pool raises at once beyond 100)."""
        if self.cluster:
            hosts, username, password = self.cluster_spec()
            return cluster_client(
                hosts,
                max_connections,
                username=username,
                password=password,
                decode_responses=decode_responses,
                **self._tls_kwargs(),
                **options,
            )
        if max_connections is not None:
            options |= {"max_connections": max_connections, "timeout": pool_timeout_s}
        if self.scheme in SENTINEL_SCHEMES:
            spec = self.sentinel_spec()
            blocking = max_connections is not None
            pool_class = BlockingSentinelPool if blocking else SentinelConnectionPool
            primary: aioredis.Redis = self._sentinel(spec, options).master_for(
                spec.service,
                redis_class=aioredis.Redis,
                connection_pool_class=pool_class,
                connection_class=PrimarySSLConnection if self.tls else PrimaryConnection,
                db=spec.db,
                username=spec.username,
                password=spec.password,
                decode_responses=decode_responses,
                **self._tls_kwargs(flag=False),
                **options,
            )
            return primary
        options |= {"decode_responses": decode_responses, **self._tls_kwargs(flag=False)}
        if max_connections is not None:
            return aioredis.Redis.from_pool(BlockingConnectionPool.from_url(self.url, **options))
        return aioredis.Redis.from_url(self.url, **options)

    def bullmq_connection(self) -> dict[str, Any] | aioredis.Redis:
        """BullMQ's `connection` option: keyword arguments it gives redis.asyncio.Redis for each
        connection it opens (it adds decode_responses and its own long retries). Through
        Sentinel, a connection pool that follows the primary (BullMQ takes one connection of
        it per client). Reads may take longer than BullMQ's longest blocking wait: a wait cut
        short by the socket timeout (redis-py's default, 5 s, is BullMQ's usual wait) never
        reaches its look at the wait list, so a job whose wake-up marker was lost (popped by a
        wait whose reply a failover lost) would wait for the next submit."""
        if self.scheme in SENTINEL_SCHEMES:
            client = self.client(decode_responses=True, socket_timeout=BULLMQ_READ_TIMEOUT_S)
            return {"connection_pool": client.connection_pool}
        if self.cluster:  # BullMQ takes a cluster client as it is (its keys share `{bull}`)
            return self.client(decode_responses=True, socket_timeout=BULLMQ_READ_TIMEOUT_S)
        kwargs: dict[str, Any] = {**parse_url(self.url), "socket_timeout": BULLMQ_READ_TIMEOUT_S}
        connection_class = kwargs.pop("connection_class", None)
        if connection_class is UnixDomainSocketConnection:
            kwargs["unix_socket_path"] = kwargs.pop("path")
        elif connection_class is SSLConnection:
            kwargs.update(self._tls_kwargs())
        return kwargs
