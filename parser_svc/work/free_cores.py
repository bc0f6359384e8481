"""What a worker does with the cores its parses leave free: read a long PDF's pages in more
processes (parsers/pdf_split.py), and, once it is idle with no job waiting, ready the next
job's parse child ahead (child/zygote.py, spares). Both pay only on cores that stay idle: a
job waiting in the queue takes a free core the moment it is claimed."""

from __future__ import annotations

from parser_svc.child.fork_server import ForkServer
from parser_svc.work.queue import JobQueue

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


async def ready_spare(fork_server: ForkServer | None, queue: JobQueue | None) -> None:
    """For an idle worker: the next job's child forked and warmed now, unless a job waits
    (it would be claimed at once, and the spare's own parse, ~3 ms of CPU, would only add to
    a busy replica's work). One queue read."""
    if fork_server is None or fork_server.spare:
        return
    if queue is None or await queue.waiting() != 0:
        return
    await fork_server.ready_spare()
