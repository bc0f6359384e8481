"""A benchmark's own helper processes (servers, clients it measures from outside): started as
`python -m MODULE ROLE ...`, each says READY on stdout once it is ready, and finishes when its
stdin closes."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator

from bench.harness.output import ROOT


async def start_child(module: str, *args: str) -> asyncio.subprocess.Process:
    """`module` in an internal role (args[0]), with stdin/stdout pipes; returns after it says
    READY."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(180):
            line = await proc.stdout.readline()
    except TimeoutError:
        proc.kill()
        raise
    if not line.startswith(b"READY"):
        proc.kill()
        raise RuntimeError(f"child {args[0]} did not start: {line!r}")
    return proc


async def stop_child(proc: asyncio.subprocess.Process, grace_s: float = 30.0) -> None:
    """Closing stdin tells a child to finish; it is killed if it does not."""
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
    try:
        async with asyncio.timeout(grace_s):
            await proc.wait()
    except TimeoutError:
        proc.kill()
        await proc.wait()


@contextlib.contextmanager
def stop_on_stdin_eof(event: asyncio.Event) -> Iterator[None]:
    """In a child: sets `event` when the parent closes stdin (or exits)."""
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), event.set)
    try:
        yield
    finally:
        loop.remove_reader(sys.stdin.fileno())
