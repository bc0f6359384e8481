"""The `docparse` command: up, submit, status, watch."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from google.protobuf import json_format

from docparse.client import Client, default_target
from docparse.errors import DocparseError
from docparse.progress import ProgressBoard, state_name
from docparse.v1 import job_pb2

EXIT_OK, EXIT_JOB_FAILED, EXIT_ERROR = 0, 1, 2


def _print_job(job: job_pb2.Job, as_json: bool) -> None:
    if as_json:
        print(json_format.MessageToJson(job, indent=None))
    else:
        extra = f" {job.error.reason}: {job.error.message}" if job.error.reason else ""
        print(f"{job.job_id} {state_name(job.state)} v{job.version} "
              f"{job.progress.done}/{job.progress.total}{extra}")  # fmt: skip


def cmd_up(args: argparse.Namespace) -> int:
    from docparse.demo import run_demo
    from docparse.stack import LocalStack

    stack = LocalStack(
        Path(args.data_dir),
        replicas=args.replicas,
        gateways=args.gateways,
        port=args.port,
        redis_url=args.redis_url,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stack.start()
    try:
        if stack.redis is not None:
            print(f"embedded redis-server at {stack.redis_url} (no --redis-url given)")
        print("dev mode: no authentication", flush=True)
        print(stack.ready_line(), flush=True)
        if args.demo:
            ok = run_demo(stack.gateway_addresses[0], Path(args.demo))
            if os.environ.get("DEMO_EXIT") == "1":
                return EXIT_OK if ok else EXIT_JOB_FAILED
        print("serving; Ctrl-C to stop", flush=True)
        stop.wait()
        return EXIT_OK
    finally:
        print("stopping", flush=True)
        stack.stop()


def cmd_submit(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.files]
    with Client(args.target) as client:
        jobs = []
        for path in paths:
            answer = client.submit(path.name, path.read_bytes())
            jobs.append(answer.job)
            if not args.watch:
                _print_job(answer.job, args.json)
        if not args.watch:
            return EXIT_OK
        board = ProgressBoard([p.name for p in paths])
        finals: list[job_pb2.Job] = list(jobs)

        def follow(index: int) -> None:
            for job in Client(args.target).watch(jobs[index].job_id):
                finals[index] = job
                board.update(index, job)

        threads = [threading.Thread(target=follow, args=(i,)) for i in range(len(jobs))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for job in finals:
            _print_job(job, args.json)
        ok = all(job.state == job_pb2.STATE_SUCCEEDED for job in finals)
        return EXIT_OK if ok else EXIT_JOB_FAILED


def cmd_status(args: argparse.Namespace) -> int:
    with Client(args.target) as client:
        job = client.status(args.job_id).job
    _print_job(job, args.json)
    return EXIT_JOB_FAILED if job.state == job_pb2.STATE_FAILED else EXIT_OK


def cmd_watch(args: argparse.Namespace) -> int:
    board = ProgressBoard([args.job_id])
    last = job_pb2.Job()
    with Client(args.target) as client:
        for job in client.watch(args.job_id, after_version=args.after_version):
            last = job
            if args.json:
                _print_job(job, True)
            else:
                board.update(0, job)
    return EXIT_OK if last.state == job_pb2.STATE_SUCCEEDED else EXIT_JOB_FAILED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="docparse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run the whole system locally")
    up.add_argument("--replicas", type=int, default=2, help="parser_svc processes")
    up.add_argument("--gateways", type=int, default=1, help="gateway processes")
    up.add_argument("--port", type=int, default=50050, help="port of the first gateway")
    up.add_argument("--redis-url", default=os.environ.get("DOCPARSE_REDIS_URL"),
                    help="use this Redis instead of an embedded one")  # fmt: skip
    up.add_argument("--data-dir", default="var/stack", help="logs, blobs, embedded Redis data")
    up.add_argument("--demo", metavar="DIR", help="submit the documents in DIR once ready")
    up.set_defaults(fn=cmd_up)

    def client_command(name: str, help_text: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text)
        command.add_argument(
            "--target", default=default_target(), help="gateway or parser_svc (DOCPARSE_TARGET)"
        )
        command.add_argument("--json", action="store_true", help="print records as JSON")
        return command

    submit = client_command("submit", "submit documents")
    submit.add_argument("files", nargs="+")
    submit.add_argument("--watch", action="store_true", help="show live progress until done")
    submit.set_defaults(fn=cmd_submit)
    status = client_command("status", "print a job's current record")
    status.add_argument("job_id")
    status.set_defaults(fn=cmd_status)
    watch = client_command("watch", "follow a job until it ends")
    watch.add_argument("job_id")
    watch.add_argument("--after-version", type=int, default=0)
    watch.set_defaults(fn=cmd_watch)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        code = args.fn(args)
    except DocparseError as err:
        print(f"error: {err.code.name} {err.reason}: {err.message}", file=sys.stderr)
        code = EXIT_ERROR
    sys.exit(code)


if __name__ == "__main__":
    main()
