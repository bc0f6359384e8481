"""What a worker does with the cores its parses leave free: read a long PDF's pages in more
processes (parsers/pdf_split.py), and, once it is idle with no job waiting, ready the next
job's parse child ahead (child/zygote.py, spares). Both pay only on cores that stay idle: a
job waiting in the queue takes a free core the moment it is claimed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from parser_svc.child.fork_server import ForkServer
from parser_svc.work.queue import JobQueue

log = logging.getLogger(__name__)

# A PDF smaller than this is not asked about page ranges (its pages are too few or too light
# to repay a second process): no queue read for the common small job.
SPLIT_MIN_BYTES = 32 * 1024


async def page_processes(
    queue: JobQueue | None, free: int, split_min_pages: int, content_type: str, size: int
) -> int:
    """How many processes may read this job's pages: the `free` cores (the replica's other
    parses counted out), for a PDF big enough to be long, when no job waits in the queue. A
    split costs CPU of its own (a fork, objects and fonts read in each process). One queue
    read, for such PDFs only."""
    if content_type != "pdf" or free <= 1 or not split_min_pages:
        return 1
    if size < SPLIT_MIN_BYTES:
        return 1
    waiting = await queue.waiting() if queue is not None else None
    return free if waiting == 0 else 1


class SpareReadier:
    """Readies the next job's child (`ForkServer.ready_spare`) once the worker has been idle
    (`idle()`) for `after_idle_s` and no job waits in the queue: then its fork and its
    first parse's copies of the fork server's memory cost nobody time (~3 ms of CPU a job).
    A task of its own, so the job that ended is not held up (nor is its queue slot)."""

    def __init__(
        self, fork_server: ForkServer | None, queue: Callable[[], JobQueue | None],
        idle: Callable[[], bool], after_idle_s: float,
    ) -> None:  # fmt: skip
        # Jobs that follow one another closer than `after_idle_s` (clients in a burst, a queue
        # emptied for an instant) would wait for the spare's own parse instead of being spared
        # theirs (bench/README.md, "Spare parse children"); 0: no spares.
        self.fork_server = fork_server if after_idle_s > 0 else None
        self.queue, self.idle, self.after_idle_s = queue, idle, after_idle_s
        self.task: asyncio.Task[None] | None = None

    def soon(self) -> None:
        if self.fork_server is None or self.fork_server.spare:
            return
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._ready())

    async def _ready(self) -> None:
        await asyncio.sleep(self.after_idle_s)
        queue = self.queue()
        if self.fork_server is None or not self.idle() or queue is None:
            return
        try:
            if await queue.waiting() == 0 and self.idle():
                await self.fork_server.ready_spare()
        except Exception as err:  # never a job's failure: the next one is forked as before
            log.warning("no spare parse child readied: %s", err)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
