"""Local stacks (embedded Redis, parser_svc replicas, gateways on 127.0.0.1) for a benchmark:
all under the environment name `bench`, started together and always stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

from docparse.local.stack import LocalStack
from docparse_server.tenancy import Caller, identity_metadata, key_digest

ENV_NAME = "bench"
# With `auth`: the one API key the benchmark's clients send (to the gateway) and the internal
# token the gateway and parser_svc share, as in production (the key's tenant has no limits of
# its own: the service-wide defaults apply).
API_KEY = "bench-api-key"
TENANT = "bench"
INTERNAL_TOKEN = "bench-internal-token"
KEY_METADATA = (("authorization", f"Bearer {API_KEY}"),)
# What a client calling parser_svc directly sends instead: what the gateway adds for the key
# (its tenant, its limits and the internal token).
TOKEN_METADATA = tuple(identity_metadata(Caller(TENANT), INTERNAL_TOKEN))


def auth_env() -> dict[str, str]:
    """Keys required at the gateway, and the token parser_svc trusts the gateway by."""
    keys = {"keys": [{"sha256": key_digest(API_KEY), "tenant": TENANT}]}
    return {
        "DOCPARSE_GATEWAY_AUTH": "required",
        "DOCPARSE_GATEWAY_API_KEYS": json.dumps(keys),
        "DOCPARSE_GATEWAY_INTERNAL_TOKEN": INTERNAL_TOKEN,
        "DOCPARSE_INTERNAL_TOKEN": INTERNAL_TOKEN,
    }


def bench_stack(
    folder: Path,
    *,
    replicas: int,
    extra_env: dict[str, str] | None = None,
    redis_url: str | None = None,
    auth: bool = False,
) -> LocalStack:
    """A stack with `replicas` parser_svc replicas and one gateway (on its own embedded Redis
    unless `redis_url`); not started yet. `auth`: API keys and the internal token as in
    production (`auth_env`): clients send KEY_METADATA (the SDK: `api_key=API_KEY`)."""
    return LocalStack(
        folder,
        replicas=replicas,
        gateways=1,
        env=ENV_NAME,
        extra_env={**(auth_env() if auth else {}), **(extra_env or {})},
        redis_url=redis_url,
    )


@contextlib.contextmanager
def running(stacks: Iterable[LocalStack]) -> Iterator[None]:
    """Starts the stacks one after the other; stops every one of them on the way out."""
    stacks = list(stacks)
    try:
        for stack in stacks:
            stack.start()
        yield
    finally:
        for stack in stacks:
            stack.stop()


@contextlib.asynccontextmanager
async def running_async(stacks: Iterable[LocalStack]) -> AsyncIterator[None]:
    """`running` for an event loop: starting and stopping run in a thread."""
    stacks = list(stacks)
    try:
        for stack in stacks:
            await asyncio.to_thread(stack.start)
        yield
    finally:
        for stack in stacks:
            await asyncio.to_thread(stack.stop)
