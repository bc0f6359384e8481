"""The `docparse` command: `main` parses the command line (docparse.cli_parser, whose docstring
is the usage and the exit codes) and runs the command: `up` (docparse.cli_up), `result`
(docparse.cli_results), `list` (docparse.cli_list), and here the commands that submit, follow
and read jobs and batches.
What they share (exit codes, printing, local file errors) is docparse.cli_output.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from docparse.cli_list import cmd_list, cmd_tenants
from docparse.cli_output import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_JOB_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    check_readable,
    error_line,
    exit_for,
    files,
    json_text,
    local_error,
    print_job,
    read,
    summary,
)
from docparse.cli_parser import build_parser as build_parser  # tests/project/test_docs.py
from docparse.cli_parser import parse_args
from docparse.cli_results import cmd_result
from docparse.cli_up import cmd_up
from docparse.client import Client
from docparse.errors import ContractError, DocparseError, JobFailed, WaitTimeout
from docparse.progress import AboveTheBars, ProgressBoard
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.waiting import TERMINAL, WaitPolicy


@dataclass
class Followed:
    """How following one job ended: its last record, or the error that stopped the wait."""

    job: job_pb2.Job
    error: Exception | None = None


def _follow_jobs(client: Client, jobs: list[job_pb2.Job], board: ProgressBoard) -> list[Followed]:
    """Follows every job at once (one thread each, the SDK's waiting) to its end."""
    results = [Followed(job) for job in jobs]

    def follow(index: int) -> None:
        try:
            for job in client.watch(jobs[index].job_id):
                results[index].job = job
                board.update(index, job)
        except DocparseError as err:
            results[index].error = err

    threads = [threading.Thread(target=follow, args=(i,), daemon=True) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _report(results: list[Followed], as_json: bool, board: ProgressBoard) -> int:
    """The summary, one line on stderr per wait that did not end, and the exit code: 2 if a
    call failed, else 3 if a wait timed out, else 1 if a job failed, else 0."""
    board.close()
    codes = {_finish([r.job for r in results], as_json)}
    for result in results:
        if isinstance(result.error, WaitTimeout):
            print(f"timeout: {result.error}", file=sys.stderr)
            codes.add(EXIT_TIMEOUT)
        elif isinstance(result.error, DocparseError):
            print(error_line(result.error), file=sys.stderr)
            codes.add(EXIT_ERROR)
    return next(c for c in (EXIT_ERROR, EXIT_TIMEOUT, EXIT_JOB_FAILED, EXIT_OK) if c in codes)


def _password(args: argparse.Namespace) -> str:
    """The document password: read from file descriptor N (`--password-fd N`, one line) or
    asked for at a prompt that does not echo (`--password`); never taken from argv."""
    if args.password_fd is not None:
        try:
            with open(args.password_fd, encoding="utf-8", closefd=False) as source:
                line = source.readline()
        except OSError as err:
            raise local_error(
                ErrorReason.PASSWORD_UNREADABLE,
                f"--password-fd {args.password_fd}: {err.strerror}",
                "",
            ) from err
        return line.removesuffix("\n").removesuffix("\r")
    if args.password:
        return getpass.getpass("document password: ")
    return ""


def _languages(args: argparse.Namespace) -> list[str]:
    return [tag.strip() for given in args.language or () for tag in given.split(",") if tag.strip()]


def _job_options(args: argparse.Namespace) -> dict[str, Any]:
    """submit's per-job options: the parse options (--pages, --images, --ocr, --ocr-dpi) and
    the webhook (--callback, --callback-secret; the server checks them)."""
    options: dict[str, Any] = {
        "pages": args.pages,
        "images": args.images,
        "ocr_mode": args.ocr,
        "ocr_dpi": args.ocr_dpi,
    }
    if args.callback or args.callback_secret:
        options["callback"] = parser_service_pb2.Callback(
            url=args.callback or "", secret_name=args.callback_secret or ""
        )
    return options


def cmd_submit(args: argparse.Namespace, client: Client) -> int:
    paths = files(args.paths)
    password, languages = _password(args), _languages(args)
    wait_ms = min(int(args.server_wait * 1000), 2**32 - 1) if args.server_wait else 0
    options = _job_options(args)
    # A batch carries no password, server wait or parse options: with those, one job per file
    # (each with the callback). A batch takes the callback: one webhook once all files ended.
    callback = options.pop("callback", None)
    per_file = bool(password or wait_ms or any(options.values()))
    if len(paths) > 1 and not args.separately and not per_file:
        for path in paths:
            check_readable(path)
        # Streamed in chunks (UploadBatch): any number and size of files, within the server's
        # limits; nothing is read into memory whole.
        batch = client.upload_batch(paths, languages=languages, callback=callback)
        if not args.json:
            print(f"batch {batch.batch_id}", flush=True)
        if not args.watch:
            if args.json:
                print(json_text(batch))
            for job in batch.jobs:
                print_job(job, args.json)
            return EXIT_OK
        board = ProgressBoard([p.name for p in paths], quiet=args.json)
        final = batch
        try:
            for final in client.watch_batch(batch.batch_id):
                for index, job in enumerate(final.jobs):
                    board.update(index, job)
        except DocparseError:
            board.close()
            _finish(list(final.jobs), args.json)  # what is known, then the error's exit code
            raise
        board.close()
        return _finish(list(final.jobs), args.json)

    jobs = [
        client.submit(
            p.name,
            read(p),
            password=password,
            languages=languages,
            wait_timeout_ms=wait_ms,
            callback=callback,
            **options,
        ).job
        for p in paths
    ]
    if not args.watch:
        for job in jobs:
            print_job(job, args.json)
        return EXIT_OK if wait_ms == 0 else _exit_for_known(jobs)
    board = ProgressBoard([p.name for p in paths], quiet=args.json)
    for index, job in enumerate(jobs):
        board.update(index, job)
    try:
        return _report(_follow_jobs(client, jobs, board), args.json, board)
    finally:
        board.close()


def _exit_for_known(jobs: list[job_pb2.Job]) -> int:
    """With a server wait, a job that already ended FAILED or CANCELLED exits 1."""
    ended_badly = (job_pb2.STATE_FAILED, job_pb2.STATE_CANCELLED)
    return EXIT_JOB_FAILED if any(j.state in ended_badly for j in jobs) else EXIT_OK


def _finish(jobs: list[job_pb2.Job], as_json: bool) -> int:
    if as_json:
        for job in jobs:
            print_job(job, True)
    else:
        summary(jobs)
    return exit_for(jobs)


def cmd_status(args: argparse.Namespace, client: Client) -> int:
    job = client.status(args.job_id).job
    print_job(job, args.json)
    return EXIT_OK if job.state not in (job_pb2.STATE_FAILED, job_pb2.STATE_CANCELLED) else 1


def cmd_watch(args: argparse.Namespace, client: Client) -> int:
    board = ProgressBoard([args.job_id], quiet=args.json)
    last: job_pb2.Job | None = None
    for job in client.watch(args.job_id, after_version=args.after_version):
        last = job
        if args.json:
            print_job(job, True)
        else:
            board.update(0, job)
    board.close()
    if last is None or last.state not in TERMINAL:  # it ended at the cursor: say how
        last = client.status(args.job_id).job
        print_job(last, args.json)
    return exit_for([last])


def cmd_cancel(args: argparse.Namespace, client: Client) -> int:
    print_job(client.cancel(args.job_id), args.json)
    return EXIT_OK


def cmd_batch(args: argparse.Namespace, client: Client) -> int:
    batch = client.batch(args.batch_id)
    if args.json:
        print(json_text(batch))
    else:
        counts = f"succeeded {batch.succeeded}, failed {batch.failed}, cancelled {batch.cancelled}"
        print(f"batch {batch.batch_id}: completed {batch.completed}/{batch.total} ({counts})")
        summary(list(batch.jobs))
    return EXIT_OK


# The commands that talk to the service, by name (docparse.cli_parser); `up` starts one.
CLIENT_COMMANDS: dict[str, Callable[[argparse.Namespace, Client], int]] = {
    "submit": cmd_submit,
    "status": cmd_status,
    "watch": cmd_watch,
    "result": cmd_result,
    "cancel": cmd_cancel,
    "batch": cmd_batch,
    "list": cmd_list,
    "tenants": cmd_tenants,
}


def _run(args: argparse.Namespace) -> int:
    if not args.needs_client:
        return cmd_up(args)
    if args.verbose:
        handler = AboveTheBars(sys.stderr)  # never through the progress bars
        handler.setFormatter(logging.Formatter("retry: %(message)s"))
        logger = logging.getLogger("docparse.client")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    tls = read(args.tls_ca) if args.tls_ca else None
    policy = WaitPolicy(timeout_s=args.timeout, unavailable_budget_s=args.unreachable_timeout)
    client = Client(args.target, api_key=args.api_key, tls_root_cert=tls, policy=policy)
    with client:
        return CLIENT_COMMANDS[args.command](args, client)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        code = _run(args)
        sys.stdout.flush()  # here, not at exit: a closed pipe is then one more case below
    except BrokenPipeError:
        # stdout now goes nowhere, so the interpreter's own flush at exit can't fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_BROKEN_PIPE
    except JobFailed as err:
        print(f"failed: {err}", file=sys.stderr)
        code = EXIT_JOB_FAILED
    except WaitTimeout as err:
        print(f"timeout: {err}", file=sys.stderr)
        code = EXIT_TIMEOUT
    except ContractError as err:
        print(f"error: CONTRACT {type(err).__name__}: {err}", file=sys.stderr)
        code = EXIT_ERROR
    except DocparseError as err:
        print(error_line(err), file=sys.stderr)
        code = EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted (jobs already submitted go on)", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.exit(code)


if __name__ == "__main__":
    main()
