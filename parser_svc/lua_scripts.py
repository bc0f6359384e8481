"""The Lua scripts that change job state (parser_svc/lua/), and how they are run.

Each write is one script, called with EVALSHA and falling back to EVAL when the server does not
know it (after a restart or failover). Redis scripts cannot import, so what several scripts
share lives in parser_svc/lua/lib/ and is put before a script's own source when it is loaded:
the script Redis runs (and its SHA) is the whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from parser_svc.store_errors import NotReplicated


class LuaScript:
    """A script run with EVALSHA, falling back to EVAL on NOSCRIPT. `uses` names libraries of
    lua/lib/ (without '.lua') whose source goes before the script's, in that order."""

    def __init__(self, name: str, uses: Sequence[str] = ()) -> None:
        lua = resources.files("parser_svc").joinpath("lua")
        libraries = [lua.joinpath("lib", f"{library}.lua").read_text() for library in uses]
        self.source = "".join([*libraries, lua.joinpath(name).read_text()])
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

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


CREATE_JOB = LuaScript("create_job.lua", uses=("publish", "job_index"))
CREATE_BATCH = LuaScript("create_batch.lua", uses=("job_index",))
UPDATE_JOB = LuaScript("update_job.lua", uses=("publish",))
