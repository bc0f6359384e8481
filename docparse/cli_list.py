"""`docparse list`: the caller's jobs (ListJobs), newest first, batch files included; only
some states (`--state`) or one batch's files (`--batch`); page after page until `--limit` jobs
are printed. When jobs are left, stderr names the `--page-token` that goes on from there.
`--json` prints one job per line, as `status --json` does.

`docparse tenants` (an operator's key: `"admin": true` in the gateway's keys file): each tenant's
share of the parse slots now, a row each, then the lanes' caps; `--json` prints the answer."""

from __future__ import annotations

import argparse
import sys

from docparse.cli_output import EXIT_OK, json_text, print_job
from docparse.client import Client
from docparse.listing import MAX_PAGE
from docparse.v1 import job_pb2
from docparse.waiting import state_name


def _row(job: job_pb2.Job) -> str:
    created = job.create_time.ToDatetime().strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"{job.job_id:<36} {state_name(job.state):<10} {created:<19} "
        f"{job.result.page_count:>5} {job.result.char_count:>8}  {job.file_name[:40]}"
        + (f"  {job.error.reason}" if job.error.reason else "")
    )


def cmd_list(args: argparse.Namespace, client: Client) -> int:
    """The SDK's listing (docparse.listing), page after page up to `--limit` (0: every job),
    each page no larger than what is left, so the last token goes on right after them."""
    token: str = args.page_token
    if not args.json:
        print(f"{'job id':<36} {'state':<10} {'created (UTC)':<19} {'pages':>5} {'chars':>8}  file")
    pages = client.iter_job_pages(
        states=args.state,
        batch_id=args.batch,
        page_size=MAX_PAGE,
        page_token=token,
        limit=args.limit,
    )
    for page in pages:
        for job in page.jobs:
            if args.json:
                print_job(job, True)
            else:
                print(_row(job))
        token = page.next_page_token
    if token:
        print(f"more jobs: go on with --page-token {token}", file=sys.stderr)
    return EXIT_OK


def cmd_tenants(args: argparse.Namespace, client: Client) -> int:
    """The SDK's `tenant_shares` (GetTenantShares), as a table or as JSON."""
    shares = client.tenant_shares()
    if args.json:
        print(json_text(shares))
        return EXIT_OK
    print(
        f"{'tenant':<32} {'weight':>6} {'queued':>6} {'interactive':>11} {'bulk':>6} {'running':>7}"
    )
    for row in shares.tenants:
        print(
            f"{row.tenant[:32]:<32} {row.weight:>6g} {row.queued:>6} "
            f"{row.pending_interactive:>11} {row.pending_bulk:>6} {row.running:>7}"
        )
    admission = "fair admission" if shares.fair_admission else "first come, first served"
    print(
        f"{admission}: {shares.active} running, {shares.waiting} waiting; bulk slots "
        f"{shares.bulk_slots}, interactive reserve {shares.interactive_reserve}"
    )
    return EXIT_OK
