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
import resource
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from google.protobuf.message import DecodeError

from docparse import page_ranges
from docparse.errors import DocparseError
from docparse.package_pages import cut_serialized
from docparse.reasons import ErrorReason
from docparse.render import render
from docparse_server.errors import error

log = logging.getLogger(__name__)


# The result endpoint's formats and their content types (text ones with charset=utf-8).
RESULT_FORMATS = {
    "json": "application/json",
    "text": "text/plain",
    "markdown": "text/markdown",
    "html": "text/html",
    "chunks": "application/jsonl",
    "proto": "application/x-protobuf",
}
# format=html: the images beside it (its assets) load; nothing else, no script.
HTML_RESULT_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"
FLAGS = {"": False, "false": False, "0": False, "true": True, "1": True}


def result_format(query: Mapping[str, str]) -> tuple[str, bool]:
    """The `format` (json by default) and `furniture` (false by default) a result request asks
    for; INVALID_ARGUMENT INVALID_FORMAT for any other value."""
    fmt = query.get("format", "json")
    if fmt not in RESULT_FORMATS:
        raise error(
            ErrorReason.INVALID_FORMAT, f"format must be one of {', '.join(RESULT_FORMATS)}"
        )
    furniture = query.get("furniture", "").lower()
    if furniture not in FLAGS:
        raise error(ErrorReason.INVALID_FORMAT, "furniture must be true or false")
    return fmt, FLAGS[furniture]


def render_pages(data: bytes, pages: str, fmt: str, furniture: bool = False) -> bytes:
    """A serialized ReadingPackage restricted to the selection `pages` (page_ranges), then
    rendered as `fmt` ("proto": serialized). Pure, so it can run in another process."""
    serialized = cut_serialized(data, page_ranges.parse(pages))
    return serialized if fmt == "proto" else render(serialized, fmt, furniture)


def _limit_memory(memory_mb: int) -> None:
    """In each worker: its address space is capped, so a result too big to render is a
    MemoryError there, not the pod's OOM killer."""
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


class Renderer:
    def __init__(self, workers: int, memory_mb: int = 0) -> None:
        self.workers = max(1, workers)
        self.memory_mb = memory_mb
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_limit_memory,
                initargs=(self.memory_mb,),
            )
        return self._pool

    async def render(
        self, data: bytes, fmt: str, furniture: bool = False, pages: str | None = None
    ) -> bytes:
        """`data` (a serialized ReadingPackage) as `fmt` (`furniture`: keep running headers and
        footers in text, Markdown and HTML; `pages`: only those, render_pages). RESOURCE_EXHAUSTED
        RESULT_TOO_LARGE_TO_RENDER past the worker's memory limit (format=proto still works);
        UNAVAILABLE RENDER_FAILED when the worker process died (it is replaced for the next
        request)."""
        pool = self._executor()
        try:
            loop = asyncio.get_running_loop()
            if pages is not None:
                return await loop.run_in_executor(pool, render_pages, data, pages, fmt, furniture)
            return await loop.run_in_executor(pool, render, data, fmt, furniture)
        except (MemoryError, DecodeError) as err:
            # Verified bytes that do not decode: protobuf's arena could not allocate.
            if isinstance(err, DecodeError) and "alloc" not in str(err):
                raise error(
                    ErrorReason.UPSTREAM_CONTRACT,
                    "the stored result does not decode as a reading package",
                ) from err
            raise self._refusal(
                ErrorReason.RESULT_TOO_LARGE_TO_RENDER,
                f"the result is too large to render as {fmt} within the gateway's "
                f"{self.memory_mb} MB; ask for format=proto (the same content, serialized)",
                fmt,
                data,
            ) from err
        except BrokenProcessPool as err:
            log.warning("result render worker died; starting a new one", extra={"event": "render"})
            if self._pool is pool:
                self._pool = None
                pool.shutdown(wait=False, cancel_futures=True)
            raise self._refusal(
                ErrorReason.RENDER_FAILED,
                f"the gateway's render worker was lost (a {fmt} rendering that needs more than "
                f"{self.memory_mb} MB ends it); retry, or ask for format=proto",
                fmt,
                data,
            ) from err

    def _refusal(self, reason: ErrorReason, message: str, fmt: str, data: bytes) -> DocparseError:
        metadata = {"format": fmt, "limit_mb": str(self.memory_mb), "size_bytes": str(len(data))}
        return error(reason, message, metadata)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
