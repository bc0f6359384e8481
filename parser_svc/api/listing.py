"""ListJobs: a tenant's jobs, newest first, in pages (AIP-158).

The create scripts add every job (batch files too) to the tenant's index (`Keys.tenant_jobs`,
a sorted set by creation time) in the same step as its record, so a job that exists is listed.
A page is read in slices of that index (lua/list_index.lua, one key, atomic) and the records of
each slice in one pipeline; entries whose record is gone (the retention ended) are dropped from
the index on the way. The work of one call is bounded (`SCAN_BUDGET` entries): a page may come
back short, even empty, with a `next_page_token` to go on from.

Page tokens are opaque: the cursor (creation time and job id of the last entry examined), bound
to the tenant and the filters with an HMAC, so a token made for another tenant or other filters,
or altered, answers INVALID_ARGUMENT `INVALID_PAGE_TOKEN`. Every read is scoped to the caller's
tenant's own index anyway: a token can never show another tenant's jobs.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json

from docparse.proto_wire import length_delimited
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.errors import error
from docparse_server.tenancy import DEFAULT_TENANT
from parser_svc.api.batches import batch_not_found
from parser_svc.api.status_answers import JOB_FIELD, PAGE_TOKEN_FIELD, EncodedJobs
from parser_svc.settings import Settings
from parser_svc.state.store import JobStore
from parser_svc.state.tenant_index import Cursor, TenantIndex, Window, text

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
# Index entries one call examines at most (records read, filters applied).
SCAN_BUDGET = 2000
# Records read (and decoded) per pipeline: _records.
RECORDS_PER_READ = 25
# Entries read at a time when filtering by state (their states first, then matching records).
FILTERED_SLICE = 256
MAX_TOKEN_CHARS = 512
DEFAULT_TENANT_BYTES = DEFAULT_TENANT.encode()
_STATE_NAMES: dict[int, str] = {
    int(value): name.removeprefix("STATE_")
    for name, value in job_pb2.State.items()
    if value != job_pb2.STATE_UNSPECIFIED
}


class PageTokens:
    """Opaque page tokens: base64url of the cursor and a digest of the tenant and filters,
    with an HMAC under a key every replica derives alike (env and internal token)."""

    def __init__(self, settings: Settings) -> None:
        secret = f"docparse list page token\0{settings.env}\0{settings.internal_token}"
        self._key = hashlib.sha256(secret.encode()).digest()

    @staticmethod
    def scope(tenant: str, states: list[str], batch_id: str) -> str:
        text = json.dumps([tenant, sorted(states), batch_id])
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:16]

    def make(self, scope: str, cursor: Cursor) -> str:
        payload = json.dumps([1, scope, cursor.create_ms, cursor.job_id]).encode()
        return base64.urlsafe_b64encode(payload + self._mac(payload)).decode().rstrip("=")

    def read(self, token: str, scope: str) -> Cursor:
        """The cursor of `token`; INVALID_PAGE_TOKEN unless it is one this service made for
        this tenant and these filters."""
        try:
            if len(token) > MAX_TOKEN_CHARS or not token.isascii():
                raise ValueError("too long")
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            payload, mac = raw[:-16], raw[-16:]
            if len(raw) <= 16 or not hmac.compare_digest(mac, self._mac(payload)):
                raise ValueError("not ours")
            version, token_scope, create_ms, job_id = json.loads(payload)
            if version != 1 or not isinstance(create_ms, int) or not isinstance(job_id, str):
                raise ValueError("unknown shape")
        except (ValueError, TypeError, binascii.Error) as err:
            raise error(
                ErrorReason.INVALID_PAGE_TOKEN,
                "page_token is not a next_page_token of ListJobs (altered, or cut short)",
            ) from err
        if token_scope != scope:
            raise error(
                ErrorReason.INVALID_PAGE_TOKEN,
                "page_token was made for other filters (states, batch_id) or another caller: "
                "send the same filters as for the first page",
            )
        return Cursor(create_ms, job_id)


def page_size_of(requested: int) -> int:
    if requested < 0:
        raise error(
            ErrorReason.INVALID_PAGE_SIZE,
            f"page_size must not be negative: {requested}",
            {"page_size": str(requested)},
        )
    if requested == 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


class JobListing:
    def __init__(
        self, store: JobStore, settings: Settings, encoded: EncodedJobs | None = None
    ) -> None:
        self.store = store
        self.index = TenantIndex(store)
        self.tokens = PageTokens(settings)
        self.encoded = encoded or EncodedJobs()

    async def page(
        self, tenant: str, request: parser_service_pb2.ListJobsRequest
    ) -> parser_service_pb2.ListJobsResponse:
        return parser_service_pb2.ListJobsResponse.FromString(
            await self.page_encoded(tenant, request)
        )

    async def page_encoded(self, tenant: str, request: parser_service_pb2.ListJobsRequest) -> bytes:
        """The ListJobsResponse, encoded: its jobs' encodings (status_answers.EncodedJobs) put
        together, each job encoded only when its record changed since this replica last did."""
        page_size = page_size_of(request.page_size)
        states = sorted({_state_name(value) for value in request.states})
        batch_id = request.batch_id
        scope = self.tokens.scope(tenant, states, batch_id)
        cursor = self.tokens.read(request.page_token, scope) if request.page_token else None
        window = Window()
        if batch_id:
            # A batch's files share its create time: only that moment of the index is read.
            created_ms = await self._batch_created_ms(tenant, batch_id)
            window = Window(created_ms, created_ms, f"{batch_id}-")
        jobs: list[bytes] = []
        budget = SCAN_BUDGET
        ended = False
        wanted_states = set(states)
        while len(jobs) < page_size and budget > 0 and not ended:
            want = page_size - len(jobs)
            # With a state filter, entries are read in larger slices (states first, one
            # pipeline), and whole records only for those that match.
            ask = min(budget, max(want, FILTERED_SLICE)) if states else want
            found = await self.index.slice(tenant, cursor, window, ask, budget)
            entries, ended = found.entries, found.ended
            budget -= found.examined
            if found.last is None:
                break
            cursor = found.last
            if wanted_states:
                entries = await self._in_states(tenant, entries, wanted_states)
                if len(entries) > want:  # the page is full before the slice's end
                    entries = entries[:want]
                    cursor, ended = Cursor(entries[-1][1], entries[-1][0]), False
            jobs += await self._records(tenant, [job_id for job_id, _ in entries], wanted_states)
        response = b"".join(length_delimited(JOB_FIELD, job) for job in jobs)
        if not ended and cursor is not None:
            token = self.tokens.make(scope, cursor).encode()
            response += length_delimited(PAGE_TOKEN_FIELD, token)
        return response

    async def _batch_created_ms(self, tenant: str, batch_id: str) -> int:
        if not batch_id.isascii() or not batch_id.replace("_", "").isalnum() or len(batch_id) > 64:
            raise error(ErrorReason.INVALID_JOB_ID, f"not a batch id: {batch_id[:80]!r}")
        meta = await self.store.batch_fields(batch_id, ["tenant", "create_ms"])
        owner, created = meta.get("tenant"), meta.get("create_ms")
        if owner is None or owner != tenant or created is None:
            raise batch_not_found(batch_id)
        return int(created)

    async def _in_states(
        self, tenant: str, entries: list[tuple[str, int]], states: set[str]
    ) -> list[tuple[str, int]]:
        """The entries whose job is in `states` (state and tenant read in one pipeline);
        entries whose record is gone are removed from the index."""
        if not entries:
            return []
        job_ids = [job_id for job_id, _ in entries]
        found = await self.index.records(job_ids, ["state", "tenant"])
        kept: list[tuple[str, int]] = []
        gone: list[str] = []
        for entry, (state, owner) in zip(entries, found, strict=True):
            if state is None:
                gone.append(entry[0])
            elif text(state) in states and text(owner or DEFAULT_TENANT) == tenant:
                kept.append(entry)
        await self.index.forget(tenant, gone)
        return kept

    async def _records(self, tenant: str, entries: list[str], states: set[str]) -> list[bytes]:
        """The encoded jobs of `entries` in order, those in `states` (all if empty); entries
        whose record is gone are removed from the index. Read a slice at a time, so that no
        slice holds the event loop long (every other call on this replica, another tenant's
        GetStatus, waits behind it)."""
        jobs: list[bytes] = []
        gone: list[str] = []
        owner, wanted = tenant.encode(), {state.encode() for state in states}
        for start in range(0, len(entries), RECORDS_PER_READ):
            chunk = entries[start : start + RECORDS_PER_READ]
            for job_id, raw in zip(chunk, await self.index.whole_records(chunk), strict=True):
                if not raw:
                    gone.append(job_id)
                    continue
                if (raw.get(b"tenant") or DEFAULT_TENANT_BYTES) != owner:
                    continue  # never another tenant's, whatever the index says
                if wanted and raw.get(b"state", b"") not in wanted:
                    continue
                jobs.append(self.encoded.job(job_id, raw))
        await self.index.forget(tenant, gone)
        return jobs


def _state_name(value: int) -> str:
    name = _STATE_NAMES.get(value)
    if name is None:
        raise error(
            ErrorReason.INVALID_STATE,
            f"not a job state to filter by: {value} (STATE_QUEUED ... STATE_CANCELLED)",
        )
    return name
