"""`docparse list`: the caller's jobs (ListJobs), newest first, batch files included; only
some states (`--state`) or one batch's files (`--batch`); page after page until `--limit` jobs
are printed. When jobs are left, stderr names the `--page-token` that goes on from there.
`--json` prints one job per line, as `status --json` does."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from docparse.cli_output import EXIT_OK, print_job
from docparse.client import Client
from docparse.effects import Plan
from docparse.operations import call
from docparse.shells import answering
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.waiting import state_name

# The most jobs one ListJobs page holds (the server caps page_size there).
MAX_PAGE = 500


class ListingClient(Client):
    """The SDK's client with one operation more, ListJobs, which the CLI lists with."""

    @answering
    def list_jobs(
        self,
        *,
        states: Sequence[job_pb2.State.ValueType] = (),
        batch_id: str = "",
        page_size: int = 0,
        page_token: str = "",
    ) -> Plan[parser_service_pb2.ListJobsResponse]:
        """One page of the caller's jobs, newest first: in `states` (all when empty), of
        `batch_id` (every job when empty); `page_token` is the last page's
        `next_page_token`. A page may be short, even empty, and still have a token."""
        request = parser_service_pb2.ListJobsRequest(
            page_size=page_size, page_token=page_token, states=list(states), batch_id=batch_id
        )
        response, _ = yield from call(self, "ListJobs", request)
        return response  # type: ignore[no-any-return]


def _row(job: job_pb2.Job) -> str:
    created = job.create_time.ToDatetime().strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"{job.job_id:<36} {state_name(job.state):<10} {created:<19} "
        f"{job.result.page_count:>5} {job.result.char_count:>8}  {job.file_name[:40]}"
        + (f"  {job.error.reason}" if job.error.reason else "")
    )


def cmd_list(args: argparse.Namespace, client: ListingClient) -> int:
    limit: int = args.limit  # 0: every job
    token: str = args.page_token
    printed = 0
    if not args.json:
        print(f"{'job id':<36} {'state':<10} {'created (UTC)':<19} {'pages':>5} {'chars':>8}  file")
    while True:
        size = min(limit - printed, MAX_PAGE) if limit else MAX_PAGE
        page = client.list_jobs(
            states=args.state, batch_id=args.batch, page_size=size, page_token=token
        )
        for job in page.jobs:
            if args.json:
                print_job(job, True)
            else:
                print(_row(job))
        printed += len(page.jobs)
        token = page.next_page_token
        if not token or (limit and printed >= limit):
            break
    if token:
        print(f"more jobs: go on with --page-token {token}", file=sys.stderr)
    return EXIT_OK
