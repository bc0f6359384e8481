"""Local stacks (embedded Redis, parser_svc replicas, gateways on 127.0.0.1) for a benchmark:
all under the environment name `bench`, started together and always stopped."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

from docparse.local.stack import LocalStack

ENV_NAME = "bench"


def bench_stack(
    folder: Path,
    *,
    replicas: int,
    extra_env: dict[str, str] | None = None,
    redis_url: str | None = None,
) -> LocalStack:
    """A stack with `replicas` parser_svc replicas and one gateway (on its own embedded Redis
    unless `redis_url`); not started yet."""
    return LocalStack(
        folder,
        replicas=replicas,
        gateways=1,
        env=ENV_NAME,
        extra_env=extra_env,
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
