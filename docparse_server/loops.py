"""The event loop the servers run on: asyncio's own, or uvloop's (DOCPARSE_EVENT_LOOP,
DOCPARSE_GATEWAY_EVENT_LOOP). bench/bench_spine.py measures both against a bare grpc.aio
server in the same run (bench/README.md); the settings' default is what it found faster."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")
EventLoop = Literal["asyncio", "uvloop"]


def loop_factory(kind: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when asked for and installed (not on Windows), else asyncio's."""
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:
            logging.getLogger(__name__).warning("uvloop is not installed: asyncio's loop runs")
            return None
        return uvloop.new_event_loop
    return None


def run(main: Coroutine[Any, Any, T], kind: EventLoop) -> T:
    """asyncio.run(main) on the chosen loop."""
    with asyncio.Runner(loop_factory=loop_factory(kind)) as runner:
        return runner.run(main)
