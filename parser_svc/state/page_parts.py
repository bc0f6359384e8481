"""Pointers to a job's page parts, written while the job runs (lua/put_page_part.lua).

A page part (one page of the reading package and the records of its assets, serialized) is
stored in the blob store (parser_svc/work/blobs.py: a batch to a pack, found by the part's ref,
'<sha256>/<pack>/<offset>/<length>'), then pointed at here: one hash per job, beside its record,
field '<page>' = '<seq>:<attempt>:<kind>:<ref>'. Any
replica reads the pointers and the blobs, so any replica serves the pages of a job another one
parses.

A part is a `draft` (the page as read, before the passes that need every page: headings,
furniture, tables continued on the next page) or `final` (byte for byte the page of the
package the job ends with). A page's pointer goes from draft to final once and never back; a
final never changes, but for a retried attempt that reads the page otherwise, and then the
page is listed with the final it replaces (`PagePointer.replaces`).

`seq` orders the pointers: each new or moved pointer takes the next number, so a stream of the
job's pages resumes after the last `seq` it sent (`ready(after_seq=...)`): a page whose
pointer moved comes again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

from parser_svc.state.lua_scripts import LuaScript
from parser_svc.state.store import JobStore

PUT_PAGE_PART = LuaScript("put_page_part.lua", uses=("publish",))
WANT_DRAFTS = LuaScript("want_drafts.lua")

PartKind = Literal["draft", "final"]
PutStatus = Literal["OK", "SAME", "KEPT", "REPLACED", "NOT_FOUND", "TERMINAL", "FENCED"]
WantStatus = Literal["SET", "MARKED", "ENDED", "NOT_FOUND"]


@dataclass(frozen=True)
class PagePointer:
    """Where page `page` (1-based, as in the package) of a job is stored: the part written by
    `attempt`, found by `ref` in the blob store; `replaces` is the sha256 of the page's first
    final when a later attempt's final differs, else ''."""

    page: int
    seq: int
    attempt: int
    kind: PartKind
    ref: str
    replaces: str = ""

    @property
    def sha256(self) -> str:
        """The sha256 of the part's bytes."""
        return _sha256(self.ref)


@dataclass(frozen=True)
class PutResult:
    status: PutStatus
    seq: int

    @property
    def ok(self) -> bool:
        """The write was taken (a new, unchanged or moved pointer, or a draft after the final)."""
        return self.status in ("OK", "SAME", "KEPT", "REPLACED")


def _sha256(ref: str) -> str:
    """The sha256 a part's ref begins with (its bytes')."""
    return ref.split("/", 1)[0]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _pointer(page: int, value: str, replaced: str) -> PagePointer:
    seq, attempt, kind, ref = value.split(":", 3)
    replaces = _sha256(replaced.split(":", 3)[3]) if replaced else ""
    return PagePointer(page, int(seq), int(attempt), cast(PartKind, kind), ref, replaces)


class PageParts:
    """The page pointers of jobs, through the store's connection, deadline and error mapping."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.keys = store.keys

    async def put(
        self, job_id: str, fence: str, attempt: int, page: int, ref: str, kind: PartKind
    ) -> PutResult:
        """Points `page` at the part `ref` names (stored before this call), if `fence` still
        owns the running job."""
        return (await self.put_many(job_id, fence, attempt, [(page, ref)], kind))[0]

    async def put_many(
        self,
        job_id: str,
        fence: str,
        attempt: int,
        parts: list[tuple[int, str]],
        kind: PartKind,
    ) -> list[PutResult]:
        """`put` for each (page, ref) of `parts`, in one step (one script, one wake of the
        job's streams): a result per part, or one for all when the job is not `fence`'s to
        write (NOT_FOUND, TERMINAL, FENCED)."""
        keys = [self.keys.job(job_id), self.keys.page_parts(job_id), self.keys.page_log(job_id)]
        extra_ms = self.store.settings.retention_s * 1000
        channel = self.keys.page_channel(job_id)
        pages = ",".join(str(page) for page, _ in parts)
        refs = ",".join(ref for _, ref in parts)
        args: list[str | bytes | int] = [fence, attempt, pages, refs, kind, extra_ms, channel]
        reply = await self.store.call(lambda: PUT_PAGE_PART(self.store._redis, keys, args))
        results = [
            PutResult(cast(PutStatus, _text(reply[i])), int(reply[i + 1]))
            for i in range(0, len(reply), 2)
        ]
        return results if len(results) == len(parts) else results[:1] * len(parts)

    async def want(self, job_id: str) -> WantStatus:
        """A reader asks for the job's pages while it runs: its parse drafts them from now on
        (lua/want_drafts.lua). SET: this call marked it (the pages read so far come first)."""
        keys = [self.keys.job(job_id)]
        reply = await self.store.call(lambda: WANT_DRAFTS(self.store._redis, keys, []))
        return cast(WantStatus, _text(reply[0]))

    async def wanted(self, job_id: str) -> bool:
        """Whether a reader asked for the job's pages (the worker's look when a parse begins)."""
        key = self.keys.job(job_id)
        return _text(await self.store.call(lambda: self.store._redis.hget(key, "drafts"))) == "1"

    async def ready(self, job_id: str, after_seq: int = 0) -> list[PagePointer]:
        """The job's page pointers written after `after_seq`, in the order they were written
        (a moved pointer comes again, with what it replaces)."""
        key = self.keys.page_parts(job_id)
        raw = await self.store.call(lambda: self.store._redis.hgetall(key))
        fields = {_text(k): _text(v) for k, v in raw.items()}
        pointers = [
            _pointer(int(name), value, fields.get(f"r:{name}", ""))
            for name, value in fields.items()
            if name.isdigit()
        ]
        return sorted((p for p in pointers if p.seq > after_seq), key=lambda p: p.seq)

    async def moves(self, job_id: str, after_seq: int = 0) -> list[PagePointer]:
        """What `ready(after_seq)` answers, read from the list of moves: only the entries after
        `after_seq` travel (a stream's wake per page costs that page, not the whole hash);
        a page moved more than once since then comes once, as its last move."""
        key = self.keys.page_log(job_id)
        raw = await self.store.call(lambda: self.store._redis.lrange(key, after_seq, -1))
        last: dict[int, PagePointer] = {}
        for entry in raw:
            page, seq, attempt, kind, ref, replaces = _text(entry).split(":")
            pointer = PagePointer(
                int(page), int(seq), int(attempt), cast(PartKind, kind), ref, replaces
            )
            last[pointer.page] = pointer
        return sorted(last.values(), key=lambda p: p.seq)
