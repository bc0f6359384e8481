"""The `docparse` command.

    docparse up                      run the whole system locally
    docparse submit PATH... [--watch] submit files (a folder: all its files; several: a batch)
    docparse status JOB_ID           a job's current record
    docparse watch JOB_ID            follow a job to its end with a progress bar
    docparse result JOB_ID           the reading package (--format json|text|markdown, -o FILE)
    docparse cancel JOB_ID           cancel a job that has not ended
    docparse batch BATCH_ID          a batch's files and counters

Exit codes: 0 success; 1 a job ended FAILED or CANCELLED; 2 the call failed (message on
stderr with the gRPC code and reason); 3 waiting timed out (the job goes on).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from google.protobuf import json_format
from google.protobuf.message import Message

from docparse.client import Client, default_target
from docparse.embedded_redis import free_port, port_is_free
from docparse.errors import ContractError, DocparseError, JobFailed, WaitTimeout
from docparse.progress import ProgressBoard
from docparse.render import to_markdown, to_text
from docparse.v1 import job_pb2
from docparse.waiting import TERMINAL, WaitPolicy, state_name

EXIT_OK, EXIT_JOB_FAILED, EXIT_ERROR, EXIT_TIMEOUT = 0, 1, 2, 3
DEFAULT_PORT = 50050


def _json(message: Message) -> str:
    return json_format.MessageToJson(message, indent=None, preserving_proto_field_name=True)


def _print_job(job: job_pb2.Job, as_json: bool) -> None:
    if as_json:
        print(_json(job))
        return
    extra = f" {job.error.reason}: {job.error.message}" if job.error.reason else ""
    print(f"{job.job_id} {state_name(job.state)} v{job.version} "
          f"{job.progress.done}/{job.progress.total}{extra}")  # fmt: skip


def _summary(jobs: list[job_pb2.Job]) -> None:
    print(f"\n{'file':<32} {'job id':<36} {'state':<10} {'pages':>5} {'chars':>8}  reason")
    for job in jobs:
        print(
            f"{job.file_name[:32]:<32} {job.job_id:<36} {state_name(job.state):<10} "
            f"{job.result.page_count:>5} {job.result.char_count:>8}  {job.error.reason}"
        )


def _exit_for(jobs: list[job_pb2.Job]) -> int:
    return EXIT_OK if all(j.state == job_pb2.STATE_SUCCEEDED for j in jobs) else EXIT_JOB_FAILED


def _files(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        else:
            found.append(path)
    if not found:
        raise SystemExit("docparse submit: no files")
    return found


def cmd_up(args: argparse.Namespace) -> int:
    from docparse.demo import run_demo
    from docparse.stack import LocalStack

    port = args.port
    if port is None:
        port = DEFAULT_PORT if port_is_free(DEFAULT_PORT) else free_port()
        if port != DEFAULT_PORT:
            print(f"port {DEFAULT_PORT} is taken; the gateway listens on {port} instead")
    stack = LocalStack(
        Path(args.data_dir),
        replicas=args.replicas,
        gateways=args.gateways,
        port=port,
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


def cmd_submit(args: argparse.Namespace, client: Client) -> int:
    paths = _files(args.paths)
    if len(paths) > 1 and not args.separately:
        batch = client.submit_batch([(p.name, p.read_bytes()) for p in paths])
        if not args.watch:
            print(_json(batch) if args.json else f"batch {batch.batch_id}")
            for job in batch.jobs:
                _print_job(job, args.json)
            return EXIT_OK
        board = ProgressBoard([p.name for p in paths], quiet=args.json)
        final = batch
        for final in client.watch_batch(batch.batch_id):
            for index, job in enumerate(final.jobs):
                board.update(index, job)
        return _finish(list(final.jobs), args.json)

    jobs = [client.submit(p.name, p.read_bytes()).job for p in paths]
    if not args.watch:
        for job in jobs:
            _print_job(job, args.json)
        return EXIT_OK
    board = ProgressBoard([p.name for p in paths], quiet=args.json)
    finals = list(jobs)

    def follow(index: int) -> None:
        for job in client.watch(jobs[index].job_id, after_version=0):
            finals[index] = job
            board.update(index, job)

    threads = [threading.Thread(target=follow, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _finish(finals, args.json)


def _finish(jobs: list[job_pb2.Job], as_json: bool) -> int:
    if as_json:
        for job in jobs:
            _print_job(job, True)
    else:
        _summary(jobs)
    return _exit_for(jobs)


def cmd_status(args: argparse.Namespace, client: Client) -> int:
    job = client.status(args.job_id).job
    _print_job(job, args.json)
    return EXIT_OK if job.state not in (job_pb2.STATE_FAILED, job_pb2.STATE_CANCELLED) else 1


def cmd_watch(args: argparse.Namespace, client: Client) -> int:
    board = ProgressBoard([args.job_id], quiet=args.json)
    last = job_pb2.Job()
    for job in client.watch(args.job_id, after_version=args.after_version):
        last = job
        if args.json:
            _print_job(job, True)
        else:
            board.update(0, job)
    if last.state not in TERMINAL:  # resumed past the end: report the final record
        last = client.status(args.job_id).job
    return _exit_for([last])


def cmd_result(args: argparse.Namespace, client: Client) -> int:
    if args.format == "raw":
        if not args.output:
            raise SystemExit("docparse result --format raw needs -o FILE")
        ref = client.download_result(args.job_id, Path(args.output))
        print(f"{args.output}: {ref.size_bytes} bytes, sha256 {ref.sha256} (verified)")
        return EXIT_OK
    package = client.result(args.job_id)
    if args.format == "json":
        text = json_format.MessageToJson(package, preserving_proto_field_name=True) + "\n"
    else:
        text = to_markdown(package) if args.format == "markdown" else to_text(package)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace, client: Client) -> int:
    _print_job(client.cancel(args.job_id), args.json)
    return EXIT_OK


def cmd_batch(args: argparse.Namespace, client: Client) -> int:
    batch = client.batch(args.batch_id)
    if args.json:
        print(_json(batch))
    else:
        counts = f"succeeded {batch.succeeded}, failed {batch.failed}, cancelled {batch.cancelled}"
        print(f"batch {batch.batch_id}: completed {batch.completed}/{batch.total} ({counts})")
        _summary(list(batch.jobs))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="docparse", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run the whole system locally")
    up.add_argument("--replicas", type=int, default=2, help="parser_svc processes")
    up.add_argument("--gateways", type=int, default=1, help="gateway processes")
    up.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"port of the first gateway (default {DEFAULT_PORT}, or a free one if it is taken)",
    )
    up.add_argument("--redis-url", default=os.environ.get("DOCPARSE_REDIS_URL"),
                    help="use this Redis instead of an embedded one")  # fmt: skip
    up.add_argument("--data-dir", default="var/stack", help="logs, blobs, embedded Redis data")
    up.add_argument("--demo", metavar="DIR", help="submit the documents in DIR once ready")
    up.set_defaults(fn=cmd_up, needs_client=False)

    def client_command(name: str, help_text: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text)
        command.add_argument(
            "--target", default=default_target(), help="gateway or parser_svc (DOCPARSE_TARGET)"
        )
        command.add_argument(
            "--api-key", default=None, help="API key for the gateway (env DOCPARSE_API_KEY)"
        )
        command.add_argument("--tls-ca", type=Path, help="PEM root certificate: connect over TLS")
        command.add_argument("--json", action="store_true", help="machine-readable output")
        command.add_argument("--timeout", type=float, default=600.0, help="waiting limit, s")
        command.set_defaults(needs_client=True)
        return command

    submit = client_command("submit", "submit files or folders")
    submit.add_argument("paths", nargs="+")
    submit.add_argument("--watch", action="store_true", help="live progress until done")
    submit.add_argument("--separately", action="store_true", help="one job per file, no batch")
    submit.set_defaults(fn=cmd_submit)
    status = client_command("status", "a job's current record")
    status.add_argument("job_id")
    status.set_defaults(fn=cmd_status)
    watch = client_command("watch", "follow a job until it ends")
    watch.add_argument("job_id")
    watch.add_argument("--after-version", type=int, default=0)
    watch.set_defaults(fn=cmd_watch)
    result = client_command("result", "the reading package of a SUCCEEDED job")
    result.add_argument("job_id")
    result.add_argument("--format", choices=["json", "text", "markdown", "raw"], default="json")
    result.add_argument("-o", "--output", help="write to this file")
    result.set_defaults(fn=cmd_result)
    cancel = client_command("cancel", "cancel a job that has not ended")
    cancel.add_argument("job_id")
    cancel.set_defaults(fn=cmd_cancel)
    batch = client_command("batch", "a batch's state")
    batch.add_argument("batch_id")
    batch.set_defaults(fn=cmd_batch)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        if not args.needs_client:
            code = args.fn(args)
        else:
            tls = args.tls_ca.read_bytes() if args.tls_ca else None
            policy = WaitPolicy(timeout_s=args.timeout)
            with Client(
                args.target, api_key=args.api_key, tls_root_cert=tls, policy=policy
            ) as client:
                code = args.fn(args, client)
    except JobFailed as err:
        print(f"failed: {err}", file=sys.stderr)
        code = EXIT_JOB_FAILED
    except WaitTimeout as err:
        print(f"timeout: {err}", file=sys.stderr)
        code = EXIT_TIMEOUT
    except DocparseError as err:
        print(f"error: {err.code.name} {err.reason}: {err.message}", file=sys.stderr)
        code = EXIT_ERROR
    except ContractError as err:
        print(f"error: contract: {err}", file=sys.stderr)
        code = EXIT_ERROR
    sys.exit(code)


if __name__ == "__main__":
    main()
