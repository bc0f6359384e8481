"""What both servers tell their operators: JSON logs, Prometheus metrics, an access log per RPC.

- `setup_logging(service, fmt)`: one JSON object per line (`ts`, `level`, `logger`, `msg`,
  `service`, `replica`, `pid`, plus every `extra=` field such as `job_id`, `tenant`, `method`,
  `code`, `duration_ms`), or the old text lines with `fmt="text"`.
- `RpcObserver`: a grpc.aio server interceptor counting every call by method and final code
  (aborted calls included), timing it, and writing one access line with the job or batch id of
  the request, the ErrorInfo reason of a failure and, on the gateway, the replica that answered.
- `start_metrics_server(listen)`: Prometheus text format on `http://<listen>/metrics`, served
  from a thread, so a busy event loop still gets scraped.
- Job events (`job_created`, `job_claimed`, `job_finished`, ...): one call per event does both the
  log line and the metric, so they can never disagree.

Label values are always from small sets (methods, codes, states, reasons, tenants, content
types): never job ids, which belong in logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from google.rpc import error_details_pb2, status_pb2
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.registry import Collector

from docparse.errors import DocparseError
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
jobs_log = logging.getLogger("docparse.jobs")

# ---------------------------------------------------------------------------------------------
# Logging

# Attributes every LogRecord has; anything else on a record came from `extra=` and is emitted.
_RECORD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)
TEXT_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per line. `replica` is the host (the pod name on Kubernetes) and `pid`
    the process: together they are what `x-served-by` says (`<replica>/<pid>`)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service
        self.replica = socket.gethostname()
        self._second = -1
        self._second_text = ""

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:  # one strftime per second, not per line
            self._second = second
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        out: dict[str, Any] = {
            "ts": f"{self._second_text}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "service": self.service,
            "replica": self.replica,
            "pid": record.process,
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and not key.startswith("_") and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def setup_logging(
    service: str, fmt: str = "json", level: str = "INFO", *, access_log: bool = True
) -> None:
    """Replaces the root handlers with one stderr handler in the chosen format. Without
    `access_log`, the per-RPC lines (logger docparse.access) are dropped; job events stay."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    log.setLevel(logging.NOTSET if access_log else logging.WARNING)


# ---------------------------------------------------------------------------------------------
# Metrics. RPC metrics are registered at import (both servers use them); the others are created
# unregistered and each server registers its own set, so the gateway does not export parser
# gauges stuck at zero.

_RPC_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_PARSE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
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

JOBS_CREATED = Counter(
    "docparse_jobs_created_total",
    "Jobs created by SubmitJob and batches (deduplicated and replayed submits not counted)",
    ["tenant"],
    registry=None,
)
JOBS_FINISHED = Counter(
    "docparse_jobs_finished_total",
    "Terminal transitions written by this replica, by state and error reason",
    ["state", "reason"],
    registry=None,
)
JOBS_RETRIED = Counter(
    "docparse_jobs_retried_total",
    "Jobs handed back to the queue for another attempt, by reason",
    ["reason"],
    registry=None,
)
SWEEPER_REPAIRS = Counter(
    "docparse_sweeper_repairs_total",
    "What the sweeper repaired: jobs created but never queued (a lost reply or a replica that "
    "died between create and enqueue) that it enqueued, and uploads of jobs that were never "
    "created or have ended that it deleted",
    ["kind"],
    registry=None,
)
PARSE_SECONDS = Histogram(
    "docparse_parse_seconds",
    "Wall-clock seconds of one parse subprocess, by detected content type",
    ["content_type"],
    buckets=_PARSE_BUCKETS,
    registry=None,
)
QUEUE_JOBS = Gauge(
    "docparse_queue_jobs",
    "BullMQ jobs by queue state (the whole queue, as seen by this replica: use max, not sum)",
    ["state"],
    registry=None,
)
WATCH_STREAMS = Gauge(
    "docparse_watch_streams",
    "Open job/batch watchers on this replica (WatchJob, WatchBatch, SubmitJob waits)",
    registry=None,
)
REDIS_ERRORS = Counter(
    "docparse_redis_errors_total",
    "State store calls that failed (STATE_STORE_UNAVAILABLE or STATE_STORE_ERROR), by error",
    ["kind"],
    registry=None,
)
PUBSUB_RECONNECTS = Counter(
    "docparse_pubsub_reconnects_total",
    "Times the process's shared Redis pub/sub connection was lost and reopened",
    registry=None,
)
UPSTREAM_ERRORS = Counter(
    "docparse_gateway_upstream_errors_total",
    "Failed upstream calls: origin=replica when a parser_svc replica answered with the error "
    "(it carries its x-served-by), origin=transport when no replica answered",
    ["code", "origin"],
    registry=None,
)

PARSER_METRICS: tuple[Collector, ...] = (
    JOBS_CREATED,
    JOBS_FINISHED,
    JOBS_RETRIED,
    SWEEPER_REPAIRS,
    PARSE_SECONDS,
    QUEUE_JOBS,
    WATCH_STREAMS,
    REDIS_ERRORS,
    PUBSUB_RECONNECTS,
)
GATEWAY_METRICS: tuple[Collector, ...] = (UPSTREAM_ERRORS,)
QUEUE_STATES = ("waiting", "active", "delayed", "failed")


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


async def refresh_queue_depth(
    fetch: Callable[[], Awaitable[Mapping[str, int]]], interval_s: float
) -> None:
    """Keeps `docparse_queue_jobs` current: one count call per period (bounded cost however
    often Prometheus scrapes). Runs until cancelled; a failed count keeps the last values."""
    while True:
        try:
            counts = await fetch()
            for state in QUEUE_STATES:
                QUEUE_JOBS.labels(state).set(counts.get(state, 0))
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the store's own errors are counted where they happen
            logging.getLogger("docparse.metrics").debug("queue counts failed: %r", err)
        await asyncio.sleep(interval_s)


# ---------------------------------------------------------------------------------------------
# Job events: a log line and a metric per event.


def job_created(
    job_id: str,
    *,
    tenant: str,
    content_type: str,
    size_bytes: int,
    batch_id: str = "",
    file_name: str = "",
) -> None:
    JOBS_CREATED.labels(tenant).inc()
    jobs_log.info(
        "job %s created (%s, %d bytes)",
        job_id,
        content_type,
        size_bytes,
        extra={
            "event": "job.created",
            "job_id": job_id,
            "tenant": tenant,
            "content_type": content_type,
            "size_bytes": size_bytes,
            "file_name": file_name,
            **({"batch_id": batch_id} if batch_id else {}),
        },
    )


def job_claimed(job_id: str, attempt: int) -> None:
    jobs_log.info(
        "job %s claimed, attempt %d",
        job_id,
        attempt,
        extra={"event": "job.claimed", "job_id": job_id, "attempt": attempt},
    )


def job_retried(job_id: str, attempt: int, reason: str) -> None:
    JOBS_RETRIED.labels(reason).inc()
    jobs_log.warning(
        "job %s attempt %d ended %s; queued for another attempt",
        job_id,
        attempt,
        reason,
        extra={"event": "job.retried", "job_id": job_id, "attempt": attempt, "reason": reason},
    )


def job_finished(
    job_id: str,
    state: str,
    reason: str = "",
    *,
    attempt: int = 0,
    create_ms: int = 0,
) -> None:
    """A terminal write that this process made (SUCCEEDED, FAILED, CANCELLED)."""
    JOBS_FINISHED.labels(state, reason).inc()
    extra: dict[str, Any] = {"event": "job.finished", "job_id": job_id, "state": state}
    if reason:
        extra["reason"] = reason
    if attempt:
        extra["attempt"] = attempt
    if create_ms:
        extra["duration_ms"] = max(0, int(time.time() * 1000) - create_ms)
    jobs_log.info("job %s finished %s %s", job_id, state, reason, extra=extra)


def parse_observed(content_type: str, seconds: float) -> None:
    PARSE_SECONDS.labels(content_type or "unknown").observe(seconds)


def redis_error(err: BaseException) -> None:
    REDIS_ERRORS.labels(type(err).__name__).inc()


# ---------------------------------------------------------------------------------------------
# The RPC interceptor

_QUIET_SERVICES = ("grpc.health.v1.", "grpc.reflection.")
_ID_FIELDS = ("job_id", "batch_id")


def _ids_of(message: Message) -> dict[str, str]:
    out = {}
    for name in _ID_FIELDS:
        value = getattr(message, name, "")
        if value and isinstance(value, str):
            out[name] = value
    return out


def _response_ids(message: Any, parse_raw: Callable[[bytes], Message] | None) -> dict[str, str]:
    """job_id / batch_id of a unary response that carries a job or batch (SubmitJob, ...)."""
    if parse_raw is not None and isinstance(message, bytes):
        try:
            message = parse_raw(message)
        except DecodeError:
            return {}
    if not isinstance(message, Message):
        return {}
    for name in ("job", "batch"):
        if name in message.DESCRIPTOR.fields_by_name and message.HasField(name):
            return _ids_of(getattr(message, name))
    return {}


Parsers = dict[str, Callable[[bytes], Message]]


def _raw_parsers(services: Iterable[ServiceDescriptor]) -> tuple[Parsers, Parsers]:
    """For a proxy that sees raw bytes: request parsers for the methods whose request carries
    a job_id or batch_id and nothing big (never an upload): GetStatus, WatchJob, GetBatch, ...;
    response parsers for the other unary methods answering with a job or batch: the ones that
    create them (SubmitJob, CreateBatch, UploadBatch)."""
    methods = [(f"/{s.full_name}/{m.name}", m) for s in services for m in s.methods]

    def small_with_id(desc: Descriptor) -> bool:
        fields = desc.fields_by_name
        return any(name in fields for name in _ID_FIELDS) and not any(
            f.type in (FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE)
            for f in desc.fields
        )

    requests: Parsers = {
        name: GetMessageClass(method.input_type).FromString
        for name, method in methods
        if not method.client_streaming and small_with_id(method.input_type)
    }
    responses: Parsers = {
        name: GetMessageClass(method.output_type).FromString
        for name, method in methods
        if name not in requests
        and not method.server_streaming
        and any(field in method.output_type.fields_by_name for field in ("job", "batch"))
    }
    return requests, responses


def _reason(trailers: Iterable[tuple[str, Any]] | None) -> str:
    """The ErrorInfo reason of a rich error status in `trailers`, "" when there is none."""
    for key, value in trailers or ():
        if key != "grpc-status-details-bin":
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except (DecodeError, TypeError):
            return ""
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return str(info.reason)
    return ""


class _Method:
    """What the observer needs for one method, computed when its handler is first wrapped:
    labels, log level, raw parsers and the metric children (no `labels()` lookup per call)."""

    __slots__ = (
        "in_flight",
        "labels",
        "level",
        "parse_raw",
        "parse_raw_response",
        "seconds",
        "totals",
    )

    def __init__(
        self,
        labels: tuple[str, str, str],
        level: int,
        parse_raw: Callable[[bytes], Message] | None,
        parse_raw_response: Callable[[bytes], Message] | None,
    ) -> None:
        self.labels = labels
        self.level = level
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
        if isinstance(request, Message):
            return _ids_of(request)
        if self.parse_raw is not None and isinstance(request, bytes):
            with contextlib.suppress(DecodeError):
                return _ids_of(self.parse_raw(request))
        return {}


class RpcObserver(WrappingInterceptor):
    """Counts, times and logs every call of a grpc.aio server.

    `service` names the server in metrics and logs ("parser_svc", "gateway"). `raw_services`:
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
    ) -> None:
        super().__init__()
        self.service = service
        self._raw_requests, self._raw_responses = _raw_parsers(raw_services)
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
        )
        observe = self._observe

        def unary(fn: Any) -> Any:
            async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                start = time.perf_counter()
                peer = _peer(context) if log.isEnabledFor(level) else None
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
                    observe(m, context, start, error, peer, request, response)

            return call

        def stream(fn: Any) -> Any:
            async def call(
                request: Any, context: grpc.aio.ServicerContext[Any, Any]
            ) -> AsyncIterator[Any]:
                start = time.perf_counter()
                peer = _peer(context) if log.isEnabledFor(level) else None
                m.in_flight.inc()
                error: BaseException | None = None
                try:
                    async for item in fn(request, context):
                        yield item
                except BaseException as err:
                    error = err
                    raise
                finally:
                    observe(m, context, start, error, peer, request, _NO_RESPONSE)

            return call

        return rebuild_handler(handler, unary, stream)

    def _observe(
        self,
        m: _Method,
        context: grpc.aio.ServicerContext[Any, Any],
        start: float,
        error: BaseException | None,
        peer: dict[str, str] | None,
        request: Any,
        response: Any,
    ) -> None:
        """`peer` None: no access line for this call. `response` _NO_RESPONSE: a stream."""
        seconds = time.perf_counter() - start
        code = _final_code(context, error)
        m.in_flight.dec()
        m.total(code).inc()
        m.seconds.observe(seconds)
        labels = m.labels
        if code == "OK":
            if peer is None:
                return
            reason = ""
            trailers = _trailing_metadata(context)
        else:
            trailers = _trailing_metadata(context)
            reason = _reason(trailers)
            RPC_ERRORS.labels(*labels, code, reason).inc()
            if peer is None:
                return
        found = m.ids(request)
        if not found and response is not _NO_RESPONSE:
            found = _response_ids(response, m.parse_raw_response)
        extra: dict[str, Any] = {
            "event": "rpc",
            "method": labels[2],
            "code": code,
            "duration_ms": round(seconds * 1000, 2),
            **found,
            **peer,
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
        log.log(
            m.level,
            "%s %s %s%.1f ms",
            labels[2],
            code,
            f"{reason} " if reason else "",
            seconds * 1000,
            extra=extra,
        )


_NO_RESPONSE = object()


def _peer(context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str]:
    """Read while the call is alive: context.peer() on a call the client already dropped (a
    closed channel, a connection cut by max_connection_age) dereferences a freed grpc_call and
    kills the process with SIGSEGV (grpcio 1.85)."""
    try:
        return {"peer": context.peer()}
    except Exception:
        return {}


def _trailing_metadata(context: grpc.aio.ServicerContext[Any, Any]) -> tuple[tuple[str, Any], ...]:
    try:
        return tuple(context.trailing_metadata() or ())
    except Exception:
        return ()


def _final_code(context: grpc.aio.ServicerContext[Any, Any], error: BaseException | None) -> str:
    """The status the client gets: what abort()/set_code() set, else from the way it ended."""
    try:
        code = context.code()
    except Exception:
        code = None
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int):
        for member in grpc.StatusCode:
            if member.value[0] == code:
                return member.name
    if error is None:
        return "OK"
    if isinstance(error, asyncio.CancelledError):
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            return "DEADLINE_EXCEEDED"
        return "CANCELLED"
    return "UNKNOWN"


def upstream_error(err: grpc.aio.AioRpcError) -> None:
    """Counts a failed upstream call of a proxy, telling a replica's answer from no answer."""
    answered = any(k == SERVED_BY_KEY for k, _ in err.trailing_metadata() or ())
    UPSTREAM_ERRORS.labels(err.code().name, "replica" if answered else "transport").inc()
