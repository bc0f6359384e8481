"""gateway process: forwards docparse.v1 to parser_svc, serves health and reflection itself."""

from __future__ import annotations

import asyncio
import logging
import signal

import grpc

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import parser_service_pb2
from docparse_server import logs, loops, observability, tracing
from docparse_server.errors import error
from docparse_server.flow_control import receive_window_options
from docparse_server.secret_files import check_secret_file
from docparse_server.serving import (
    EXCLUSIVE_PORT,
    InterceptorChain,
    ServedByInterceptor,
    add_health_and_reflection,
    bind_grpc_or_exit,
    exit_cannot_listen,
    exit_on_startup_error,
    set_serving,
)
from docparse_server.settings_load import load_settings
from docparse_server.tls import channel_credentials, server_credentials
from gateway.auth import GatewayAuth
from gateway.http import HttpServer
from gateway.observability import GATEWAY_METRICS
from gateway.proxy import ForwardingHandler, upstream_channel, upstream_target
from gateway.settings import GatewaySettings

log = logging.getLogger("gateway")
SERVICES = [parser_service_pb2.DESCRIPTOR.services_by_name["ParserService"]]


TLS_VARIABLES = ("DOCPARSE_GATEWAY_TLS_CERT_FILE", "DOCPARSE_GATEWAY_TLS_KEY_FILE")
UPSTREAM_CA_VARIABLE = "DOCPARSE_GATEWAY_UPSTREAM_TLS_CA_FILE"


def add_port(server: grpc.aio.Server, settings: GatewaySettings) -> int:
    """TLS when a certificate is configured, plaintext otherwise; exclusive (exit code 2 with
    one error line naming the holder when the port is taken)."""
    credentials = server_credentials(settings.tls_cert_file, settings.tls_key_file, TLS_VARIABLES)
    return bind_grpc_or_exit("gateway", server, settings.listen, credentials)


def check_files(settings: GatewaySettings) -> None:
    """Fails closed before anything starts (exit 2, one error line): half a TLS pair, an
    unreadable certificate or CA, or an API keys file another local user could write."""
    try:
        server_credentials(settings.tls_cert_file, settings.tls_key_file, TLS_VARIABLES)
        channel_credentials(settings.upstream_tls_ca_file, UPSTREAM_CA_VARIABLE)
        if settings.api_keys_file is not None:
            check_secret_file(
                settings.api_keys_file,
                "DOCPARSE_GATEWAY_API_KEYS_FILE",
                ErrorReason.AUTH_NOT_CONFIGURED,
                "gateway",
            )
    except DocparseError as err:
        exit_on_startup_error("gateway", err)


def grpc_server(settings: GatewaySettings) -> grpc.aio.Server:
    """The gRPC server, its interceptors and options; handlers are added by `serve`."""
    return grpc.aio.server(
        interceptors=[
            InterceptorChain(
                observability.RpcObserver(
                    "gateway",
                    raw_services=SERVICES,
                    quiet_reads=settings.access_log == "quiet_reads",
                ),
                ServedByInterceptor(),
            )
        ],
        options=[
            ("grpc.max_receive_message_length", settings.max_message_bytes),
            ("grpc.max_send_message_length", settings.max_message_bytes),
            *receive_window_options(settings.receive_window_bytes),
            EXCLUSIVE_PORT,
        ],
    )


async def serve(settings: GatewaySettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    channel = upstream_channel(
        settings.backends,
        settings.max_message_bytes,
        settings.receive_window_bytes,
        channel_credentials(settings.upstream_tls_ca_file, UPSTREAM_CA_VARIABLE),
        settings.upstream_tls_server_name,
    )
    server = grpc_server(settings)
    auth = GatewayAuth(settings)
    forwarding = ForwardingHandler(channel, SERVICES, settings.default_unary_timeout_s, auth)
    server.add_generic_rpc_handlers([forwarding])
    names = [service.full_name for service in SERVICES]
    health = add_health_and_reflection(server, names)
    # Every port is bound before anything serves: a taken one ends the process (exit 2) before
    # it answered a single call.
    port = add_port(server, settings)
    observability.start_metrics_server(settings.metrics_listen, GATEWAY_METRICS)
    # HTTP (JSON, SSE, the page) on the same loop and upstream channel; /healthz says 503
    # until the gRPC side is SERVING too.
    http = HttpServer(channel, settings, auth) if settings.http_listen else None
    if http is not None:
        try:
            log.info("gateway http on port %d", await http.start())
        except DocparseError as err:
            exit_cannot_listen("gateway", err)
    await server.start()
    await set_serving(health, names, True)
    if http is not None:
        http.set_serving()
    log.info(
        "gateway serving on port %d → %s (auth %s, %s, %s to parser_svc)",
        port,
        upstream_target(settings.backends),
        settings.auth,
        "TLS" if settings.tls_cert_file else "plaintext",
        "TLS" if settings.upstream_tls_ca_file else "plaintext",
    )

    await stop.wait()
    await set_serving(health, names, False)
    forwarding.drain()
    await asyncio.gather(server.stop(settings.shutdown_grace_s), *([http.stop()] if http else []))
    await channel.close()


def check_auth(settings: GatewaySettings) -> None:
    """Fails closed: a gateway that must authenticate but has no keys, or no secret to vouch
    for callers to parser_svc with, refuses to start. Dev mode (auth disabled) says so."""
    if settings.auth != "required":
        log.warning(
            "dev mode: no authentication, every call runs as one tenant",
            extra={"event": "startup.dev_mode"},
        )
        host = settings.http_listen.rpartition(":")[0].strip("[]")
        if settings.http_listen and host not in ("127.0.0.1", "::1", "localhost"):
            log.warning(
                "dev mode: the HTTP side listens on %s, not loopback only: anyone who reaches "
                "it may submit and read documents without a key",
                settings.http_listen,
                extra={"event": "startup.dev_mode_exposed"},
            )
        return
    missing = []
    if not len(GatewayAuth(settings).keys):
        missing.append("API keys (DOCPARSE_GATEWAY_API_KEYS or DOCPARSE_GATEWAY_API_KEYS_FILE)")
    if not settings.internal_token:
        missing.append("the internal token (DOCPARSE_GATEWAY_INTERNAL_TOKEN)")
    if missing:
        exit_on_startup_error(
            "gateway",
            error(
                ErrorReason.AUTH_NOT_CONFIGURED,
                f"DOCPARSE_GATEWAY_AUTH=required but {' and '.join(missing)} are missing: "
                "refusing to start (DOCPARSE_GATEWAY_AUTH=disabled for a local dev run)",
            ),
        )


def main() -> None:
    settings = load_settings("gateway", GatewaySettings)
    access_log = settings.access_log != "off"
    logs.setup_logging("gateway", settings.log_format, settings.log_level, access_log=access_log)
    check_files(settings)
    check_auth(settings)
    tracing.setup("gateway")  # on only when an OTLP endpoint is configured
    try:
        loops.run(serve(settings), settings.event_loop)
    finally:
        tracing.shutdown()


if __name__ == "__main__":
    main()
