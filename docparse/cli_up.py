"""`docparse up`: the whole system on this machine (docparse.local.stack), until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from docparse.cli_output import EXIT_JOB_FAILED, EXIT_OK, local_error
from docparse.local.features import feature_lines
from docparse.ports import port_holder, port_in_use, port_is_free
from docparse.reasons import ErrorReason

if TYPE_CHECKING:
    from docparse.local.stack import LocalStack

DEFAULT_PORT = 50050
DEFAULT_HTTP_PORT = 8080

UP_EPILOG = """\
environment:
  The servers it starts get this environment: every setting of parser_svc (DOCPARSE_*,
  parser_svc/settings.py), of the gateways (DOCPARSE_GATEWAY_*, gateway/settings.py) and
  OpenTelemetry's OTEL_* applies to the stack, but for what the stack sets itself (the
  listen and metrics addresses, DOCPARSE_ENV, DOCPARSE_BLOB_DIR and what the flags set;
  DOCPARSE_REDIS_URL is --redis-url's default). At start it says which of auth, webhooks,
  tracing and CORS are on.

  DOCPARSE_WEBHOOK_SECRETS_FILE=webhook-secrets.json \\
  DOCPARSE_WEBHOOK_ALLOW_CIDRS=127.0.0.1/32 docparse up   # callbacks to this machine
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 docparse up   # traces to a collector
  DOCPARSE_GATEWAY_HTTP_CORS_ORIGINS=http://localhost:3000 docparse up   # a dev web app
"""


def pick_ports(explicit: int | None, default: int, count: int, flag: str) -> tuple[int, str]:
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

    port, port_note = pick_ports(args.port, DEFAULT_PORT, args.gateways, "--port")
    http_port, http_note = pick_ports(args.http_port, DEFAULT_HTTP_PORT, 1, "--http-port")
    extra_env = stack_env(args)
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
        announce(stack, port_note, http_note)
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


def stack_env(args: argparse.Namespace) -> dict[str, str]:
    """The servers' environment beyond the caller's: every call logged, API keys and TLS as
    the flags say (their files checked first: FILE_NOT_FOUND, TLS_INCOMPLETE)."""
    # A developer's stack: every call in the logs (servers default to leaving successful polls
    # out), as the demo's "replicas that answered" come from them; the environment may say less.
    extra_env = {
        name: "all"
        for name in ("DOCPARSE_ACCESS_LOG", "DOCPARSE_GATEWAY_ACCESS_LOG")
        if name not in os.environ
    }
    if args.api_keys_file is not None:
        keys = args.api_keys_file.resolve()
        if not keys.is_file():
            raise local_error(ErrorReason.FILE_NOT_FOUND, f"{keys}: no such API keys file", keys)
        extra_env["DOCPARSE_GATEWAY_AUTH"] = "required"
        extra_env["DOCPARSE_GATEWAY_API_KEYS_FILE"] = str(keys)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise local_error(ErrorReason.TLS_INCOMPLETE, "--tls-cert and --tls-key go together", "")
    if args.tls_cert is not None and args.tls_key is not None:
        for pem in (args.tls_cert, args.tls_key):
            if not pem.is_file():
                raise local_error(ErrorReason.FILE_NOT_FOUND, f"{pem}: no such file", pem)
        extra_env |= {
            "DOCPARSE_GATEWAY_TLS_CERT_FILE": str(args.tls_cert.resolve()),
            "DOCPARSE_GATEWAY_TLS_KEY_FILE": str(args.tls_key.resolve()),
        }
    return extra_env


def announce(stack: LocalStack, port_note: str, http_note: str) -> None:
    """What a started stack tells its user: moved ports, Redis, which of auth, webhooks,
    tracing and CORS are on, TLS, the table of processes and the ready line."""
    target = stack.gateway_addresses[0]
    for note, where in ((port_note, f"the gateway listens on {target}"),
                        (http_note, f"HTTP on {stack.http_addresses[0]}")):  # fmt: skip
        if note:
            print(f"{note}; {where} instead", flush=True)
    if port_note:
        print(f"use it with: export DOCPARSE_TARGET={target}", flush=True)
    if stack.redis is not None:
        print(
            f"embedded redis-server at {stack.shown_redis_url} (no --redis-url given; "
            f"its password is in {stack.data_dir / 'redis.url'}, readable by you alone)"
        )
    for line in feature_lines(stack.base_env, stack.auth_enforced()):
        print(line)
    if stack.tls:
        print("gRPC over TLS: clients need --tls-ca with the certificate's CA")
    print("processes:")
    print(stack.table())
    print(stack.ready_line(), flush=True)
