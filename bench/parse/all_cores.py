"""Raw pymupdf on every core at once: the limit a stack's throughput is held against. A process
per usable CPU (spawned, pymupdf imported and warmed once), each running raw get_text over the
same files at the same time; pages/s is every process's pages over the wall-clock time from the
first start to the last end, and CPU per page the processes' own CPU time over those pages."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pymupdf


def _extract(paths: list[Path]) -> tuple[int, float]:
    """Raw get_text of every page of `paths`: pages and this process's CPU seconds."""
    cpu = time.process_time()
    pages = 0
    for path in paths:
        with pymupdf.open(path) as doc:  # type: ignore[no-untyped-call]
            for page in doc:
                page.get_text()
                pages += 1
    return pages, time.process_time() - cpu


def _warm(paths: list[Path]) -> None:
    _extract(paths)


class RawOnEveryCore:
    """`cores` worker processes; `run(paths)` extracts `paths` in all of them at once."""

    def __init__(self, cores: int, warm: list[Path]) -> None:
        self.cores = cores
        context = multiprocessing.get_context("spawn")  # this process has gRPC threads
        # Each worker warms itself as it starts (pymupdf imported, a document read), so that
        # no worker's start-up lands in a measured run.
        self._pool = ProcessPoolExecutor(cores, context, _warm, (warm,))
        self.run(warm)  # a task each: every worker started

    def run(self, paths: list[Path]) -> tuple[float, float]:
        """Pages per second over every core, and CPU seconds per page."""
        started = time.perf_counter()
        done = list(self._pool.map(_extract, [paths] * self.cores))
        wall = time.perf_counter() - started
        pages = sum(p for p, _ in done)
        return pages / wall, sum(c for _, c in done) / max(pages, 1)

    def close(self) -> None:
        self._pool.shutdown()
