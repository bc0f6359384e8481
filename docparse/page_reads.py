"""Some pages of a job's reading package, also while the job runs (GetResult with `pages`),
for both clients:

    with Client() as client:
        read = client.read_pages(job_id, "1-5")
        if read.partial:  # the job runs: pages not read yet are absent, drafts may change
            print("so far:", [p.number for p in read.package.pages], "drafts:", read.draft_pages)

`stream_pages` sends them as they are read instead, then the final package's pages.

A running job's record says which pages can be read (`job.progress.ready_pages`):
`client.read_pages(job_id, job.progress.ready_pages)` gives exactly those. A job's pages are
drafted only once someone reads them while it runs: the first read (`read_pages(job_id,
"1-")`) waits a moment for the pages read before it, and from then on the record names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from docparse import effects
from docparse.effects import END, Emit, Open, Plan, Receive, Records, Sleep
from docparse.errors import DocparseError
from docparse.listing import TenantShares
from docparse.operations import collected
from docparse.results import ResultAssembler
from docparse.retries import Retrier
from docparse.shells import answering, iterating
from docparse.streamed_pages import PAGES_PER_MESSAGE, one_page_each
from docparse.v1 import parser_service_pb2, reading_package_pb2

TransportT = TypeVar("TransportT")
SleepT = TypeVar("SleepT")


@dataclass(frozen=True)
class PageRead:
    """The selected pages (a package of them and the records of the assets they show);
    `partial`: the job had not ended (a SUCCEEDED job's pages: False); `draft_pages`: the
    pages whose content is a draft (StreamResult's), in page order."""

    package: reading_package_pb2.ReadingPackage
    partial: bool
    draft_pages: tuple[int, ...]


class PageReads(TenantShares[TransportT, SleepT]):
    """The listing operations, `read_pages` and `stream_pages` (docparse.client.Client and
    docparse.aio.AsyncClient are this, in their shells)."""

    @answering
    def read_pages(self, job_id: str, pages: str) -> Plan[PageRead]:
        """The pages `pages` ("1-5,10,20-") of the job's package, checked against their
        sha256: a SUCCEEDED job's, or a QUEUED/RUNNING job's read so far (partial). A FAILED
        or CANCELLED job raises as `result()` does; bad syntax: INVALID_PAGE_RANGE."""
        request = parser_service_pb2.GetResultRequest(job_id=job_id, pages=pages)
        read = yield from collected(self, "GetResult", request, lambda: ResultAssembler(job_id))
        return PageRead(read.package(), read.partial, tuple(read.draft_pages))

    @iterating
    def stream_pages(
        self, job_id: str, *, cursor: str = ""
    ) -> Records[parser_service_pb2.StreamResultResponse]:
        """The job's pages as they are read (drafts, `final` False), then its final package's
        pages (`final` True, byte for byte those of `result()`), then a last message with the
        terminal record (`job`) and no page: StreamResult, resumed from the last `cursor`
        received (on any replica) when the stream breaks, within the retry policy (counted
        anew after a stream that delivered: a long job's stream may be cut many times). It
        asks for up to PAGES_PER_MESSAGE pages a message and hands each page out as a message
        of its own, with its own cursor."""
        retrier = Retrier("StreamResult", self.policy, self._clock(), self._rng)
        while True:
            request = parser_service_pb2.StreamResultRequest(
                job_id=job_id, cursor=cursor, pages_per_message=PAGES_PER_MESSAGE
            )
            delivered = False
            try:
                stream = yield Open("StreamResult", request, self.policy.timeout_s)
                while (message := (yield Receive(stream))) is not END:
                    delivered = True
                    for one in one_page_each(message):  # each page with its own cursor
                        cursor = one.cursor
                        yield Emit(one)
                    if message.HasField("job"):  # the terminal record, the last message:
                        yield effects.Leave(stream)  # a cut after it is none
                        return
                return
            except DocparseError as err:
                if delivered:
                    retrier = Retrier("StreamResult", self.policy, self._clock(), self._rng)
                delay = retrier.on_error(err, self._clock())
            yield Sleep(delay)
