"""The `docparse` command.

    docparse up                      run the whole system locally
    docparse submit PATH... [--watch] submit files (a folder: all its files; several: a batch)
    docparse status JOB_ID           a job's current record
    docparse watch JOB_ID            follow a job to its end with a progress bar
    docparse result JOB_ID           the reading package (Markdown on a terminal, else JSON;
                                     --format json|text|markdown|html|chunks|raw,
                                     --furniture, -o FILE, --assets-dir DIR)
    docparse cancel JOB_ID           cancel a job that has not ended
    docparse batch BATCH_ID          a batch's files and counters
    docparse list                    your jobs, newest first (--state, --batch, --limit)
    docparse tenants                 operators: each tenant's share of the parse slots now
    docparse --version               this package's version

Exit codes: 0 success; 1 a job ended FAILED or CANCELLED; 2 a call failed, or the command
line, an input file or `docparse up`'s ports or data directory were refused (stderr: `error:
<gRPC code> <reason>: <message>`); 3 waiting timed out (`--timeout`; the job goes on);
130 interrupted (Ctrl-C; the jobs go on). Several outcomes at once (submit --watch of several
files): 2 before 3 before 1.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from docparse import __version__
from docparse.cli_up import DEFAULT_HTTP_PORT, DEFAULT_PORT, UP_EPILOG
from docparse.operations import default_target
from docparse.v1 import job_pb2

# A wait or a submit ends with exit 2 after this long without any answer (the stack stopped).
UNAVAILABLE_BUDGET_S = 30.0

# A subcommand's parser, made by the `add_parser` of `add_subparsers()`.
AddParser = Callable[..., argparse.ArgumentParser]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="docparse", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"docparse {__version__}")
    add = parser.add_subparsers(dest="command", required=True).add_parser
    _add_up(add)
    _add_submit(add)
    client_command(add, "status", "a job's current record").add_argument("job_id")
    _add_watch(add)
    _add_result(add)
    client_command(add, "cancel", "cancel a job that has not ended").add_argument("job_id")
    client_command(add, "batch", "a batch's state").add_argument("batch_id")
    _add_list(add)
    client_command(add, "tenants", "operators (an admin key): each tenant's share of the slots")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with the combinations argparse cannot check refused as usage errors
    (exit 2): `result --json` with a format that is not JSON."""
    args = build_parser().parse_args(argv)
    if args.command == "result" and args.json and args.format not in (None, "json", "chunks"):
        args.usage_error(
            f"--json prints JSON: use it with --format json (or chunks, JSON Lines), or leave "
            f"it out for --format {args.format}"
        )
    if args.command == "list" and args.limit < 0:
        args.usage_error("--limit is a number of jobs: 0 (all of them) or more")
    return args


# gRPC's own name schemes (dns:///host:port, unix:/path, ...): passed to the channel as they are.
GRPC_SCHEMES = ("dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:", "vsock:")
TARGET_FORM = "host:port (127.0.0.1:50050, localhost:50050, [::1]:50050)"


def target(value: str) -> str:
    """--target (or DOCPARSE_TARGET) as gRPC takes it, checked before any call: a URL or a
    host without its port is a usage error at once, not a connection retried for 30 s."""
    text = value.strip()
    if text.startswith(GRPC_SCHEMES):
        return text
    host, _, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    if (
        "/" in text
        or not host
        or (":" in host and not bracketed)
        or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536)
    ):
        hint = " without a scheme" if "://" in text else ""
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a gRPC target: expected {TARGET_FORM}{hint} (--target or "
            "DOCPARSE_TARGET)"
        )
    return text


def _add_up(add: AddParser) -> None:
    """`docparse up`: the local stack."""
    up = add(
        "up",
        help="run the whole system locally",
        description="Runs the whole system on this machine until Ctrl-C.",
        epilog=UP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    up.set_defaults(needs_client=False)


def client_command(add: AddParser, name: str, help_text: str) -> argparse.ArgumentParser:
    """A subcommand that calls the service: the connection and waiting options."""
    command = add(name, help=help_text)
    command.add_argument(
        "--target",
        type=target,
        default=default_target(),
        help=f"gateway or parser_svc, {TARGET_FORM} (DOCPARSE_TARGET; default %(default)s)",
    )
    command.add_argument(
        "--api-key", default=None, help="API key for the gateway (env DOCPARSE_API_KEY)"
    )
    command.add_argument("--tls-ca", type=Path, help="PEM root certificate: connect over TLS")
    command.add_argument(
        "--json", action="store_true", help="machine-readable output: one JSON record per line"
    )
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
    command.set_defaults(needs_client=True, usage_error=command.error)
    return command


def _add_submit(add: AddParser) -> None:
    """`docparse submit`: files, folders, passwords, language hints."""
    submit = client_command(add, "submit", "submit files or folders")
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
        "--pages",
        default="",
        metavar="LIST",
        help='PDF pages to read, 1-based: "1-5,10,20-" (default: every page)',
    )
    submit.add_argument(
        "--images",
        choices=("none", "referenced", "all"),
        default="",
        help="images in the package: none, referenced (the server's default: listed, JPEGs "
        "stored as they are), all (every image stored, re-encoded as PNG when needed)",
    )
    submit.add_argument(
        "--ocr",
        choices=("auto", "force", "off"),
        default="",
        help="when pages are OCR'd (default auto: scanned pages only)",
    )
    submit.add_argument(
        "--ocr-dpi", type=int, default=0, metavar="N", help="OCR resolution, 72 to 400"
    )
    submit.add_argument(
        "--server-wait",
        type=float,
        default=0.0,
        metavar="S",
        help="let the server wait up to S seconds for the job to end before answering (one "
        "call, no watch needed when it ends in time); with several files, one job per file",
    )
    _add_callback(submit)


def _add_callback(submit: argparse.ArgumentParser) -> None:
    """submit's webhook: SubmitJobRequest.callback."""
    submit.add_argument(
        "--callback",
        metavar="URL",
        help="a webhook: POST the job's terminal record to URL, signed with --callback-secret "
        "(README: Webhooks); for a batch, one POST of the batch once all its files ended",
    )
    submit.add_argument(
        "--callback-secret",
        metavar="NAME",
        help="the name of a webhook secret your tenant registered (never the secret itself)",
    )


def _add_watch(add: AddParser) -> None:
    """`docparse watch`."""
    watch = client_command(add, "watch", "follow a job until it ends")
    watch.add_argument("job_id")
    watch.add_argument(
        "--after-version",
        type=int,
        default=0,
        help="only records newer than this version (beyond the job's version: exit 2, "
        "OUT_OF_RANGE AFTER_VERSION_AHEAD)",
    )


def _add_result(add: AddParser) -> None:
    """`docparse result`: the package in a format, to a file, with its assets."""
    result = client_command(add, "result", "the reading package of a SUCCEEDED job")
    result.add_argument("job_id")
    result.add_argument(
        "--format",
        choices=["json", "text", "markdown", "html", "chunks", "raw"],
        default=None,
        help="default: markdown on a terminal, json otherwise (a pipe, a file); html: one "
        "self-contained page (images as assets/<id>: add --assets-dir assets); chunks: JSON "
        "Lines of sections by heading path, for retrieval",
    )
    result.add_argument(
        "--furniture",
        action="store_true",
        help="keep page furniture (running headers, footers, page numbers) in text, markdown "
        "and html",
    )
    result.add_argument("-o", "--output", help="write to this file (needed with --format raw)")
    result.add_argument(
        "--pages",
        default="",
        help='only these pages ("1-5,10,20-"), also while the job runs: then the pages read '
        "so far (a line on stderr says the answer is partial and which pages are drafts)",
    )
    result.add_argument(
        "--assets-dir",
        type=Path,
        metavar="DIR",
        help="also save the document's assets (images) into DIR, each sha256-checked",
    )


STATES = {
    name.removeprefix("STATE_").lower(): value
    for name, value in job_pb2.State.items()
    if value != job_pb2.STATE_UNSPECIFIED
}


def states(value: str) -> list[job_pb2.State.ValueType]:
    """--state: names, comma separated, as `running`, `RUNNING` or `STATE_RUNNING`."""
    found: list[job_pb2.State.ValueType] = []
    for word in filter(None, (w.strip() for w in value.split(","))):
        name = word.lower().removeprefix("state_")
        if name not in STATES:
            raise argparse.ArgumentTypeError(f"{word!r} is not a state: one of {', '.join(STATES)}")
        found.append(STATES[name])
    return found


def _add_list(add: AddParser) -> None:
    """`docparse list`: ListJobs, page after page."""
    listed = client_command(add, "list", "your jobs, newest first (batch files included)")
    listed.add_argument(
        "--state",
        type=states,
        action="extend",
        default=[],
        metavar="STATE",
        help=f"only jobs in these states ({', '.join(STATES)}); repeat or separate with commas",
    )
    listed.add_argument("--batch", default="", metavar="BATCH_ID", help="only this batch's files")
    listed.add_argument(
        "--limit",
        type=int,
        default=50,
        metavar="N",
        help="print at most N jobs (default %(default)s; 0: all of them); when more are left, "
        "stderr names the --page-token that goes on from there",
    )
    listed.add_argument(
        "--page-token",
        default="",
        metavar="TOKEN",
        help="go on where an earlier list stopped (with the same --state and --batch)",
    )
