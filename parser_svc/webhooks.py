"""Webhooks: a job that names a callback gets its terminal record POSTed, signed, at least once.

The durable part is an outbox in Redis, written by the submit and read by one dispatcher:

- Each (job, callback) is a *delivery*: a hash `docparse:{env}:webhook:<job_id>.<digest>`
  (URL, secret name, tenant, attempts) and an entry in the due set `...:webhooks:due`, scored by
  the time it is next looked at (ms). The submit writes both *before* the create script runs
  (with the job id it is about to create; a create that answers with an earlier job moves it to
  that job), so a job with a callback never exists without its delivery, whatever reply is lost
  or whichever replica dies; a delivery whose job was never created is dropped after
  `sweep_uploads_after_s`. Writing it is idempotent: a re-run of the submit changes nothing,
  and re-adds a delivery only while it has not ended.
- One worker replica at a time (a lease, as the sweeper's) runs the dispatcher: every
  `webhook_poll_s` it takes the due deliveries, reads their jobs, and puts back the ones whose
  job has not ended (`webhook_recheck_s` later). While it holds the lease it also listens to
  every job event (one pattern subscription): a terminal record makes that job's deliveries
  (the set `...:webhook:<job_id>:deliveries`) due at once and wakes the round, so a webhook
  leaves within milliseconds; a lost event costs at most `webhook_recheck_s`. For an ended
  job it claims the delivery (moves
  it past the request's timeout, so a replica dying mid-request leaves it to be retried), then
  POSTs `{"type": "job.succeeded", "timestamp": ..., "data": <the Job as JSON>}` signed the
  Standard Webhooks way. A 2xx answer ends the delivery; anything else (another status, a
  redirect, a timeout, a refused address) schedules the next attempt with exponential backoff;
  after `webhook_max_attempts` the delivery moves to the dead-letter set `...:webhooks:dead`
  (scored by that moment; its hash keeps the last error for `tombstone_s`).
- `webhook-id` is `msg_<job_id>_<state>`: the same for every attempt (and every re-run), so a
  receiver that saw it already answers 2xx and does nothing.

Egress is SSRF-safe: the URL's host is resolved by us, every address it resolves to must be
public (or listed in `webhook_allow_cidrs`), and the connection goes to the addresses checked
(aiohttp connects to what our resolver returns, no second lookup); no proxy from the
environment, no redirect followed, a timeout, and at most `webhook_max_response_bytes` read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import random
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import grpc
from aiohttp.abc import AbstractResolver, ResolveResult
from google.protobuf import json_format
from prometheus_client import Counter

from docparse.errors import DocparseError
from docparse.v1 import job_pb2, parser_service_pb2
from parser_svc.records import TERMINAL_STATES, decode_hash, record_to_job
from parser_svc.settings import Settings
from parser_svc.store import JobStore, now_ms
from parser_svc.sweeper import _LEASE

log = logging.getLogger(__name__)
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_URL = 2048
# Due deliveries taken per round.
BATCH = 100
# How long a submit waits for the callback's host to resolve before accepting it unchecked
# (every delivery checks again).
RESOLVE_AT_SUBMIT_S = 2.0
OUTCOMES = ("delivered", "failed", "dead_lettered")
# How a terminal record looks in a published event (cjson, no spaces).
_TERMINAL_MARKERS = tuple(f'"state":"{state}"'.encode() for state in sorted(TERMINAL_STATES))

DELIVERIES = Counter(
    "docparse_webhook_deliveries_total",
    "Webhook delivery attempts by outcome: delivered (a 2xx answer), failed (another answer, "
    "a timeout, a refused address; another attempt follows), dead_lettered (the last allowed "
    "attempt failed: the delivery moved to the dead-letter set)",
    ["outcome"],
    registry=None,
)
for _outcome in OUTCOMES:
    DELIVERIES.labels(_outcome)


def invalid(reason: str, message: str) -> DocparseError:
    return DocparseError(grpc.StatusCode.INVALID_ARGUMENT, reason, message)


def config_error(message: str) -> DocparseError:
    return DocparseError(grpc.StatusCode.FAILED_PRECONDITION, "WEBHOOK_CONFIG_INVALID", message)


# --- configuration ----------------------------------------------------------------------------


def parse_cidrs(text: str) -> tuple[IPNetwork, ...]:
    """DOCPARSE_WEBHOOK_ALLOW_CIDRS: comma separated networks; WEBHOOK_CONFIG_INVALID if one
    does not parse."""
    try:
        return tuple(ipaddress.ip_network(part.strip()) for part in text.split(",") if part.strip())
    except ValueError as err:
        raise config_error(f"DOCPARSE_WEBHOOK_ALLOW_CIDRS: {err}") from err


def decode_secret(secret: str) -> bytes:
    """The key of a `whsec_<base64>` secret (what the standardwebhooks libraries take)."""
    if not secret.startswith("whsec_"):
        raise ValueError("a webhook secret is whsec_ followed by base64")
    key = base64.b64decode(secret[len("whsec_") :] + "==", validate=False)
    if len(key) < 16:
        raise ValueError("a webhook secret needs at least 16 bytes of key")
    return key


class WebhookSecrets:
    """tenant -> {secret name -> key}, from DOCPARSE_WEBHOOK_SECRETS_FILE; re-read when the
    file changes (a file that became unreadable keeps the last good secrets, and says so)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._secrets: dict[str, dict[str, bytes]] = {}
        if path is not None:
            self._reload(strict=True)

    @property
    def configured(self) -> bool:
        return self.path is not None

    def _reload(self, *, strict: bool) -> None:
        assert self.path is not None
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp == self._stamp:
                return
            data = json.loads(self.path.read_text())
            if not isinstance(data, dict):
                raise ValueError("the file must hold an object of tenants")
            loaded: dict[str, dict[str, bytes]] = {}
            for tenant, named in data.items():
                if not isinstance(named, dict):
                    raise ValueError(f"tenant {tenant!r}: an object of named secrets expected")
                loaded[str(tenant)] = {str(k): decode_secret(str(v)) for k, v in named.items()}
        except (OSError, ValueError) as err:
            if strict:
                raise config_error(f"DOCPARSE_WEBHOOK_SECRETS_FILE {self.path}: {err}") from err
            log.error("webhook secrets not reloaded, the last good ones stay: %s", err)
            return
        self._secrets, self._stamp = loaded, stamp

    def get(self, tenant: str, name: str) -> bytes | None:
        if self.path is None:
            return None
        self._reload(strict=False)
        return self._secrets.get(tenant, {}).get(name)


def check_config(settings: Settings) -> None:
    """Fails closed at start: WEBHOOK_CONFIG_INVALID when the secrets file or the allow-list
    cannot be read."""
    parse_cidrs(settings.webhook_allow_cidrs)
    WebhookSecrets(settings.webhook_secrets_file)


# --- signing ----------------------------------------------------------------------------------


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """The Standard Webhooks `webhook-signature` value: v1,<base64 HMAC-SHA256 of
    "<id>.<timestamp>.<body>">."""
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def message_id(job_id: str, state: str) -> str:
    """Stable per job and terminal state: every attempt and every re-run sends the same."""
    return f"msg_{job_id}_{state.lower()}"


def payload(job: job_pb2.Job, state: str) -> bytes:
    data = json_format.MessageToDict(
        job, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    envelope = {
        "type": f"job.{state.lower()}",
        "timestamp": job.update_time.ToJsonString(),
        "data": data,
    }
    return json.dumps(envelope, separators=(",", ":")).encode()


# --- egress policy ----------------------------------------------------------------------------


class AddressPolicy:
    """Which addresses a webhook may reach: public ones, and what the allow-list names."""

    def __init__(self, allow: tuple[IPNetwork, ...]) -> None:
        self.allow = allow

    def allowed(self, address: IPAddress) -> bool:
        if any(address.version == net.version and address in net for net in self.allow):
            return True
        if isinstance(address, ipaddress.IPv6Address):
            embedded = address.ipv4_mapped or address.sixtofour
            if embedded is None and address in _NAT64:
                embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
            if embedded is not None:
                return self.allowed(embedded)
        return address.is_global and not address.is_multicast

    def check(self, host: str, addresses: list[str]) -> None:
        """CALLBACK_NOT_ALLOWED naming the first address the policy refuses."""
        for text in addresses:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            if not self.allowed(address):
                raise invalid(
                    "CALLBACK_NOT_ALLOWED",
                    f"the callback host {host!r} is {address}, a private, loopback, link-local, "
                    "multicast or reserved address; DOCPARSE_WEBHOOK_ALLOW_CIDRS does not list it",
                )


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


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
        raise invalid("CALLBACK_INVALID", f"the callback URL is over {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise invalid("CALLBACK_INVALID", f"the callback URL does not parse: {err}") from err
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise invalid("CALLBACK_INVALID", "the callback must be an http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise invalid("CALLBACK_INVALID", "the callback URL may not carry user:password")
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        raise invalid("CALLBACK_INVALID", "the callback URL contains spaces or control bytes")
    return Target(url, parts.hostname, port or (443 if parts.scheme == "https" else 80))


async def resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


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


class DeliveryFailed(Exception):
    pass


class Egress:
    """POSTs one webhook: SSRF-checked, bounded in time and in what it reads."""

    def __init__(self, settings: Settings, policy: AddressPolicy) -> None:
        self.policy = policy
        self.timeout = aiohttp.ClientTimeout(total=settings.webhook_timeout_s)
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
            raise DeliveryFailed(f"{type(err).__name__}: {err}"[:500] or "no answer") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


# --- the outbox -------------------------------------------------------------------------------

# KEYS[1] delivery hash, KEYS[2] due set, KEYS[3] the job's deliveries (a set). ARGV: member,
# due ms, keep ms, field/value pairs. A delivery that ended (delivered or dead) is not added
# again.
_ADD = """
if redis.call('HEXISTS', KEYS[1], 'ended_ms') == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('ZADD', KEYS[2], 'NX', ARGV[2], ARGV[1])
return 1
"""


@dataclass(frozen=True)
class Hook:
    """A checked callback: where to deliver, and the name of the secret to sign with."""

    url: str
    secret_name: str


class Outbox:
    def __init__(self, settings: Settings, store: JobStore) -> None:
        self.settings = settings
        self.store = store
        prefix = store.keys.prefix
        self.due_key = f"{prefix}:webhooks:due"
        self.dead_key = f"{prefix}:webhooks:dead"
        self.lease_key = f"{prefix}:webhooks:lease"
        self._delivery_prefix = f"{prefix}:webhook:"
        self._add = store.client.register_script(_ADD)
        # A delivery's hash outlives the longest a job can wait, run and be retained, plus the
        # whole backoff budget.
        self.keep_ms = store.ttl.listed_ms + self.backoff_budget_ms()

    def backoff_ms(self, attempts: int) -> int:
        """The wait after the `attempts`-th failed attempt: doubling, capped, +0-10% jitter."""
        base = self.settings.webhook_backoff_ms * 2 ** min(max(attempts - 1, 0), 40)
        capped = min(base, int(self.settings.webhook_backoff_max_s * 1000))
        return int(capped * random.uniform(1.0, 1.1))

    def backoff_budget_ms(self) -> int:
        return sum(
            int(self.backoff_ms(n) * 1.1) for n in range(1, self.settings.webhook_max_attempts + 1)
        )

    def key(self, delivery_id: str) -> str:
        return f"{self._delivery_prefix}{delivery_id}"

    def job_key(self, job_id: str) -> str:
        """The set of a job's deliveries (a job that ends wakes them)."""
        return f"{self._delivery_prefix}{job_id}:deliveries"

    @staticmethod
    def delivery_id(job_id: str, callback: Hook) -> str:
        digest = hashlib.sha256(f"{callback.url}\0{callback.secret_name}".encode()).hexdigest()
        return f"{job_id}.{digest[:16]}"

    async def add(self, job_id: str, tenant: str, callback: Hook) -> str:
        delivery = self.delivery_id(job_id, callback)
        now = now_ms()
        fields = ["job_id", job_id, "tenant", tenant, "url", callback.url]
        fields += ["secret", callback.secret_name, "created_ms", str(now)]
        # Due at once: the first round reads the job (it may have ended already: a re-run of
        # the submit answering with an ended job) and, if it has not, looks again later.
        args: list[str | int] = [delivery, now, self.keep_ms, *fields]
        keys = [self.key(delivery), self.due_key, self.job_key(job_id)]
        await self.store.call(lambda: self._add(keys=keys, args=args))
        return delivery

    async def discard(self, job_id: str, callback: Hook) -> None:
        """Removes a delivery written for a job that was not created (best effort: what is
        left is dropped by the dispatcher once its job is known never to have existed)."""
        delivery = self.delivery_id(job_id, callback)
        client = self.store.client

        async def remove() -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.zrem(self.due_key, delivery)
                pipe.delete(self.key(delivery))
                pipe.srem(self.job_key(job_id), delivery)
                await pipe.execute()

        try:
            await self.store.call(remove)
        except DocparseError as err:
            log.info("delivery %s not discarded (%s): the dispatcher drops it", delivery, err)


class Callbacks:
    """The submit's side: checks a request's callback and writes its delivery."""

    def __init__(self, settings: Settings, store: JobStore) -> None:
        self.secrets = WebhookSecrets(settings.webhook_secrets_file)
        self.policy = AddressPolicy(parse_cidrs(settings.webhook_allow_cidrs))
        self.outbox = Outbox(settings, store)

    async def check(self, request: parser_service_pb2.SubmitJobRequest, tenant: str) -> Hook | None:
        """The request's callback, or None; INVALID_ARGUMENT (CALLBACK_INVALID,
        CALLBACK_SECRET_UNKNOWN, CALLBACK_NOT_ALLOWED) when it cannot be delivered safely."""
        if not request.HasField("callback"):
            return None
        url, name = request.callback.url.strip(), request.callback.secret_name
        if not url and not name:
            return None
        if not url or not name:
            raise invalid("CALLBACK_INVALID", "a callback needs both a url and a secret_name")
        target = parse_url(url)
        if self.secrets.get(tenant, name) is None:
            raise invalid(
                "CALLBACK_SECRET_UNKNOWN",
                f"this tenant has no webhook secret named {name[:100]!r}"
                + ("" if self.secrets.configured else " (no webhook secrets are configured)"),
            )
        literal = ip_literal(target.host)
        if literal is not None:
            self.policy.check(target.host, [str(literal)])
            return Hook(url, name)
        try:
            async with asyncio.timeout(RESOLVE_AT_SUBMIT_S):
                addresses = await resolve(target.host, target.port)
        except TimeoutError:
            return Hook(url, name)  # every delivery checks again
        except OSError as err:
            raise invalid(
                "CALLBACK_INVALID", f"the callback host {target.host!r} does not resolve: {err}"
            ) from err
        self.policy.check(target.host, addresses)
        return Hook(url, name)


# --- the dispatcher ---------------------------------------------------------------------------


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Dispatcher:
    """Delivers due webhooks while this replica holds the lease; see the module's notes."""

    def __init__(self, settings: Settings, store: JobStore) -> None:
        self.settings = settings
        self.store = store
        self.outbox = Outbox(settings, store)
        self.secrets = WebhookSecrets(settings.webhook_secrets_file)
        self.egress = Egress(settings, AddressPolicy(parse_cidrs(settings.webhook_allow_cidrs)))
        self.owner = f"{socket.gethostname()}/{os.getpid()}/webhooks"
        self._concurrency = max(1, settings.webhook_concurrency)
        self._ended: set[str] = set()
        self._wake = asyncio.Event()

    async def run(self) -> None:
        """Runs until cancelled; never raises otherwise."""
        listener: asyncio.Task[None] | None = None
        try:
            while True:
                taken = 0
                try:
                    held = await self.hold_lease()
                    if held and listener is None:
                        listener = asyncio.create_task(self.listen())
                    elif not held and listener is not None:
                        listener.cancel()
                        listener = None
                    if held:
                        taken = await self.dispatch_once()
                except DocparseError as err:
                    log.info("webhook round skipped: %s", err)
                except Exception:
                    log.exception("webhook round failed")
                if taken < BATCH:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), self.settings.webhook_poll_s)
                    self._wake.clear()
        finally:
            if listener is not None:
                listener.cancel()
            await self.egress.close()

    async def listen(self) -> None:
        """While this replica holds the lease: every job event of the environment (one pattern
        subscription); a terminal record wakes the round at once. Pub/sub is at-most-once: a
        lost event only costs the wait until `webhook_recheck_s`."""
        pattern = f"{self.store.keys.job_key_prefix}*:events"
        while True:
            pubsub = self.store.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(pattern)
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None and message.get("type") == "pmessage":
                        self._on_event(message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.info("webhook event subscription lost (%r); polling meanwhile", err)
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]

    def _on_event(self, data: bytes) -> None:
        if not any(marker in data for marker in _TERMINAL_MARKERS):
            return  # progress: most events; no JSON decoded for them
        try:
            record = json.loads(data)
        except ValueError:
            return
        if record.get("state") in TERMINAL_STATES and record.get("job_id"):
            self._ended.add(str(record["job_id"]))
            self._wake.set()

    async def _wake_ended(self, now: int) -> None:
        """Makes the deliveries of the jobs that ended since the last round due now."""
        ended, self._ended = list(self._ended), set()
        if not ended:
            return
        outbox, client = self.outbox, self.store.client

        async def members() -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                for job_id in ended:
                    pipe.smembers(outbox.job_key(job_id))
                return list(await pipe.execute())

        due = {_text(m): now for found in await self.store.call(members) for m in found}
        if due:
            await self.store.call(lambda: client.zadd(outbox.due_key, due, xx=True))

    async def hold_lease(self) -> bool:
        s = self.settings
        ttl_ms = int(max(s.webhook_poll_s * 3, s.webhook_timeout_s + 5) * 1000)
        lease = self.outbox.lease_key
        held = await self.store.call(
            lambda: self.store.client.eval(_LEASE, 1, lease, self.owner, ttl_ms)
        )
        return bool(held)

    async def dispatch_once(self) -> int:
        """One round: the due deliveries, each rescheduled, dropped or sent. Returns how many
        were due (BATCH: more are, look again at once)."""
        outbox, keys, client = self.outbox, self.store.keys, self.store.client
        now = now_ms()
        await self._wake_ended(now)
        found = await self.store.call(
            lambda: client.zrangebyscore(outbox.due_key, "-inf", now, start=0, num=BATCH)
        )
        ids = [_text(i) for i in found]
        if not ids:
            return 0

        async def read() -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                for delivery in ids:
                    job_id = delivery.rsplit(".", 1)[0]
                    pipe.hgetall(outbox.key(delivery))
                    pipe.hgetall(keys.job(job_id))
                    pipe.exists(keys.tombstone(job_id))
                return list(await pipe.execute())

        replies = await self.store.call(read)
        later: dict[str, int] = {}
        gone: list[str] = []
        orphans: list[str] = []
        ready: list[tuple[str, dict[str, str], dict[str, str]]] = []
        recheck = now + int(self.settings.webhook_recheck_s * 1000)
        orphan_ms = int(self.settings.sweep_uploads_after_s * 1000)
        for index, delivery in enumerate(ids):
            spec = decode_hash(replies[3 * index])
            record = decode_hash(replies[3 * index + 1])
            if not spec or "ended_ms" in spec:
                gone.append(delivery)
            elif record and record.get("state") in TERMINAL_STATES:
                ready.append((delivery, spec, record))
            elif record or now - int(spec.get("created_ms") or 0) < orphan_ms:
                later[delivery] = recheck  # not ended yet, or not created yet
            elif replies[3 * index + 2]:
                await self._dead(delivery, spec, "the job's record expired before delivery")
            else:
                log.info("webhook %s dropped: its job was never created", delivery)
                orphans.append(delivery)
        # At most one request per slot a round, so a round lasts at most one timeout: within
        # the claim and the lease. The rest stay due for the next round, at once.
        ready, waiting = ready[: self._concurrency], len(ready) > self._concurrency
        claim = now + int((self.settings.webhook_timeout_s + 5) * 1000)
        later.update({delivery: claim for delivery, _, _ in ready})

        async def reschedule() -> None:
            async with client.pipeline(transaction=False) as pipe:
                if later:
                    pipe.zadd(outbox.due_key, later, xx=True)
                if gone or orphans:
                    pipe.zrem(outbox.due_key, *gone, *orphans)
                for delivery in orphans:  # nothing to remember: no job will ever name it
                    pipe.delete(outbox.key(delivery), outbox.job_key(delivery.rsplit(".", 1)[0]))
                await pipe.execute()

        if later or gone or orphans:
            await self.store.call(reschedule)
        await asyncio.gather(*(self._deliver(*item) for item in ready))
        return BATCH if waiting else len(ids)

    async def _deliver(self, delivery: str, spec: dict[str, str], record: dict[str, str]) -> None:
        try:
            await self._attempt(delivery, spec, record)
        except DocparseError as err:  # the store: the claim runs out, another round retries
            log.info("webhook %s: state store error %s; retried later", delivery, err.reason)

    async def _attempt(self, delivery: str, spec: dict[str, str], record: dict[str, str]) -> None:
        outbox, client = self.outbox, self.store.client
        key = outbox.key(delivery)
        attempts = int(await self.store.call(lambda: client.hincrby(key, "attempts", 1)))
        state = record["state"]
        job = record_to_job(record)
        body = payload(job, state)
        msg_id = message_id(job.job_id, state)
        started = time.monotonic()
        try:
            tenant = spec.get("tenant", "")
            secret = self.secrets.get(tenant, spec.get("secret", ""))
            if secret is None:
                raise DeliveryFailed(f"tenant {tenant!r} has no secret {spec.get('secret')!r} now")
            if record.get("tenant", "") != tenant:  # never: a submit joins its own tenant's jobs
                raise DeliveryFailed("the job belongs to another tenant")
            timestamp = int(time.time())
            headers = {
                "content-type": "application/json",
                "user-agent": "docparse-webhooks",
                "webhook-id": msg_id,
                "webhook-timestamp": str(timestamp),
                "webhook-signature": sign(secret, msg_id, timestamp, body),
            }
            status = await self.egress.post(spec["url"], body, headers)
            if not 200 <= status < 300:
                raise DeliveryFailed(f"the receiver answered HTTP {status}")
        except DeliveryFailed as err:
            await self._failed(delivery, spec, attempts, str(err))
            return
        ended: list[str | int] = ["ended_ms", now_ms(), "outcome", "delivered"]

        async def done() -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hset(key, items=ended)
                pipe.zrem(outbox.due_key, delivery)
                await pipe.execute()

        await self.store.call(done)
        DELIVERIES.labels("delivered").inc()
        log.info(
            "webhook delivered: job %s, attempt %d, %.0f ms",
            job.job_id,
            attempts,
            (time.monotonic() - started) * 1000,
            extra={"event": "webhook.delivered", "job_id": job.job_id, "webhook_id": msg_id},
        )

    async def _failed(self, delivery: str, spec: dict[str, str], attempts: int, error: str) -> None:
        job_id = spec.get("job_id", "")
        if attempts >= self.settings.webhook_max_attempts:
            await self._dead(delivery, spec, error)
            DELIVERIES.labels("dead_lettered").inc()
            return
        wait_ms = self.outbox.backoff_ms(attempts)
        due = now_ms() + wait_ms
        outbox, client, key = self.outbox, self.store.client, self.outbox.key(delivery)

        async def later() -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hset(key, "last_error", error)
                pipe.zadd(outbox.due_key, {delivery: due}, xx=True)
                await pipe.execute()

        await self.store.call(later)
        DELIVERIES.labels("failed").inc()
        log.info(
            "webhook attempt %d for job %s failed (%s); next in %.1f s",
            attempts,
            job_id,
            error,
            wait_ms / 1000,
            extra={"event": "webhook.failed", "job_id": job_id},
        )

    async def _dead(self, delivery: str, spec: dict[str, str], error: str) -> None:
        outbox, client, key = self.outbox, self.store.client, self.outbox.key(delivery)
        now = now_ms()
        ended: list[str | int] = ["ended_ms", now, "outcome", "dead", "last_error", error]
        keep_ms = self.settings.tombstone_s * 1000

        async def dead() -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hset(key, items=ended)
                pipe.pexpire(key, keep_ms)
                pipe.zrem(outbox.due_key, delivery)
                pipe.zadd(outbox.dead_key, {delivery: now})
                pipe.zremrangebyscore(outbox.dead_key, "-inf", now - keep_ms)
                await pipe.execute()

        await self.store.call(dead)
        log.warning(
            "webhook for job %s dead-lettered: %s",
            spec.get("job_id", ""),
            error,
            extra={"event": "webhook.dead_lettered", "job_id": spec.get("job_id", "")},
        )
