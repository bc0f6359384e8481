"""OpenTelemetry tracing of a job's path: W3C `traceparent` in, spans out over OTLP/HTTP.

Off by default, and then free: nothing here imports the OpenTelemetry SDK (or API) until
`setup()` finds an endpoint, and every hook is `if tracing.enabled():` (one global read) before
any other work. Configured by the standard variables (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else
`OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`) or `DOCPARSE_TRACING_ENDPOINT` (a full traces URL,
which wins); `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keep it off.

The trace context travels as plain strings (`traceparent`, `tracestate`): gRPC metadata and HTTP
headers by those names, and the job record's fields of the same names, so a worker continues the
submitter's trace from the record alone. `parse_traceparent` validates such a string without the
SDK (a malformed one is dropped, as the W3C spec says, never an error to the caller).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
TRACE_KEYS = (TRACEPARENT, TRACESTATE)

_TRACEPARENT_RE = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_TRUE = {"1", "true", "yes", "on"}

# The SDK tracer when tracing is on; None (the only state most processes ever see) when off.
_tracer: Any = None
_provider: Any = None


@dataclass(frozen=True, slots=True)
class TraceParent:
    trace_id: str
    span_id: str
    flags: str


def parse_traceparent(value: str | None) -> TraceParent | None:
    """A valid W3C traceparent, or None (absent or malformed: start a new trace instead)."""
    if not value or len(value) > 512:
        return None
    m = _TRACEPARENT_RE.match(value.strip().lower())
    if m is None:
        return None
    version, trace_id, span_id, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest):
        return None
    if trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return TraceParent(trace_id, span_id, flags)


def carrier_from(pairs: Mapping[str, str] | Any) -> dict[str, str]:
    """The trace keys of some headers / gRPC metadata (any mapping or iterable of pairs); only
    a valid traceparent is kept, and a tracestate only with it."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    found: dict[str, str] = {}
    for key, value in items or ():
        k = key.lower() if isinstance(key, str) else key
        if k in TRACE_KEYS and isinstance(value, str) and k not in found:
            found[k] = value
    if parse_traceparent(found.get(TRACEPARENT)) is None:
        return {}
    if len(found.get(TRACESTATE, "")) > 512:
        found.pop(TRACESTATE)
    return found


def endpoint_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The OTLP/HTTP traces URL the environment asks for, or None (tracing off)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return None
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    explicit = env.get("DOCPARSE_TRACING_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if explicit:
        return explicit.strip()
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if base:
        return base.rstrip("/") + "/v1/traces"
    return None


def enabled() -> bool:
    return _tracer is not None


def setup(service: str, *, env: Mapping[str, str] | None = None, exporter: Any = None) -> bool:
    """Turn tracing on for this process when configured (or when a test passes `exporter`,
    e.g. the SDK's InMemorySpanExporter, exported synchronously). Returns whether it is on."""
    global _tracer, _provider
    endpoint = endpoint_from_env(env)
    if exporter is None and endpoint is None:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    # service.instance.id is what x-served-by names: the host (a pod) and the process
    instance = f"{socket.gethostname()}/{os.getpid()}"
    resource = Resource.create({"service.name": service, "service.instance.id": instance})
    provider = TracerProvider(resource=resource)
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), schedule_delay_millis=500)
        )
    _provider = provider
    _tracer = provider.get_tracer("docparse")
    return True


def shutdown() -> None:
    """Flush and stop (a server's shutdown path); tracing is off afterwards."""
    global _tracer, _provider
    if _provider is not None:
        _provider.shutdown()
    _tracer = None
    _provider = None


def _context(carrier: Mapping[str, str] | None) -> Any:
    if not carrier:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract(carrier=dict(carrier))


@contextlib.contextmanager
def span(
    name: str,
    *,
    parent: Mapping[str, str] | None = None,
    attributes: Mapping[str, Any] | None = None,
    start_time_ns: int | None = None,
    kind: str = "internal",
) -> Iterator[Any]:
    """A span (made current), child of `parent` (a traceparent carrier) when given, else of the
    current span. Yields the span, or None when tracing is off (callers check before using)."""
    tracer = _tracer
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    with tracer.start_as_current_span(
        name,
        context=_context(parent),
        kind=getattr(SpanKind, kind.upper()),
        attributes=dict(attributes or {}),
        start_time=start_time_ns,
    ) as current:
        yield current


def current_carrier() -> dict[str, str]:
    """The current span's context as `traceparent`/`tracestate` strings (empty when off or
    outside a span): what goes into upstream metadata and the job record."""
    if _tracer is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    out: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(out)
    return out


def add_event(current: Any, name: str, attributes: Mapping[str, Any] | None = None) -> None:
    if current is not None:
        current.add_event(name, attributes=dict(attributes or {}))


def add_current_event(name: str, **attributes: Any) -> None:
    """An event on the current span (nothing when off)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().add_event(name, attributes=attributes)


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    """Attributes known only after the span began (a job id, a status); None when off."""
    if current is not None:
        current.set_attributes(dict(attributes))


def with_current_carrier(
    metadata: list[tuple[str, str | bytes]],
) -> list[tuple[str, str | bytes]]:
    """Outgoing gRPC metadata: the caller's trace keys replaced by the current span's (this
    process's span becomes the parent upstream), unchanged when tracing is off."""
    if _tracer is None:
        return metadata
    kept = [(k, v) for k, v in metadata if k not in TRACE_KEYS]
    return kept + list(current_carrier().items())
