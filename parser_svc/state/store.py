"""JobStore: every read and write of job state, against Redis.

Writes go through one Lua script each (lua/, run by parser_svc/state/lua_scripts.py). Every call is
bounded by `redis_timeout_s`; a Redis that does not answer becomes STATE_STORE_UNAVAILABLE, never
NOT_FOUND (parser_svc/state/store_errors.py maps the errors).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError

from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2
from docparse_server.errors import error, not_found, store_unavailable
from docparse_server.tenancy import DEFAULT_TENANT
from parser_svc import observability
from parser_svc.settings import Settings
from parser_svc.state.batch_store import BatchRecords
from parser_svc.state.caller_scope import current_tenant
from parser_svc.state.keys import Keys, batch_id_of
from parser_svc.state.lifetimes import Lifetimes, now_ms
from parser_svc.state.lua_scripts import (
    CREATE_JOB,
    INDEX_JOBS,
    LEASE,
    UPDATE_JOB,
    CreateResult,
    WriteResult,
)
from parser_svc.state.pipelined_reads import PipelinedReader
from parser_svc.state.records import decode_hash, record_to_job
from parser_svc.state.redis_conn import RedisTarget
from parser_svc.state.store_errors import (
    UNAVAILABLE_ERRORS,
    is_unavailable,
    store_error,
    unavailable_detail,
)
from parser_svc.state.submit_records import SubmitRecords

log = logging.getLogger(__name__)
T = TypeVar("T")


def connect(settings: Settings, *, decode_responses: bool = False) -> aioredis.Redis:
    """A client whose calls fail fast instead of hanging when Redis is away. One immediate
    retry on a broken connection replaces pooled connections that died with a Redis restart;
    a Redis that is really down still fails at once (connection refused). Any URL of
    parser_svc/state/redis_conn.py (TLS, ACL user, Sentinel). At most `redis_max_connections`
    connections: a call beyond them waits for one (as long as a slow Redis may take)."""
    return RedisTarget.of(settings).client(
        max_connections=settings.redis_max_connections,
        pool_timeout_s=settings.redis_timeout_s,
        decode_responses=decode_responses,
        socket_timeout=settings.redis_timeout_s,
        socket_connect_timeout=settings.redis_timeout_s,
        retry=Retry(NoBackoff(), 1),
        retry_on_error=[RedisConnectionError],
        health_check_interval=10,
    )


_ENDING_OPS = frozenset({"finish", "cancel", "give_up"})


class JobStore(BatchRecords, SubmitRecords):
    def __init__(
        self,
        client: aioredis.Redis,
        settings: Settings,
        reads: PipelinedReader | None = None,
    ) -> None:
        """`reads`: where a job's record is read (parser_svc/state/pipelined_reads.py); its owner
        closes it, as the client's does. None: through `client`."""
        self._redis = client
        self.settings = settings
        self._reads = reads
        self.keys = Keys.of(settings)
        self.ttl = Lifetimes.of(settings)
        # Creates and terminal writes wait for this many replicas (0: the primary's word).
        self._durable = {
            "replicas": settings.redis_min_replicas_ack,
            "wait_ms": settings.redis_replica_wait_ms,
        }

    @classmethod
    def open(cls, settings: Settings, reads: PipelinedReader | None = None) -> JobStore:
        """A store on a connection of its own (`connect`), which `aclose` closes."""
        return cls(connect(settings), settings, reads)

    async def aclose(self) -> None:
        """Closes the store's connection (not `reads`: its owner closes it)."""
        await self._redis.aclose()

    async def call(self, fn: Callable[[], Awaitable[T]], *, timed: bool = True) -> T:
        """Runs `fn` against Redis with the store's deadline and error mapping. `timed` False:
        `fn` keeps the same deadline itself (the pipelined reader: one timer per connection
        instead of one per call)."""
        try:
            if not timed:
                return await fn()
            async with asyncio.timeout(self.settings.redis_timeout_s):
                return await fn()
        except (*UNAVAILABLE_ERRORS, RedisClusterException, RuntimeError, AttributeError) as err:
            if isinstance(err, RuntimeError | AttributeError) and not is_unavailable(err):
                raise  # a mistake of ours, not Redis
            observability.redis_error(err)
            if isinstance(err, RedisClusterException) and not is_unavailable(err):
                log.warning("state store error: %s", err, extra={"event": "redis.error"})
                raise store_error(err) from err
            log.info("state store unavailable: %r", err, extra={"event": "redis.unavailable"})
            raise store_unavailable(unavailable_detail(err)) from err
        except RedisError as err:
            observability.redis_error(err)
            log.warning("state store error: %s", err, extra={"event": "redis.error"})
            raise store_error(err) from err

    async def hold_lease(self, lease: str, owner: str, ttl_ms: int) -> bool:
        """Renews `lease` if `owner` holds it, takes it if nobody does: True when `owner` holds
        it now (lua/lease.lua). A lost reply is harmless: a retry by the holder renews it."""
        reply = await self.call(lambda: LEASE(self._redis, [lease], [owner, ttl_ms]))
        return bool(reply[0])

    async def ping(self) -> bool:
        return bool(await self.call(self._redis.ping))

    async def create(
        self,
        job_id: str,
        fields: dict[str, str],
        *,
        request_key: str = "",
        dedupe_key: str = "",
        fingerprint: str = "",
    ) -> CreateResult:
        """Creates the job, or answers with the job an earlier request already made:
        REPLAY (same request key, same content), CONFLICT (same request key, other content),
        JOINED (the same upload is still queued or running). `created` is set when the job
        `job_id` exists because of this call, also when a retry of the script (its first reply
        was lost) answers REPLAY, JOINED or EXISTS with that very id. `fingerprint` is what a
        reuse of the request key must match (default: the content's sha256; api/submit.py adds
        the job's options)."""
        ttl = self.ttl
        args: list[str | bytes | int] = [
            self.keys.job_channel(job_id),
            now_ms(),
            ttl.queued_ms,
            ttl.tombstone_ms,
            ttl.request_ms,
            fingerprint or fields.get("content_sha256", ""),
            self.keys.job_key_prefix,
            job_id,
            ttl.listed_ms,
        ]
        for name, value in {"job_id": job_id, **fields}.items():
            args += [name, value]
        index = self.keys.tenant_jobs(fields.get("tenant") or DEFAULT_TENANT)
        keys = [
            self.keys.job(job_id),
            self.keys.tombstone(job_id),
            request_key,
            dedupe_key,
            self.keys.pending(job_id),
            "" if self.keys.cells else index,
        ]
        reply = await self.call(lambda: CREATE_JOB(self._redis, keys, args, **self._durable))
        result = CreateResult.of(reply, job_id)
        if self.keys.cells and result.created:
            await self.list_new(index, [(job_id, int(args[1]))])
        return result

    async def list_new(self, index: str, entries: Sequence[tuple[str, int]]) -> None:
        """On Redis Cluster, lists just-created jobs (id, create time in ms) in their tenant's
        index (ListJobs), which is in another slot than they are: a step after the create,
        repeated by the sweeper for every job still pending (a caller that died between)."""
        args: list[str | bytes | int] = [now_ms(), self.ttl.listed_ms]
        for job_id, create_ms in entries:
            args += [job_id, create_ms]
        await self.call(lambda: INDEX_JOBS(self._redis, [index], args))

    async def get(self, job_id: str) -> job_pb2.Job:
        """The current record as a Job; NOT_FOUND with JOB_EXPIRED when only the tombstone is
        left. Within a call, another tenant's job answers exactly like one that never existed."""
        return record_to_job(decode_hash(await self.get_record(job_id)))

    async def get_record(self, job_id: str) -> dict[bytes, bytes]:
        """The current record as Redis holds it (field -> value, bytes), with `get`'s answers
        when there is none or it is another tenant's."""
        tenant = current_tenant()

        async def read() -> tuple[dict[bytes, bytes], bytes | None]:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hgetall(self.keys.job(job_id))
                pipe.get(self.keys.tombstone(job_id))
                raw, tomb = await pipe.execute()
            return raw, tomb

        async def read_record() -> dict[bytes, bytes]:
            if self._reads is not None:
                return await self._reads.hgetall(self.keys.job(job_id))
            record = await self._redis.hgetall(self.keys.job(job_id))
            return record  # type: ignore[return-value]  # bytes: decode_responses is off

        # Hot path: one HGETALL (about 30 us less CPU per call than the MULTI/EXEC pipeline,
        # see bench/README.md). Only when the record is missing are record and tombstone read
        # together, atomically, so a concurrent create never reads as JOB_EXPIRED.
        raw, tomb = await self.call(read_record, timed=self._reads is None), None
        if not raw:
            raw, tomb = await self.call(read)
        if raw:
            stored = raw.get(b"tenant")
            owner_tenant = DEFAULT_TENANT if stored is None else stored.decode()
            if tenant is not None and owner_tenant != tenant:
                # The same second read an unknown id costs: how long the answer takes must not
                # tell another tenant's job from one that never existed.
                await self.call(read)
                raise not_found(job_id)
            return raw
        if tomb is not None:
            expiry, _, owner = tomb.decode().partition(":")
            if tenant is not None and (owner or DEFAULT_TENANT) != tenant:
                raise not_found(job_id)
            expired_ms = int(expiry)
            raise error(
                ErrorReason.JOB_EXPIRED,
                f"job {job_id} expired: its retention ended at "
                f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(expired_ms / 1000))}",
                {"job_id": job_id, "expire_time_ms": str(expired_ms)},
            )
        raise not_found(job_id)

    async def get_inline_result(self, job_id: str) -> bytes | None:
        value = await self.call(lambda: self._redis.get(self.keys.result(job_id)))
        return value.encode() if isinstance(value, str) else value

    async def job_fields(self, job_id: str, names: Sequence[str]) -> dict[str, str]:
        """The named fields the job's record has (one HMGET); a missing one is left out."""
        return await self._fields(self.keys.job(job_id), names)

    async def _fields(self, key: str, names: Sequence[str]) -> dict[str, str]:
        values = await self.call(lambda: self._redis.hmget(key, list(names)))
        pairs = zip(names, values, strict=True)
        return {k: v.decode() if isinstance(v, bytes) else v for k, v in pairs if v is not None}

    async def _update(
        self,
        job_id: str,
        op: str,
        fence: str,
        patch: dict[str, str | int],
        inline: bytes = b"",
        lock_key: str = "",
        publishing: Literal["", "quiet", "announce"] = "",
    ) -> WriteResult:
        ttl = self.ttl
        batch_id = batch_id_of(job_id)
        batch_meta = self.keys.batch_of(job_id)
        keys = [
            self.keys.job(job_id),
            self.keys.tombstone(job_id),
            self.keys.result(job_id),
            batch_meta,
            lock_key,
        ]
        args: list[str | bytes | int] = [
            op,
            fence,
            now_ms(),
            self.keys.job_channel(job_id),
            ttl.running_ms,
            ttl.retention_ms,
            ttl.tombstone_ms,
            json.dumps(patch),
            inline,
            self.keys.batch_channel(batch_id) if batch_id else "",
            ttl.queued_ms,
            self.keys.batch_files(batch_id) if batch_id else "",
            self.keys.retained(job_id),
            publishing,
        ]
        if lock_key and self.keys.cells:
            # On Redis Cluster BullMQ's lock is in the queue's slot, not the job's: checked
            # just before the script instead of inside it. A lock lost in between lets a stale
            # worker claim; the fence still lets only the newest claimant write, so the job
            # still ends once (docs/scaling.md).
            held = await self.call(lambda: self._redis.get(lock_key))
            token = str(patch.get("lock_token", ""))
            if (held.decode() if isinstance(held, bytes) else held) != token:
                return WriteResult("FENCED", 0)
            keys[4] = ""
        durable = self._durable if op in _ENDING_OPS else {}
        reply = await self.call(lambda: UPDATE_JOB(self._redis, keys, args, **durable))
        return WriteResult.of(reply)

    async def claim(
        self,
        job_id: str,
        fence: str,
        *,
        lock_key: str = "",
        lock_token: str = "",
        quiet: bool = False,
    ) -> WriteResult:
        """A worker takes the job: RUNNING, attempt + 1, and `fence` becomes the only token
        whose writes are accepted. With `lock_key`, only the holder of that queue lock
        (value `lock_token`) may claim. The result carries the claimed record. `quiet`: the
        record changes but nothing is published; the claimer's next write must then be a
        `progress(..., announce=True)` or a terminal write, which publish it."""
        patch: dict[str, str | int] = {"stage": "opening", "lock_token": lock_token}
        return await self._update(
            job_id, "claim", fence, patch, lock_key=lock_key, publishing="quiet" if quiet else ""
        )

    async def give_up(
        self, job_id: str, fence: str, reason: str, message: str, *, lock_key: str, lock_token: str
    ) -> WriteResult:
        """The queue will not run the job again: end it FAILED unless it already ended. Only
        the holder of the queue lock may; a re-run answers DONE."""
        patch: dict[str, str | int] = {
            "err_reason": reason,
            "err_message": message,
            "lock_token": lock_token,
        }
        return await self._update(job_id, "give_up", fence, patch, lock_key=lock_key)

    async def release(self, job_id: str, fence: str) -> WriteResult:
        """The owner gives the job back for another attempt (QUEUED, stage 'retrying')."""
        return await self._update(job_id, "release", fence, {})

    async def cancel(self, job_id: str, message: str = "cancelled by request") -> WriteResult:
        """Ends a job that has not ended; its worker's next write is refused, so it stops."""
        return await self._update(job_id, "cancel", "", {"err_message": message})

    async def progress(
        self,
        job_id: str,
        fence: str,
        *,
        done: int,
        total: int,
        stage: str,
        announce: bool = False,
        ready: str = "",
    ) -> WriteResult:
        """Merges progress (never backwards; an empty `stage` leaves the stage as it is) and
        the pages readers can have (`ready`, a page selection; "" leaves it as it is).
        `announce`: publish the record even when this write changes nothing (the first write
        after a quiet claim)."""
        patch: dict[str, str | int] = {"done": done, "total": total}
        if stage:
            patch["stage"] = stage
        if ready:
            patch["ready"] = ready
        return await self._update(
            job_id, "progress", fence, patch, publishing="announce" if announce else ""
        )

    async def finish(
        self,
        job_id: str,
        fence: str,
        state: Literal["SUCCEEDED", "FAILED", "CANCELLED"],
        fields: dict[str, str | int],
        inline: bytes = b"",
    ) -> WriteResult:
        """The terminal write. `fields` holds err_* (FAILED) or res_* (SUCCEEDED) values, and
        may carry the last `done` and `total` (merged like a progress write, never backwards),
        so a job's last progress needs no write of its own."""
        return await self._update(job_id, "finish", fence, {"state": state, **fields}, inline)
