"""The `docparse` command.

    docparse up                      run the whole system locally
    docparse submit PATH... [--watch] submit files (a folder: all its files; several: a batch)
    docparse status JOB_ID           a job's current record
    docparse watch JOB_ID            follow a job to its end with a progress bar
    docparse result JOB_ID           the reading package (Markdown on a terminal, else JSON;
                                     --format json|text|markdown|raw, -o FILE, --assets-dir DIR)
    docparse cancel JOB_ID           cancel a job that has not ended
    docparse batch BATCH_ID          a batch's files and counters

Exit codes: 0 success; 1 a job ended FAILED or CANCELLED; 2 a call failed, or the command
line, an input file or `docparse up`'s ports or data directory were refused (stderr: `error:
<gRPC code> <reason>: <message>`); 3 waiting timed out (`--timeout`; the job goes on);
130 interrupted (Ctrl-C; the jobs go on). Several outcomes at once (submit --watch of several
files): 2 before 3 before 1.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from docparse.client import Client, default_target
from docparse.errors import ContractError, DocparseError, JobFailed, WaitTimeout
from docparse.ports import port_holder, port_in_use, port_is_free
from docparse.progress import AboveTheBars, ProgressBoard
from docparse.render import to_markdown, to_text
from docparse.v1 import job_pb2, reading_package_pb2
from docparse.waiting import TERMINAL, WaitPolicy, state_name

EXIT_OK, EXIT_JOB_FAILED, EXIT_ERROR, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# The reader of our output went away (`| head`): quiet, as a tool killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141
DEFAULT_PORT = 50050
DEFAULT_HTTP_PORT = 8080
# A wait or a submit ends with exit 2 after this long without any answer (the stack stopped).
UNAVAILABLE_BUDGET_S = 30.0


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


def _local_error(reason: str, message: str, path: Path | str) -> DocparseError:
    return DocparseError(grpc.StatusCode.INVALID_ARGUMENT, reason, message, {"path": str(path)})


def _files(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            found.append(path)
        else:
            raise _local_error("FILE_NOT_FOUND", f"{name}: no such file or directory", name)
    if not found:
        raise _local_error("NO_FILES", f"no files in {' '.join(paths)}", " ".join(paths))
    return found


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise _local_error("FILE_UNREADABLE", f"{path}: {err.strerror or err}", path) from err


def _check_readable(path: Path) -> None:
    try:
        with path.open("rb"):
            pass
    except OSError as err:
        raise _local_error("FILE_UNREADABLE", f"{path}: {err.strerror or err}", path) from err


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as err:
        raise _local_error("OUTPUT_UNWRITABLE", f"{path}: {err.strerror or err}", path) from err


# --- docparse up ---------------------------------------------------------------------------


def _pick_ports(explicit: int | None, default: int, count: int, flag: str) -> tuple[int, str]:
    """The first of `count` consecutive ports. An explicit one must be free (PORT_IN_USE
    otherwise: exit 2); the default moves (0: free ports) when taken, with a note saying so."""
    if explicit is not None:
        for port in range(explicit, explicit + count):
            if not port_is_free(port):
                raise port_in_use(f"127.0.0.1:{port}", f"docparse up {flag} {explicit}")
        return explicit, ""
    taken = next((p for p in range(default, default + count) if not port_is_free(p)), None)
    if taken is None:
        return default, ""
    holder = port_holder(taken)
    by = f" (by {holder})" if holder else ""
    return 0, f"port {taken} is taken{by}"


def cmd_up(args: argparse.Namespace) -> int:
    from docparse.local.demo import run_demo
    from docparse.local.stack import LocalStack, new_run_dir

    port, port_note = _pick_ports(args.port, DEFAULT_PORT, args.gateways, "--port")
    http_port, http_note = _pick_ports(args.http_port, DEFAULT_HTTP_PORT, 1, "--http-port")
    extra_env: dict[str, str] = {}
    if args.api_keys_file is not None:
        keys = args.api_keys_file.resolve()
        if not keys.is_file():
            raise _local_error("FILE_NOT_FOUND", f"{keys}: no such API keys file", keys)
        extra_env["DOCPARSE_GATEWAY_AUTH"] = "required"
        extra_env["DOCPARSE_GATEWAY_API_KEYS_FILE"] = str(keys)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise _local_error("TLS_INCOMPLETE", "--tls-cert and --tls-key go together", "")
    if args.tls_cert is not None and args.tls_key is not None:
        for pem in (args.tls_cert, args.tls_key):
            if not pem.is_file():
                raise _local_error("FILE_NOT_FOUND", f"{pem}: no such file", pem)
        extra_env |= {
            "DOCPARSE_GATEWAY_TLS_CERT_FILE": str(args.tls_cert.resolve()),
            "DOCPARSE_GATEWAY_TLS_KEY_FILE": str(args.tls_key.resolve()),
        }
    stack = LocalStack(
        Path(args.data_dir) if args.data_dir else new_run_dir(),
        replicas=args.replicas,
        gateways=args.gateways,
        port=port or None,
        redis_url=args.redis_url,
        extra_env=extra_env,
        http_port=http_port or None,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"starting in {stack.data_dir}", flush=True)
    stack.start()
    try:
        target = stack.gateway_addresses[0]
        for note, where in ((port_note, f"the gateway listens on {target}"),
                            (http_note, f"HTTP on {stack.http_addresses[0]}")):  # fmt: skip
            if note:
                print(f"{note}; {where} instead", flush=True)
        if port_note:
            print(f"use it with: export DOCPARSE_TARGET={target}", flush=True)
        if stack.redis is not None:
            print(f"embedded redis-server at {stack.redis_url} (no --redis-url given)")
        if stack.auth_enforced():
            print("authentication: API keys required (--api-key or DOCPARSE_API_KEY)")
        else:
            keys = [k for k in ("DOCPARSE_GATEWAY_API_KEYS", "DOCPARSE_GATEWAY_API_KEYS_FILE")
                    if stack.base_env.get(k)]  # fmt: skip
            ignored = f" ({' and '.join(keys)} set but not checked)" if keys else ""
            print(
                f"dev mode: no authentication{ignored}: every call is the tenant 'default'; "
                "served on 127.0.0.1 only, and the HTTP side refuses other sites' browser "
                "posts; --api-keys-file requires keys"
            )
        if stack.tls:
            print("gRPC over TLS: clients need --tls-ca with the certificate's CA")
        print(stack.table())
        print(stack.ready_line(), flush=True)
        if args.demo:
            tls = args.tls_cert.read_bytes() if stack.tls and args.tls_cert else None
            ok = run_demo(target, Path(args.demo), tls_root_cert=tls)
            if os.environ.get("DEMO_EXIT") == "1":
                return EXIT_OK if ok else EXIT_JOB_FAILED
        print("serving; Ctrl-C to stop", flush=True)
        stop.wait()
        return EXIT_OK
    finally:
        print("stopping", flush=True)
        stack.stop()


# --- client commands -----------------------------------------------------------------------


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
        except (DocparseError, WaitTimeout) as err:
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
        if isinstance(result.error, DocparseError):
            print(_error_line(result.error), file=sys.stderr)
            codes.add(EXIT_ERROR)
        elif isinstance(result.error, WaitTimeout):
            print(f"timeout: {result.error}", file=sys.stderr)
            codes.add(EXIT_TIMEOUT)
    return next(c for c in (EXIT_ERROR, EXIT_TIMEOUT, EXIT_JOB_FAILED, EXIT_OK) if c in codes)


def _password(args: argparse.Namespace) -> str:
    """The document password: read from file descriptor N (`--password-fd N`, one line) or
    asked for at a prompt that does not echo (`--password`); never taken from argv."""
    if args.password_fd is not None:
        try:
            with open(args.password_fd, encoding="utf-8", closefd=False) as source:
                line = source.readline()
        except OSError as err:
            raise _local_error(
                "PASSWORD_UNREADABLE", f"--password-fd {args.password_fd}: {err.strerror}", ""
            ) from err
        return line.removesuffix("\n").removesuffix("\r")
    if args.password:
        return getpass.getpass("document password: ")
    return ""


def _languages(args: argparse.Namespace) -> list[str]:
    return [tag.strip() for given in args.language or () for tag in given.split(",") if tag.strip()]


def cmd_submit(args: argparse.Namespace, client: Client) -> int:
    paths = _files(args.paths)
    password, languages = _password(args), _languages(args)
    wait_ms = min(int(args.server_wait * 1000), 2**32 - 1) if args.server_wait else 0
    # A batch carries no password or server wait: with those, one job per file.
    per_file = bool(password or wait_ms)
    if len(paths) > 1 and not args.separately and not per_file:
        for path in paths:
            _check_readable(path)
        # Streamed in chunks (UploadBatch): any number and size of files, within the server's
        # limits; nothing is read into memory whole.
        batch = client.upload_batch(paths, languages=languages)
        if not args.json:
            print(f"batch {batch.batch_id}", flush=True)
        if not args.watch:
            if args.json:
                print(_json(batch))
            for job in batch.jobs:
                _print_job(job, args.json)
            return EXIT_OK
        board = ProgressBoard([p.name for p in paths], quiet=args.json)
        final = batch
        try:
            for final in client.watch_batch(batch.batch_id):
                for index, job in enumerate(final.jobs):
                    board.update(index, job)
        except (DocparseError, WaitTimeout):
            board.close()
            _finish(list(final.jobs), args.json)  # what is known, then the error's exit code
            raise
        board.close()
        return _finish(list(final.jobs), args.json)

    jobs = [
        client.submit(
            p.name, _read(p), password=password, languages=languages, wait_timeout_ms=wait_ms
        ).job
        for p in paths
    ]
    if not args.watch:
        for job in jobs:
            _print_job(job, args.json)
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
    last: job_pb2.Job | None = None
    for job in client.watch(args.job_id, after_version=args.after_version):
        last = job
        if args.json:
            _print_job(job, True)
        else:
            board.update(0, job)
    board.close()
    if last is None or last.state not in TERMINAL:  # it ended at the cursor: say how
        last = client.status(args.job_id).job
        _print_job(last, args.json)
    return _exit_for([last])


def cmd_result(args: argparse.Namespace, client: Client) -> int:
    fmt = args.format or ("markdown" if sys.stdout.isatty() and not args.output else "json")
    if fmt == "raw":
        if not args.output:
            raise _local_error("OUTPUT_REQUIRED", "--format raw writes a file: add -o FILE", "")
        ref = client.download_result(args.job_id, Path(args.output))
        print(f"{args.output}: {ref.size_bytes} bytes, sha256 {ref.sha256} (verified)")
        if args.assets_dir:
            _save_assets(client, args.job_id, client.result(args.job_id), args.assets_dir)
        return EXIT_OK
    package = client.result(args.job_id)
    if fmt == "json":
        text = json_format.MessageToJson(package, preserving_proto_field_name=True) + "\n"
    else:
        text = to_markdown(package) if fmt == "markdown" else to_text(package)
    if args.output:
        _write(Path(args.output), text.encode("utf-8"))
    else:
        sys.stdout.write(text)
    if args.assets_dir:
        _save_assets(client, args.job_id, package, args.assets_dir)
    return EXIT_OK


def _save_assets(
    client: Client, job_id: str, package: reading_package_pb2.ReadingPackage, folder: Path
) -> None:
    """Every asset (image) of the package into `folder`, each checked against its sha256,
    named by its asset_id; a line on stderr says how many."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _local_error("OUTPUT_UNWRITABLE", f"{folder}: {err.strerror or err}", folder) from err
    total = 0
    for listed in package.assets:
        name = Path(listed.asset_id).name
        if not name or name.startswith(".") or name != listed.asset_id:
            raise ContractError(f"asset id {listed.asset_id!r} is not a plain file name")
        asset, data = client.asset(job_id, listed.asset_id, listed.deployment)
        _write(folder / name, data)
        total += asset.size_bytes
    print(f"{len(package.assets)} assets ({total} bytes, sha256 verified) in {folder}",
          file=sys.stderr)  # fmt: skip


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
        help=f"gRPC port of the first gateway, the next ones on the ports after it (default "
        f"{DEFAULT_PORT}, or free ports if it is taken; an explicit port that is taken: exit 2)",
    )
    up.add_argument(
        "--http-port",
        type=int,
        default=None,
        help=f"HTTP port of the first gateway (default {DEFAULT_HTTP_PORT}, or a free one if it "
        "is taken; an explicit port that is taken: exit 2)",
    )
    up.add_argument("--redis-url", default=os.environ.get("DOCPARSE_REDIS_URL"),
                    help="use this Redis instead of an embedded one")  # fmt: skip
    up.add_argument(
        "--data-dir",
        default=None,
        help="logs, blobs, embedded Redis data (default: a new var/stack/<time>-<pid> per run, "
        "the 10 newest kept); a directory another stack uses is refused (exit 2)",
    )
    up.add_argument(
        "--api-keys-file",
        type=Path,
        help="require API keys: a keys file in the gateway's format (README: Tenants, API keys)",
    )
    up.add_argument("--tls-cert", type=Path, help="PEM certificate chain: the gateways' gRPC "
                    "ports speak TLS")  # fmt: skip
    up.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
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
        command.add_argument(
            "-v", "--verbose", action="store_true", help="log each retried call on stderr"
        )
        command.add_argument(
            "--timeout",
            type=float,
            default=600.0,
            help="waiting limit in seconds: exit 3 when it runs out (the job goes on)",
        )
        command.add_argument(
            "--unreachable-timeout",
            type=float,
            default=UNAVAILABLE_BUDGET_S,
            help="how long a call or a wait rides out a service that does not answer "
            "(UNAVAILABLE: a target refusing connections, a replica restart) before it ends "
            "with exit 2 (default %(default)s s)",
        )
        command.set_defaults(needs_client=True)
        return command

    submit = client_command("submit", "submit files or folders")
    submit.add_argument("paths", nargs="+")
    submit.add_argument("--watch", action="store_true", help="live progress until done")
    submit.add_argument("--separately", action="store_true", help="one job per file, no batch")
    secret = submit.add_mutually_exclusive_group()
    secret.add_argument(
        "--password",
        action="store_true",
        help="ask for the password of encrypted documents at a prompt (never on the command "
        "line); with several files, one job per file",
    )
    secret.add_argument(
        "--password-fd",
        type=int,
        metavar="N",
        help="read the password from file descriptor N (one line), e.g. 3< secret.txt",
    )
    submit.add_argument(
        "--language",
        action="append",
        metavar="TAG",
        help="OCR language hint, BCP-47 (en, de, zh-Hant); repeat or separate with commas",
    )
    submit.add_argument(
        "--server-wait",
        type=float,
        default=0.0,
        metavar="S",
        help="let the server wait up to S seconds for the job to end before answering (one "
        "call, no watch needed when it ends in time); with several files, one job per file",
    )
    submit.set_defaults(fn=cmd_submit)
    status = client_command("status", "a job's current record")
    status.add_argument("job_id")
    status.set_defaults(fn=cmd_status)
    watch = client_command("watch", "follow a job until it ends")
    watch.add_argument("job_id")
    watch.add_argument(
        "--after-version",
        type=int,
        default=0,
        help="only records newer than this version (beyond the job's version: exit 2, "
        "OUT_OF_RANGE AFTER_VERSION_AHEAD)",
    )
    watch.set_defaults(fn=cmd_watch)
    result = client_command("result", "the reading package of a SUCCEEDED job")
    result.add_argument("job_id")
    result.add_argument(
        "--format",
        choices=["json", "text", "markdown", "raw"],
        default=None,
        help="default: markdown on a terminal, json otherwise (a pipe, a file)",
    )
    result.add_argument("-o", "--output", help="write to this file (needed with --format raw)")
    result.add_argument(
        "--assets-dir",
        type=Path,
        metavar="DIR",
        help="also save the document's assets (images) into DIR, each sha256-checked",
    )
    result.set_defaults(fn=cmd_result)
    cancel = client_command("cancel", "cancel a job that has not ended")
    cancel.add_argument("job_id")
    cancel.set_defaults(fn=cmd_cancel)
    batch = client_command("batch", "a batch's state")
    batch.add_argument("batch_id")
    batch.set_defaults(fn=cmd_batch)
    return parser


def _error_line(err: DocparseError) -> str:
    return f"error: {err.code.name} {err.reason or 'NO_REASON'}: {err.message}"


def _run(args: argparse.Namespace) -> int:
    if not args.needs_client:
        code: int = args.fn(args)
        return code
    if args.verbose:
        handler = AboveTheBars(sys.stderr)  # never through the progress bars
        handler.setFormatter(logging.Formatter("retry: %(message)s"))
        logger = logging.getLogger("docparse.client")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    tls = _read(args.tls_ca) if args.tls_ca else None
    policy = WaitPolicy(timeout_s=args.timeout, unavailable_budget_s=args.unreachable_timeout)
    with Client(args.target, api_key=args.api_key, tls_root_cert=tls, policy=policy) as client:
        code = args.fn(args, client)
        return code


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
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
    except DocparseError as err:
        print(_error_line(err), file=sys.stderr)
        code = EXIT_ERROR
    except ContractError as err:
        print(f"error: CONTRACT {type(err).__name__}: {err}", file=sys.stderr)
        code = EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted (jobs already submitted go on)", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.exit(code)


if __name__ == "__main__":
    main()
