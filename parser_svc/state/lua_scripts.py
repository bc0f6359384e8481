"""The Lua scripts that change job state (parser_svc/state/lua/), how they are run, and what their
replies mean (CreateResult, WriteResult).

Each write is one script, called with EVALSHA and falling back to EVAL when the server does not
know it (after a restart or failover). Redis scripts cannot import, so what several scripts
share lives in parser_svc/state/lua/lib/ and is put before a script's own source when it is loaded:
the script Redis runs (and its SHA) is the whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from docparse.v1 import job_pb2
from parser_svc.state.records import record_to_job
from parser_svc.state.redis_cluster import run_on_slot_owner
from parser_svc.state.store_errors import NotReplicated

WriteStatus = Literal["OK", "DONE", "NOOP", "NOT_FOUND", "TERMINAL", "FENCED", "BAD_PATCH"]


class LuaScript:
    """A script run with EVALSHA, falling back to EVAL on NOSCRIPT. `uses` names libraries of
    lua/lib/ (without '.lua') whose source goes before the script's, in that order. A script
    that uses 'publish' is assembled twice, each led by the library that names its publish
    command: lib/publish_plain.lua (PUBLISH) for one Redis, lib/publish_sharded.lua (SPUBLISH:
    records stay on their shard, sharded_pubsub.py) for Redis Cluster."""

    def __init__(self, name: str, uses: Sequence[str] = ()) -> None:
        lua = resources.files("parser_svc.state").joinpath("lua")

        def assemble(publish: str) -> str:
            first = [f"publish_{publish}"] if "publish" in uses else []
            libraries = [lua.joinpath("lib", f"{lib}.lua").read_text() for lib in [*first, *uses]]
            return "".join([*libraries, lua.joinpath(name).read_text()])

        self.source = assemble("plain")
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()
        self.sharded_source = assemble("sharded")
        self.sharded_sha = hashlib.sha1(self.sharded_source.encode()).hexdigest()

    async def __call__(
        self,
        client: aioredis.Redis,
        keys: list[str],
        args: list[str | bytes | int],
        *,
        replicas: int = 0,
        wait_ms: int = 0,
    ) -> list[bytes | int]:
        """The script's reply. With `replicas`, the script and a WAIT go on one connection
        (a pipeline): the reply is returned once that many replicas have the write, else
        NotReplicated (the primary has it; a failover now could lose it)."""
        if isinstance(client, RedisCluster):  # to its slot's primary: redis_cluster.py
            script = (self.sharded_sha, self.sharded_source)
            reply, acked = await run_on_slot_owner(client, script, keys, args, replicas, wait_ms)
            if acked < replicas:
                raise NotReplicated(acked, replicas)
            return reply
        if not replicas:
            try:
                reply = await client.evalsha(self.sha, len(keys), *keys, *args)
            except NoScriptError:
                reply = await client.eval(self.source, len(keys), *keys, *args)
            return list(reply)
        for use_source in (False, True):
            async with client.pipeline(transaction=False) as pipe:
                if use_source:
                    pipe.eval(self.source, len(keys), *keys, *args)
                else:
                    pipe.evalsha(self.sha, len(keys), *keys, *args)
                pipe.execute_command("WAIT", replicas, wait_ms)
                reply, acked = await pipe.execute(raise_on_error=False)
            if isinstance(reply, NoScriptError):
                continue
            if isinstance(reply, Exception):
                raise reply
            if int(acked) < replicas:
                raise NotReplicated(int(acked), replicas)
            return list(reply)
        raise NoScriptError("the script could not be loaded")


CREATE_JOB = LuaScript("create_job.lua", uses=("keys", "tags", "publish", "job_index"))
CREATE_BATCH = LuaScript("create_batch.lua", uses=("keys", "tags", "job_index"))
INDEX_JOBS = LuaScript("index_jobs.lua", uses=("tags", "job_index"))
UPDATE_JOB = LuaScript("update_job.lua", uses=("keys", "publish"))
LEASE = LuaScript("lease.lua")
ADD_DELIVERY = LuaScript("add_delivery.lua")
FAIR_ADMIT = LuaScript("fair_admit.lua")
FAIR_SHARES = LuaScript("fair_shares.lua")


@dataclass(frozen=True)
class CreateResult:
    """What create_job.lua and create_batch.lua answer."""

    status: Literal["OK", "REPLAY", "CONFLICT", "JOINED", "EXISTS"]
    job_id: str
    # This call's own create took effect: OK, or a re-run (after a lost reply) that found the
    # job this very call made. The caller then goes on as if it had seen OK.
    created: bool = False
    # A create that is in now (OK) answers with the record it made: no second read.
    record: job_pb2.Job | None = None

    @staticmethod
    def of(reply: list[Any], created_id: str) -> CreateResult:
        """The reply {status, id[, record]} of a create that made (or would have made)
        `created_id`."""
        status, other = _text(reply[0]), _text(reply[1])
        return CreateResult(
            status,  # type: ignore[arg-type]
            other,
            created=other == created_id,
            record=_record(reply),
        )


@dataclass(frozen=True)
class WriteResult:
    """What update_job.lua answers."""

    status: WriteStatus
    version: int
    # A claim that is in (OK or DONE) answers with the record it made: no second read.
    record: job_pb2.Job | None = None
    # A progress write's answer: a reader asks for the job's pages while it runs (the record's
    # mark, lua/want_drafts.lua).
    drafts: bool = False

    @property
    def ok(self) -> bool:
        """The write is in: it took effect now (OK), or it had already taken effect and this
        was a re-run after its reply was lost (DONE)."""
        return self.status in ("OK", "DONE")

    @staticmethod
    def of(reply: list[Any]) -> WriteResult:
        """The reply {status, version[, record as a flat field/value list]}."""
        status: WriteStatus = _text(reply[0])  # type: ignore[assignment]
        drafts = len(reply) > 2 and not isinstance(reply[2], list) and _text(reply[2]) == "1"
        return WriteResult(status, int(reply[1]), _record(reply), drafts)


def _record(reply: list[Any]) -> job_pb2.Job | None:
    """The record a script's reply carries third (a flat field/value list), if it does."""
    if len(reply) > 2 and isinstance(reply[2], list):
        flat = [_text(item) for item in reply[2]]
        return record_to_job(dict(zip(flat[::2], flat[1::2], strict=True)))
    return None


def _text(value: bytes | int) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
