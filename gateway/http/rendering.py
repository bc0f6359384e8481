"""Rendering results off the gateway's event loop.

JSON (and text, Markdown) of a big reading package is seconds of pure-Python CPU: a 1M-cell
workbook is 45 MB of JSON. On the loop, or in a thread holding the GIL, every other call
through the gateway waited for it. Rendering runs in worker processes (spawned, so nothing of
gRPC's threads is forked), at most `http_render_workers` at once; the loop only hands over the
verified bytes and streams the answer back in chunks.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import grpc

from docparse.errors import DocparseError
from docparse.render import render

log = logging.getLogger(__name__)


class Renderer:
    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn")
            )
        return self._pool

    async def render(self, data: bytes, fmt: str) -> bytes:
        """`data` (a serialized ReadingPackage) as `fmt`; UNAVAILABLE RENDER_FAILED when the
        worker process died (it is replaced for the next request)."""
        pool = self._executor()
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, render, data, fmt)
        except BrokenProcessPool as err:
            log.warning("result render worker died; starting a new one", extra={"event": "render"})
            if self._pool is pool:
                self._pool = None
                pool.shutdown(wait=False, cancel_futures=True)
            raise DocparseError(
                grpc.StatusCode.UNAVAILABLE,
                "RENDER_FAILED",
                "the gateway could not render the result; retry, or ask for format=proto",
            ) from err

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
