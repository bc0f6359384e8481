"""The StreamResult algorithm: a job's pages while it runs (drafts), then its final package's
pages, then its terminal record (protos/docparse/v1/parser_service.proto says what a client
sees).

Drafts are read from the page pointers in Redis and the parts in the blob store
(parser_svc/state/page_parts.py, parser_svc/work/page_parts.py), so any replica continues a
stream another one began. The stream subscribes to the job's channel and its page channel
first, then reads the record: a record's change or a new pointer wakes it (each pointer write
publishes its number on the page channel), and every `poll_s` it looks anyway (pub/sub is
at most once; a lost connection is a RESYNC). Finals are cut from the package GetResult serves
(child/draft_pages.page_part), so they are that package's pages byte for byte on any replica.

A stream of a job that has not ended marks it read (PageParts.want): its parse drafts the pages
read so far, then each page (work/draft_switch.py); the stream sends them as they come.

The cursor is '' (from the start), 'd<seq>' (drafts sent up to that pointer number) or
'f<n>' (the first n finals sent: no more drafts). Every page has its own cursor; a reader that
asks for several pages a message (`pages_per_message`) gets the pages ready at once grouped
(`grouped`), each with the cursor it has alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator

from docparse.reasons import ErrorReason
from docparse.streamed_pages import as_message
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from docparse_server.errors import error
from parser_svc.child.draft_pages import page_part
from parser_svc.state.events import RESYNC, Ending, Event, EventHub, first_of
from parser_svc.state.page_parts import PageParts, PagePointer
from parser_svc.state.records import is_terminal, record_to_job
from parser_svc.state.store import JobStore
from parser_svc.work.blobs import BlobStore

Response = parser_service_pb2.StreamResultResponse
Page = parser_service_pb2.StreamedPage
# Parts read from the blob store in one trip to a thread (and held at once) by a stream, and
# the most pages a message (StreamResultRequest.pages_per_message): one read's.
PARTS_PER_READ = MOST_PAGES_PER_MESSAGE = 32
# The parts' bytes a message of several pages stops before.
MESSAGE_BYTES = 1 << 20
_CURSOR = re.compile(r"(?:d([0-9]{1,15})|f([0-9]{1,9}))?")


def parse_cursor(cursor: str) -> tuple[int, int | None]:
    """(drafts sent up to this pointer number, finals sent or None while in drafts)."""
    match = _CURSOR.fullmatch(cursor)
    if match is None:
        raise error(
            ErrorReason.INVALID_RESUME_CURSOR,
            f"not a StreamResult cursor: {cursor[:40]!r}; resume with the `cursor` of the last "
            "message received, or '' from the start",
        )
    drafts, finals = match.groups()
    return int(drafts or 0), None if finals is None else int(finals)


class PageStream:
    def __init__(
        self,
        store: JobStore,
        hub: EventHub,
        blobs: BlobStore,
        read_package: Callable[[job_pb2.Job], Awaitable[bytes]],
        poll_s: float = 1.0,
    ) -> None:
        self.store, self.hub, self.blobs = store, hub, blobs
        self.parts = PageParts(store)
        self.read_package, self.poll_s = read_package, poll_s

    async def stream(
        self, job_id: str, cursor: str, per_message: int = 1
    ) -> AsyncGenerator[Response, None]:
        """The stream's messages: one page each (`per_message` 0 or 1), or the pages ready at
        once in groups of up to `per_message` (at most MOST_PAGES_PER_MESSAGE)."""
        seq, finals = parse_cursor(cursor)
        keys = self.store.keys
        async with (
            self.hub.subscribe(keys.job_channel(job_id)) as queue,
            self.hub.subscribe(keys.page_channel(job_id)) as pages,
        ):
            job = await self.store.get(job_id)
            # A job that had ended when the stream began gets no drafts: its finals say it all.
            drafting = finals is None and job.state != job_pb2.STATE_SUCCEEDED
            if drafting and not is_terminal(job):  # its parse drafts from now on
                await self.parts.want(job_id)
            while True:
                ended = is_terminal(job)  # read before the drafts: none can come after it
                if drafting:
                    async for ready in self._drafts(job_id, seq):
                        seq = int(ready[-1].cursor[1:])
                        for message in grouped(ready, per_message):
                            yield message
                if ended:
                    break
                job = await self._next(job_id, job, queue, pages)
        end = f"d{seq}" if finals is None else f"f{finals}"
        if job.state == job_pb2.STATE_SUCCEEDED:
            async for ready in self._finals(job, finals or 0):
                end = ready[-1].cursor
                for message in grouped(ready, per_message):
                    yield message
        yield Response(job=job, cursor=end)

    async def _drafts(self, job_id: str, after_seq: int) -> AsyncGenerator[list[Page], None]:
        """The drafts pointed at after `after_seq`, PARTS_PER_READ pointers at a time (a list
        empty of pages gone with the job's retention is not yielded)."""
        moves = await self.parts.moves(job_id, after_seq)
        for start in range(0, len(moves), PARTS_PER_READ):
            pointers = moves[start : start + PARTS_PER_READ]
            refs = [pointer.ref for pointer in pointers]
            datas = await asyncio.to_thread(self.blobs.read_page_parts, job_id, refs)
            ready = [
                _draft(pointer, data)
                for pointer, data in zip(pointers, datas, strict=True)
                if data is not None  # None: gone with the job's retention, nothing to send
            ]
            if ready:
                yield ready

    async def _finals(self, job: job_pb2.Job, sent: int) -> AsyncGenerator[list[Page], None]:
        package = reading_package_pb2.ReadingPackage.FromString(await self.read_package(job))
        for start in range(sent, len(package.pages), PARTS_PER_READ):
            ready = []
            for index in range(start, min(start + PARTS_PER_READ, len(package.pages))):
                page = package.pages[index]
                data = page_part(package, page)
                ready.append(
                    Page(
                        page_part=data,
                        page_number=page.number,
                        final=True,
                        sha256=hashlib.sha256(data).hexdigest(),
                        attempt=job.attempt,
                        cursor=f"f{index + 1}",
                    )
                )
            yield ready

    async def _next(
        self,
        job_id: str,
        job: job_pb2.Job,
        queue: asyncio.Queue[Event],
        pages: asyncio.Queue[Event],
    ) -> job_pb2.Job:
        """The job's record after its next change, or as it is once a page is pointed at or
        `poll_s` went by."""
        record, page = await first_of(queue, pages, self.poll_s)
        while not isinstance(page, Ending) and not pages.empty():
            page = pages.get_nowait()  # one read of the moves covers every wake so far
        if isinstance(page, Ending):
            raise page.error()
        if record is None:
            return job
        event = record
        if isinstance(event, Ending):
            raise event.error()
        if event is RESYNC:
            return await self.store.get(job_id)
        newer = record_to_job(event)  # type: ignore[arg-type]
        return newer if newer.version > job.version else job


def grouped(ready: list[Page], per_message: int) -> Iterator[Response]:
    """The messages that send `ready`: one a page in the message's own fields (`per_message`
    0 or 1), else up to `per_message` pages a message, each message stopping before
    MESSAGE_BYTES of parts (a bigger page goes alone); more than MOST_PAGES_PER_MESSAGE is
    read as that."""
    per_message = min(per_message, MOST_PAGES_PER_MESSAGE)
    if per_message <= 1:
        yield from map(as_message, ready)
        return
    group: list[Page] = []
    size = 0
    for page in ready:
        if group and (len(group) == per_message or size + len(page.page_part) > MESSAGE_BYTES):
            yield Response(pages=group, cursor=group[-1].cursor)
            group, size = [], 0
        group.append(page)
        size += len(page.page_part)
    if group:
        yield Response(pages=group, cursor=group[-1].cursor)


def _draft(pointer: PagePointer, data: bytes) -> Page:
    return Page(
        page_part=data,
        page_number=pointer.page,
        final=pointer.kind == "final",
        sha256=pointer.sha256,
        attempt=pointer.attempt,
        cursor=f"d{pointer.seq}",
    )
