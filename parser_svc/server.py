"""parser_svc process: the gRPC API and/or queue workers, with graceful shutdown.

SIGTERM: health goes NOT_SERVING, the worker stops taking jobs and finishes (or releases)
in-flight ones, open calls get `shutdown_grace_s` to end, then the process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal

import grpc
from grpc_health.v1 import health_pb2_grpc

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import parser_service_pb2
from docparse_server import gc_pacing, logs, loops, observability, serving, tracing
from docparse_server.errors import error
from docparse_server.flow_control import receive_window_options
from docparse_server.secret_files import check_secret_file
from docparse_server.serving import (
    ErrorInterceptor,
    InterceptorChain,
    ServedByInterceptor,
    add_health_and_reflection,
    set_serving,
)
from docparse_server.settings_load import load_settings
from docparse_server.tenancy import DEFAULT_TENANT
from docparse_server.tls import server_credentials
from parser_svc.api.callers import CallerInterceptor
from parser_svc.api.service import ParserService, add_parser_service
from parser_svc.observability import PARSER_METRICS, refresh_queue_depth
from parser_svc.settings import Settings
from parser_svc.state.caller_scope import current_tenant
from parser_svc.state.events import EventHub
from parser_svc.state.pipelined_reads import PipelinedReader
from parser_svc.state.redis_conn import RedisTarget
from parser_svc.state.redis_start_check import check_at_start
from parser_svc.state.store import JobStore
from parser_svc.webhooks.callbacks import check_config
from parser_svc.webhooks.dispatcher import DELIVERIES, Dispatcher
from parser_svc.work.blobs import BlobStore
from parser_svc.work.queue import JobQueue
from parser_svc.work.worker import ParseWorker

log = logging.getLogger("parser_svc")
SERVICE_NAME = parser_service_pb2.DESCRIPTOR.services_by_name["ParserService"].full_name
TLS_VARIABLES = ("DOCPARSE_TLS_CERT_FILE", "DOCPARSE_TLS_KEY_FILE")


def server_options(settings: Settings) -> list[tuple[str, int]]:
    message_limit = settings.max_upload_bytes + 1024 * 1024
    return [
        ("grpc.max_receive_message_length", message_limit),
        ("grpc.max_send_message_length", message_limit),
        ("grpc.max_connection_age_ms", settings.max_connection_age_ms),
        ("grpc.max_connection_age_grace_ms", settings.max_connection_age_grace_ms),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        *receive_window_options(settings.receive_window_bytes),
    ]


def grpc_server(settings: Settings) -> grpc.aio.Server:
    """The gRPC server with its interceptors and options; `serve` adds the services."""
    interceptors = [
        InterceptorChain(
            observability.RpcObserver(
                "parser_svc",
                tenant=current_tenant,
                quiet_reads=settings.access_log == "quiet_reads",
            ),
            ServedByInterceptor(),
            CallerInterceptor(settings.internal_token),
            ErrorInterceptor(),  # innermost: the others see the status it sets
        )
    ]
    return grpc.aio.server(
        interceptors=interceptors, options=[*server_options(settings), serving.EXCLUSIVE_PORT]
    )


def start_work(
    settings: Settings, store: JobStore, blobs: BlobStore
) -> tuple[ParseWorker | None, asyncio.Task[None] | None]:
    """The queue worker and the webhook dispatcher of a replica whose role runs jobs."""
    if settings.role not in ("all", "worker"):
        return None, None
    worker = ParseWorker(settings, store, blobs)
    worker.start()
    dispatcher = None
    if settings.webhook_secrets_file:  # without secrets no callback is ever accepted
        dispatcher = asyncio.create_task(Dispatcher(settings, store).run())
    return worker, dispatcher


async def serve(settings: Settings) -> None:
    await check_at_start(RedisTarget.of(settings), "parser_svc", settings.redis_timeout_s)
    reads = PipelinedReader.of(settings)
    store = JobStore.open(settings, reads)
    blobs = BlobStore(settings.blob_dir, settings.env)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    hub = EventHub(RedisTarget.of(settings), timeout_s=settings.redis_timeout_s)
    queue = JobQueue(settings)
    server = grpc_server(settings)
    add_parser_service(ParserService(settings, store, hub, queue, blobs), server)
    health = add_health_and_reflection(server, [SERVICE_NAME])
    # The port first: a replica started on a taken port exits (code 2) before its worker could
    # take a job from the queue and leave it to the lock expiry.
    port, health_port = await bind_ports(settings, server, health)
    worker, dispatcher = start_work(settings, store, blobs)
    await hub.start()
    await server.start()
    refresher = None
    metrics = (*PARSER_METRICS, DELIVERIES)
    if observability.start_metrics_server(settings.metrics_listen, metrics):
        refresher = asyncio.create_task(
            refresh_queue_depth(queue.counts, settings.queue_metrics_interval_s)
        )
    await set_serving(health, [SERVICE_NAME], True)
    log.info("parser_svc serving on port %d (role=%s, env=%s)", port, settings.role, settings.env)
    # Everything allocated so far (modules, descriptors, clients) lives as long as the process:
    # move it out of the collector's view, so full collections (a burst of new WatchJob
    # streams triggers one) walk only what calls allocate. With 1,000 streams opening, the
    # pause went from ~90 ms to ~50 ms (bench/README.md).
    gc.freeze()
    pacer = asyncio.create_task(
        gc_pacing.pace(settings.gc_freeze_every_s, settings.gc_full_every_s)
    )

    await stop.wait()
    pacer.cancel()
    log.info("parser_svc draining")
    await set_serving(health, [SERVICE_NAME], False)
    hub.close_streams()
    if worker is not None:
        await worker.close(settings.shutdown_grace_s)
    if dispatcher is not None:  # a delivery cut short is claimed, and retried after its timeout
        dispatcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await dispatcher
    await server.stop(settings.shutdown_grace_s)
    if health_port is not None:
        await health_port.stop(0)
    await hub.close()
    if refresher is not None:
        refresher.cancel()
    await queue.close()
    if reads is not None:
        await reads.aclose()
    await store.aclose()
    log.info("parser_svc stopped")


async def bind_ports(
    settings: Settings, server: grpc.aio.Server, health: object
) -> tuple[int, grpc.aio.Server | None]:
    """Binds the gRPC port (TLS when configured) and starts the plaintext port of
    `health_listen`: grpc.health.v1 and nothing else, answering what the main port's health
    service answers (SERVING, NOT_SERVING while draining). Exit 2 when either is taken."""
    credentials = server_credentials(settings.tls_cert_file, settings.tls_key_file, TLS_VARIABLES)
    port = serving.bind_grpc_or_exit("parser_svc", server, settings.listen, credentials)
    if not settings.health_listen:
        return port, None
    health_server = grpc.aio.server(options=[serving.EXCLUSIVE_PORT])
    health_pb2_grpc.add_HealthServicer_to_server(health, health_server)
    serving.bind_grpc_or_exit("parser_svc", health_server, settings.health_listen)
    await health_server.start()
    return port, health_server


def check_files(settings: Settings) -> None:
    """Fails closed before anything starts (exit 2, one error line): half a TLS pair, an
    unreadable certificate, or a webhook secrets file another local user could write."""
    try:
        server_credentials(settings.tls_cert_file, settings.tls_key_file, TLS_VARIABLES)
        if settings.webhook_secrets_file is not None:
            check_secret_file(
                settings.webhook_secrets_file,
                "DOCPARSE_WEBHOOK_SECRETS_FILE",
                ErrorReason.WEBHOOK_CONFIG_INVALID,
                "parser_svc",
            )
    except DocparseError as err:
        serving.exit_on_startup_error("parser_svc", err)


def check_identity(settings: Settings) -> None:
    """Fails closed: without the internal token any caller could claim any tenant, so a
    replica started without one refuses to start, unless dev mode is asked for by name."""
    if settings.internal_token:
        return
    if not settings.dev_mode:
        serving.exit_on_startup_error(
            "parser_svc",
            error(
                ErrorReason.INTERNAL_TOKEN_MISSING,
                "DOCPARSE_INTERNAL_TOKEN is not set: every call would run as one tenant. Set it "
                "to the gateway's DOCPARSE_GATEWAY_INTERNAL_TOKEN, or DOCPARSE_DEV_MODE=true for "
                "a local single-tenant run",
            ),
        )
    log.warning(
        "dev mode: no internal token, every call runs as the tenant %r",
        DEFAULT_TENANT,
        extra={"event": "startup.dev_mode"},
    )


def main() -> None:
    settings = load_settings("parser_svc", Settings)
    access_log = settings.access_log != "off"
    logs.setup_logging("parser_svc", settings.log_format, settings.log_level, access_log=access_log)
    check_files(settings)
    check_identity(settings)
    try:
        check_config(settings)
    except DocparseError as err:
        serving.exit_on_startup_error("parser_svc", err)
    tracing.setup("parser_svc")  # on only when an OTLP endpoint is configured
    try:
        loops.run(serve(settings), settings.event_loop)
    finally:
        tracing.shutdown()  # the last spans are sent before the process ends


if __name__ == "__main__":
    main()
