"""Who is calling: API keys at the gateway, tenant identity between gateway and parser_svc.

The gateway authenticates each call with an API key (`authorization: Bearer <key>` or
`x-api-key`), looks up its tenant and limits, removes any `x-docparse-*` metadata the client
sent, and forwards the identity in metadata that parser_svc accepts only together with the
shared internal token. Keys are stored as sha256 digests, never in clear.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from docparse.reasons import ErrorReason
from docparse_server.errors import error

TENANT_KEY = "x-docparse-tenant"
LIMITS_KEY = "x-docparse-limits"
ADMIN_KEY = "x-docparse-admin"
INTERNAL_TOKEN_KEY = "x-docparse-internal-token"
RESERVED_PREFIX = "x-docparse-"
DEFAULT_TENANT = "default"


def key_digest(api_key: str) -> str:
    # surrogatepass: a header with bytes that are not UTF-8 (decoded with surrogates) is a key
    # that matches nothing, not an exception.
    return hashlib.sha256(api_key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Limits:
    """Per-tenant limits; 0 means the service-wide default applies."""

    max_upload_bytes: int = 0
    submits_per_minute: int = 0
    # Open watch streams (WatchJob, WatchBatch) per parser_svc replica, and open event streams
    # (SSE) per gateway.
    max_streams: int = 0
    # Jobs queued (waiting for a parse slot) at once; a submit over it is RATE_LIMITED.
    max_queued_jobs: int = 0
    # The tenant's share of parse slots against other tenants with queued jobs (0 = 1).
    weight: int = 0
    # Its jobs in flight (admitted to the queue, running, or waiting for a retry) at once; more
    # wait on its pending list however many slots are free (0 = no cap).
    max_running_jobs: int = 0
    # Pages (slides, sheets' pages, a TIFF's frames) a document of its may have: a job over it
    # ends FAILED DOCUMENT_TOO_LARGE naming it (0, or above the deployment's: the deployment's).
    max_pages: int = 0

    def to_header(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_mapping(cls, data: dict[str, object]) -> Limits:
        return cls(*(int(str(data.get(name, 0))) for name in _LIMIT_FIELDS))

    @classmethod
    def from_header(cls, value: str) -> Limits:
        try:
            return cls.from_mapping(json.loads(value))
        except (ValueError, TypeError, AttributeError):
            return cls()


_LIMIT_FIELDS = (
    "max_upload_bytes",
    "submits_per_minute",
    "max_streams",
    "max_queued_jobs",
    "weight",
    "max_running_jobs",
    "max_pages",
)


@dataclass(frozen=True)
class Caller:
    tenant: str = DEFAULT_TENANT
    limits: Limits = Limits()
    # The key's `admin` flag in the keys file (JSON true; anything else, or none, is false):
    # the operators' reads (GetTenantShares) are for such callers only.
    admin: bool = False


class ApiKeys:
    """API key digests → tenant and limits. Loaded from JSON:
    {"keys": [{"sha256": "<hex>", "tenant": "acme", "max_upload_bytes": 0,
               "submits_per_minute": 0, "max_streams": 0, "max_queued_jobs": 0,
               "weight": 1, "max_running_jobs": 0, "max_pages": 0, "admin": false}, ...]}"""

    def __len__(self) -> int:
        return len(self._by_digest)

    def __init__(self, entries: Iterable[dict[str, object]]) -> None:
        self._by_digest: dict[str, Caller] = {}
        for entry in entries:
            limits = Limits.from_mapping(entry)
            caller = Caller(str(entry["tenant"]), limits, entry.get("admin") is True)
            self._by_digest[str(entry["sha256"]).lower()] = caller

    @classmethod
    def load(cls, inline_json: str, path: Path | None) -> ApiKeys:
        text = path.read_text() if path else (inline_json or '{"keys": []}')
        return cls(json.loads(text).get("keys", []))

    def tenants(self) -> dict[str, Limits]:
        """Each configured tenant's limits (of its keys, the largest of each limit)."""
        merged: dict[str, Limits] = {}
        for caller in self._by_digest.values():
            seen = merged.get(caller.tenant)
            limits = caller.limits
            if seen is not None:
                limits = Limits(
                    *(
                        max(a, b)
                        for a, b in zip(asdict(seen).values(), asdict(limits).values(), strict=True)
                    )
                )
            merged[caller.tenant] = limits
        return merged

    def identify(self, metadata: Iterable[tuple[str, str | bytes]]) -> Caller:
        presented = ""
        for key, value in metadata:
            text = value.decode() if isinstance(value, bytes) else value
            if key == "authorization" and text.lower().startswith("bearer "):
                presented = text[7:].strip()
            elif key == "x-api-key":
                presented = text.strip()
        if not presented:
            raise error(
                ErrorReason.API_KEY_MISSING, "send an API key: `authorization: Bearer <key>`"
            )
        digest = key_digest(presented)
        for known, caller in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return caller
        raise error(ErrorReason.API_KEY_INVALID, "the API key is not known")


def identity_metadata(caller: Caller, internal_token: str) -> list[tuple[str, str]]:
    """What the gateway adds for parser_svc."""
    out = [(TENANT_KEY, caller.tenant), (LIMITS_KEY, caller.limits.to_header())]
    if caller.admin:
        out.append((ADMIN_KEY, "true"))
    if internal_token:
        out.append((INTERNAL_TOKEN_KEY, internal_token))
    return out


def caller_from_metadata(
    metadata: Iterable[tuple[str, str | bytes]], internal_token: str
) -> Caller:
    """parser_svc's side: trust the forwarded identity only with the right internal token.
    Without a configured token (dev mode) every call is the default tenant."""
    values = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in metadata}
    if not internal_token:
        return Caller()
    presented = values.get(INTERNAL_TOKEN_KEY, "")
    if not presented or not hmac.compare_digest(presented, internal_token):
        raise error(
            ErrorReason.INTERNAL_TOKEN_INVALID,
            "parser_svc accepts calls from the gateway or with the internal token only",
        )
    return Caller(
        values.get(TENANT_KEY) or DEFAULT_TENANT,
        Limits.from_header(values.get(LIMITS_KEY, "")),
        values.get(ADMIN_KEY) == "true",
    )


class StreamSlots:
    """Open streams per tenant in this process, at most the caller's own limit (`per_key`: an
    API key's `max_streams`; else `default`; 0 = unlimited). A stream over the limit is refused
    before it costs anything: RESOURCE_EXHAUSTED `reason` (TOO_MANY_STREAMS unless told) with
    the limit. Holds one counter per tenant that has a stream open, nothing else."""

    def __init__(
        self,
        default: int,
        what: str,
        reason: ErrorReason = ErrorReason.TOO_MANY_STREAMS,
        per_key: Callable[[Limits], int] = lambda limits: limits.max_streams,
    ) -> None:
        self.default = default
        self.what = what
        self.reason = reason
        self.per_key = per_key
        self._open: dict[str, int] = {}

    def open(self, tenant: str) -> int:
        return self._open.get(tenant, 0)

    @contextlib.contextmanager
    def slot(self, caller: Caller) -> Iterator[None]:
        limit = self.per_key(caller.limits) or self.default
        held = self._open.get(caller.tenant, 0)
        if limit > 0 and held >= limit:
            raise error(
                self.reason,
                f"this tenant already has {held} open {self.what}, its limit; close one "
                "(or wait for one to end) and retry",
                {"limit": str(limit), "retry_after_s": "1"},
            )
        self._open[caller.tenant] = held + 1
        try:
            yield
        finally:
            left = self._open[caller.tenant] - 1
            if left:
                self._open[caller.tenant] = left
            else:
                del self._open[caller.tenant]
