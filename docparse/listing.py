"""The caller's jobs (ListJobs), for both clients: one page (`list_jobs`), every page in turn
(`iter_job_pages`) or every job across the pages (`iter_jobs`), newest first, batch files
included; only some states or one batch's files; and, for an operator's key, every tenant's
share of the parse slots (`tenant_shares`). Each call is retried and its errors are mapped as
every other call's (docparse.operations.call).

    with Client() as client:
        for job in client.iter_jobs(states=[job_pb2.STATE_FAILED]):
            print(job.job_id, job.error.reason)

Pages follow AIP-158: a page holds at most `page_size` jobs (0: the server's 50; it caps at
500) and may be short, even empty, while `next_page_token` says more may follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from docparse.effects import Emit, Plan, Records
from docparse.operations import BaseClient, call
from docparse.shells import answering, iterating
from docparse.v1 import job_pb2, parser_service_pb2

TransportT = TypeVar("TransportT")
SleepT = TypeVar("SleepT")
States = Sequence[job_pb2.State.ValueType]

# The most jobs one ListJobs page holds (the server caps page_size there).
MAX_PAGE = 500


class JobListing(BaseClient[TransportT, SleepT]):
    """BaseClient's operations and the listing ones (docparse.client.Client and
    docparse.aio.AsyncClient are this, in their shells)."""

    @answering
    def list_jobs(
        self,
        *,
        states: States = (),
        batch_id: str = "",
        page_size: int = 0,
        page_token: str = "",
    ) -> Plan[parser_service_pb2.ListJobsResponse]:
        """One page of the caller's jobs, newest first: in `states` (all when empty), of
        `batch_id` (every job when empty); `page_token` is the last page's
        `next_page_token` (with the same filters). A page may be short, even empty, and still
        have a token; an empty token means there are no more jobs."""
        request = parser_service_pb2.ListJobsRequest(
            page_size=page_size, page_token=page_token, states=list(states), batch_id=batch_id
        )
        response, _ = yield from call(self, "ListJobs", request)
        return response  # type: ignore[no-any-return]

    @iterating
    def iter_job_pages(
        self,
        *,
        states: States = (),
        batch_id: str = "",
        page_size: int = 0,
        page_token: str = "",
        limit: int = 0,
    ) -> Records[parser_service_pb2.ListJobsResponse]:
        """Every page from `page_token` on (the first when empty), each as ListJobs answers
        it, until the last one; with a `limit`, until that many jobs were handed out, no page
        asking for more than are left (so the last page's `next_page_token` goes on exactly
        after them). A page is asked for only when the one before was taken."""
        yield from _walk(self, states, batch_id, page_size, page_token, limit, jobs=False)

    @iterating
    def iter_jobs(
        self,
        *,
        states: States = (),
        batch_id: str = "",
        page_size: int = 0,
        page_token: str = "",
        limit: int = 0,
    ) -> Records[job_pb2.Job]:
        """Every job of the caller (in `states`, of `batch_id`), newest first, page after
        page (`page_size` jobs a call) from `page_token` on; at most `limit` when not 0."""
        yield from _walk(self, states, batch_id, page_size, page_token, limit, jobs=True)


class TenantShares(JobListing[TransportT, SleepT]):
    """And, for operators, the share of parse slots each tenant has now."""

    @answering
    def tenant_shares(self) -> Plan[parser_service_pb2.GetTenantSharesResponse]:
        """Each tenant with jobs queued or running (or limits configured): its weight, jobs
        queued and running, and the lanes' caps (GetTenantShares; `GET /v1/admin/tenants` over
        HTTP). Only for an API key marked `"admin": true` in the gateway's keys file: any other
        raises DocparseError PERMISSION_DENIED / ADMIN_ONLY (not retried)."""
        request = parser_service_pb2.GetTenantSharesRequest()
        response, _ = yield from call(self, "GetTenantShares", request)
        return response  # type: ignore[no-any-return]


def _walk(
    client: BaseClient[Any, Any],
    states: States,
    batch_id: str,
    page_size: int,
    page_token: str,
    limit: int,
    *,
    jobs: bool,
) -> Records[Any]:
    """ListJobs page after page, handing out each page (or each of its jobs)."""
    handed = 0
    while True:
        size = page_size or (MAX_PAGE if limit else 0)
        if limit:
            size = min(size, limit - handed)
        page = yield from JobListing.list_jobs(
            client, states=states, batch_id=batch_id, page_size=size, page_token=page_token
        )
        for record in page.jobs if jobs else [page]:
            yield Emit(record)
        handed += len(page.jobs)
        page_token = page.next_page_token
        if not page_token or (limit and handed >= limit):
            return
