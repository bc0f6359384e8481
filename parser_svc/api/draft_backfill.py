"""A read of a running job's pages turns its drafts on (state/page_parts.PageParts.want): the
parse writes drafts only for a job someone reads (work/draft_switch.py). A read that finds fewer
drafts than the record says pages are done (the one that turned them on) waits a moment (2 s
at most by default) for the pages the parse read before: a client that asks for what the record
says is done gets it in the same call."""

from __future__ import annotations

import asyncio

from docparse.v1 import job_pb2
from parser_svc.state.events import EventHub, first_of
from parser_svc.state.page_parts import PageParts, PagePointer
from parser_svc.state.records import is_terminal
from parser_svc.state.store import JobStore


async def wanted(
    store: JobStore, hub: EventHub, parts: PageParts, job: job_pb2.Job, wait_s: float
) -> tuple[job_pb2.Job, list[PagePointer] | None]:
    """Marks the running `job` as read. When its parse had read pages of a multi-page PDF that
    are not drafts yet (the mark is new, or a read before did not wait for them all: a retry
    after a lost reply waits as the first call did): waits until as many pages are pointed at
    as the record said were done, the job ends, or `wait_s` pass (the settings'
    draft_backfill_wait_s: the worker hears of a reader with its next progress write, at most
    0.2 s, and the parse at its next page; an OCR'd page may take longer). The job's record as
    it is then, and its pointers as last read (None: not read here)."""
    await parts.want(job.job_id)
    done = job.progress.done
    if job.content_type != "pdf" or job.progress.total < 2 or done < 1:
        return job, None
    pointers = await parts.ready(job.job_id)
    if len(pointers) >= done:
        return job, pointers
    keys, loop = store.keys, asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    async with (
        hub.subscribe(keys.job_channel(job.job_id)) as records,
        hub.subscribe(keys.page_channel(job.job_id)) as pages,
    ):
        while True:  # subscribed first, then read: a pointer written meanwhile is seen
            job, pointers = await store.get(job.job_id), await parts.ready(job.job_id)
            if is_terminal(job) or len(pointers) >= done or loop.time() >= deadline:
                return job, pointers
            await first_of(records, pages, deadline - loop.time())  # any event: look again
