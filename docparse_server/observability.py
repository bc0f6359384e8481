"""What both servers tell their operators: RPC metrics and an access log line per RPC.

- The log lines themselves (JSON or text, `setup_logging`): docparse_server.logs.
- `RpcObserver`: a grpc.aio server interceptor counting every call by method and final code
  (aborted calls included), timing it, and writing one access line with the job or batch id of
  the request, the ErrorInfo reason of a failure and, on the gateway, the replica that answered.
  What it reads from a call for that line is in `access_fields`.
- `start_metrics_server(listen, collectors)`: Prometheus text format on
  `http://<listen>/metrics`, served from a thread, so a busy event loop still gets scraped.

Only the RPC metrics live here (registered at import). Each service keeps its own metrics,
unregistered until its server hands them to `start_metrics_server`: parser_svc's jobs, queue,
parses and job events in `parser_svc.observability`, the gateway's upstream errors in
`gateway.observability`. So importing this module exports neither service's metrics.

Label values are always from small sets (methods, codes, reasons): never job ids, which belong
in logs.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.registry import Collector

from docparse.errors import DocparseError
from docparse_server.access_fields import (
    error_reason,
    final_code,
    peer,
    raw_parsers,
    request_ids,
    response_ids,
    trailing_metadata,
)
from docparse_server.logs import JsonFormatter, direct_handler
from docparse_server.serving import (
    SERVED_BY_KEY,
    Handler,
    WrappingInterceptor,
    binding,
    exit_cannot_listen,
    rebuild_handler,
    served_by,
)

log = logging.getLogger("docparse.access")


# ---------------------------------------------------------------------------------------------
# Metrics. The RPC metrics are registered at import (both servers use them); each service's
# own are created unregistered in its package and registered by its server (through
# start_metrics_server), so the gateway does not export parser gauges stuck at zero.

_RPC_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_RPC_LABELS = ("service", "grpc_service", "method")

RPC_TOTAL = Counter(
    "docparse_rpc_total",
    "gRPC calls handled, by server (service), method and final status code",
    [*_RPC_LABELS, "code"],
)
RPC_SECONDS = Histogram(
    "docparse_rpc_seconds",
    "gRPC call duration in seconds (streams: until the stream ends)",
    _RPC_LABELS,
    buckets=_RPC_BUCKETS,
)
RPC_ERRORS = Counter(
    "docparse_rpc_errors_total",
    "gRPC calls that ended with an error, by code and ErrorInfo reason ('' when none: an error "
    "that did not come from docparse code, e.g. a transport failure or a deadline)",
    [*_RPC_LABELS, "code", "reason"],
)
RPC_IN_FLIGHT = Gauge(
    "docparse_rpc_in_flight", "gRPC calls in progress (open streams included)", _RPC_LABELS
)


def start_metrics_server(listen: str, collectors: Iterable[Collector] = ()) -> int:
    """Registers `collectors` and serves every metric on `http://<listen>/metrics` from a
    daemon thread. Returns the port (useful with port 0). `listen` empty: nothing, returns 0.
    A port that is taken ends the process (exit code 2, one error line naming the holder)."""
    for collector in collectors:
        with contextlib.suppress(ValueError):  # already registered (a second call)
            REGISTRY.register(collector)
    if not listen:
        return 0
    host, _, port = listen.rpartition(":")
    try:
        with binding(listen):  # a taken port: exit 2 naming it, as for the gRPC port
            server, _thread = start_http_server(int(port), addr=host.strip("[]") or "0.0.0.0")
    except DocparseError as err:
        exit_cannot_listen("docparse.metrics", err)
    bound: int = server.server_address[1]
    logging.getLogger("docparse.metrics").info(
        "metrics on http://%s:%d/metrics", host or "0.0.0.0", bound
    )
    return bound


# ---------------------------------------------------------------------------------------------
# The RPC interceptor

_QUIET_SERVICES = ("grpc.health.v1.", "grpc.reflection.")


def is_quiet_read(method: str, handler: Handler) -> bool:
    """A unary read of the docparse API (GetStatus, GetBatch, ListJobs): what clients poll."""
    name = method.rpartition("/")[2]
    unary = not handler.request_streaming and not handler.response_streaming
    return unary and method.startswith("/docparse.") and name.startswith(("Get", "List"))


class _Method:
    """What the observer needs for one method, computed when its handler is first wrapped:
    labels, log level, raw parsers and the metric children (no `labels()` lookup per call)."""

    __slots__ = (
        "in_flight",
        "labels",
        "level",
        "parse_raw",
        "parse_raw_response",
        "quiet_ok",
        "seconds",
        "totals",
    )

    def __init__(
        self,
        labels: tuple[str, str, str],
        level: int,
        parse_raw: Callable[[bytes], Message] | None,
        parse_raw_response: Callable[[bytes], Message] | None,
        quiet_ok: bool = False,
    ) -> None:
        self.labels = labels
        self.level = level
        # No access line when the call succeeds (a quiet read): its peer is not read either.
        self.quiet_ok = quiet_ok
        self.parse_raw = parse_raw
        self.parse_raw_response = parse_raw_response
        self.in_flight = RPC_IN_FLIGHT.labels(*labels)
        self.seconds = RPC_SECONDS.labels(*labels)
        self.totals: dict[str, Any] = {}

    def total(self, code: str) -> Any:
        child = self.totals.get(code)
        if child is None:
            child = self.totals[code] = RPC_TOTAL.labels(*self.labels, code)
        return child

    def ids(self, request: Any) -> dict[str, str]:
        return request_ids(request, self.parse_raw)


class RpcObserver(WrappingInterceptor):
    """Counts, times and logs every call of a grpc.aio server.

    `service` names the server in metrics and logs ("parser_svc", "gateway"). `quiet_reads`:
    no access line for a successful unary read (`is_quiet_read`: the polls, which are most of
    a busy server's calls and about a sixth of its CPU per call with their line; bench/README.md,
    GetStatus pass 8); a failed one still gets its line, without the peer. `raw_services`:
    for a server whose handlers get raw bytes (the gateway), the services whose requests may be
    decoded, cheaply, to log their job_id/batch_id. `tenant`: returns the caller's tenant after
    the handler ran (a context variable an inner interceptor set), or None.

    The wrapped handler is built once per method (`WrappingInterceptor`). The peer, the ids and
    the trailers are read only for what needs them: the access line (when its logger is
    enabled for the method's level at the start of the call) and the reason of an error.
    """

    def __init__(
        self,
        service: str,
        *,
        raw_services: Iterable[ServiceDescriptor] = (),
        tenant: Callable[[], str | None] | None = None,
        quiet_reads: bool = False,
    ) -> None:
        super().__init__()
        self.service = service
        self._quiet_reads = quiet_reads
        self._raw_requests, self._raw_responses = raw_parsers(raw_services)
        # A server that forwards raw bytes is a proxy: only its trailers can name another
        # process (the replica that answered); another server's name only itself.
        self._proxy = bool(self._raw_requests or self._raw_responses)
        self._tenant = tenant
        self._me = served_by()

    def wrap(self, handler: Handler, method: str) -> Handler:
        grpc_service, _, name = method.lstrip("/").rpartition("/")
        level = logging.DEBUG if grpc_service.startswith(_QUIET_SERVICES) else logging.INFO
        m = _Method(
            (self.service, grpc_service, name),
            level,
            self._raw_requests.get(method),
            self._raw_responses.get(method),
            quiet_ok=self._quiet_reads and is_quiet_read(method, handler),
        )
        observe = self._observe
        read_peer = not m.quiet_ok

        def unary(fn: Any) -> Any:
            async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                start = time.perf_counter()
                caller = peer(context) if read_peer and log.isEnabledFor(level) else None
                m.in_flight.inc()
                error: BaseException | None = None
                response = None
                try:
                    response = await fn(request, context)
                    return response
                except BaseException as err:
                    error = err
                    raise
                finally:
                    observe(m, context, start, error, caller, request, response)

            return call

        def stream(fn: Any) -> Any:
            async def call(
                request: Any, context: grpc.aio.ServicerContext[Any, Any]
            ) -> AsyncIterator[Any]:
                start = time.perf_counter()
                caller = peer(context) if log.isEnabledFor(level) else None
                m.in_flight.inc()
                error: BaseException | None = None
                try:
                    async for item in fn(request, context):
                        yield item
                except BaseException as err:
                    error = err
                    raise
                finally:
                    observe(m, context, start, error, caller, request, _NO_RESPONSE)

            return call

        return rebuild_handler(handler, unary, stream)

    def _observe(
        self,
        m: _Method,
        context: grpc.aio.ServicerContext[Any, Any],
        start: float,
        error: BaseException | None,
        caller: dict[str, str] | None,
        request: Any,
        response: Any,
    ) -> None:
        """`caller` None (peer not read): no access line. `response` _NO_RESPONSE: a stream."""
        seconds = time.perf_counter() - start
        code = final_code(context, error)
        m.in_flight.dec()
        m.total(code).inc()
        m.seconds.observe(seconds)
        labels = m.labels
        if code == "OK":
            if caller is None:
                return
            reason = ""
            trailers = trailing_metadata(context) if self._proxy else ()
        else:
            trailers = trailing_metadata(context)
            reason = error_reason(trailers)
            RPC_ERRORS.labels(*labels, code, reason).inc()
            if caller is None:
                if not (m.quiet_ok and log.isEnabledFor(m.level)):
                    return
                caller = {}  # a quiet read that failed: its line, without the peer
        found = m.ids(request)
        if not found and response is not _NO_RESPONSE:
            found = response_ids(response, m.parse_raw_response)
        extra: dict[str, Any] = {
            "event": "rpc",
            "method": labels[2],
            "code": code,
            "duration_ms": round(seconds * 1000, 2),
            **found,
            **caller,
        }
        if reason:
            extra["reason"] = reason
        tenant = self._tenant() if self._tenant is not None else None
        if tenant:
            extra["tenant"] = tenant
        me = self._me
        for key, value in trailers:
            if key == SERVED_BY_KEY and value != me:  # a proxy: the replica that answered
                extra["upstream"] = str(value)
                break
        args = (labels[2], code, f"{reason} " if reason else "", seconds * 1000)
        _access_line(m.level, args, extra)


def _access_line(level: int, args: tuple[str, str, str, float], extra: dict[str, Any]) -> None:
    """Writes one access line: straight to the server's own JSON handler when that is all a
    line would meet (`direct_handler`), through the logging machinery otherwise."""
    handler = direct_handler(log, level)
    if handler is not None:  # the server's own set-up: the line without a LogRecord
        formatter: JsonFormatter = handler.formatter  # type: ignore[assignment]
        line = formatter.format_now(level, log.name, _ACCESS_MSG % args, extra)
        with handler.lock or contextlib.nullcontext():
            try:
                handler.stream.write(line + handler.terminator)
                handler.flush()
                return
            except Exception:  # as StreamHandler.emit: reported, never raised
                pass
    # Logger.log without its findCaller (a walk up the stack for a file and line that no
    # formatter of ours prints): about 3 of the access line's 17 us (bench/README.md).
    log.handle(log.makeRecord(log.name, level, "", 0, _ACCESS_MSG, args, None, extra=extra))


_NO_RESPONSE = object()
_ACCESS_MSG = "%s %s %s%.1f ms"
