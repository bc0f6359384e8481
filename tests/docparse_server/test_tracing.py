"""docparse_server.tracing: W3C trace context handling and spans, in process (InMemorySpanExporter).

The full path (gateway -> parser_svc -> worker -> child over OTLP) is in
tests/docparse_server/test_tracing_stack.py; these check the module its hooks use: off costs
nothing (no SDK
import), on continues the caller's trace.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from docparse_server import tracing

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
CALLER = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (CALLER, True),
        (CALLER.upper(), True),
        (f"01-{CALLER_TRACE}-{CALLER_SPAN}-01-future", True),
        (f"00-{CALLER_TRACE}-{CALLER_SPAN}-01-extra", False),
        (f"ff-{CALLER_TRACE}-{CALLER_SPAN}-01", False),
        (f"00-{'0' * 32}-{CALLER_SPAN}-01", False),
        (f"00-{CALLER_TRACE}-{'0' * 16}-01", False),
        ("00-xyz-00f067aa0ba902b7-01", False),
        ("", False),
        (None, False),
    ],
)
def test_traceparent_validation(value: str | None, ok: bool) -> None:
    parsed = tracing.parse_traceparent(value)
    assert (parsed is not None) == ok
    if parsed is not None:
        assert parsed.trace_id == CALLER_TRACE


def test_carrier_keeps_only_a_valid_context() -> None:
    metadata = [("authorization", "x"), ("traceparent", CALLER), ("tracestate", "a=1")]
    assert tracing.carrier_from(metadata) == {"traceparent": CALLER, "tracestate": "a=1"}
    assert tracing.carrier_from({"Traceparent": CALLER}) == {"traceparent": CALLER}
    assert tracing.carrier_from({"traceparent": "bogus", "tracestate": "a=1"}) == {}


def test_endpoint_from_env() -> None:
    assert tracing.endpoint_from_env({}) is None
    base = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    assert tracing.endpoint_from_env(base) == "http://collector:4318/v1/traces"
    traces = {**base, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/x"}
    assert tracing.endpoint_from_env(traces) == "http://t:4318/x"
    ours = {**traces, "DOCPARSE_TRACING_ENDPOINT": "http://d:4318/v1/traces"}
    assert tracing.endpoint_from_env(ours) == "http://d:4318/v1/traces"
    assert tracing.endpoint_from_env({**ours, "OTEL_SDK_DISABLED": "true"}) is None
    assert tracing.endpoint_from_env({**ours, "OTEL_TRACES_EXPORTER": "none"}) is None


def test_off_by_default_imports_no_sdk() -> None:
    code = (
        "import sys\n"
        "from docparse_server import tracing\n"
        "assert not tracing.setup('t', env={})\n"
        f"with tracing.span('x', parent={{'traceparent': {CALLER!r}}}) as s:\n"
        "    assert s is None and tracing.current_carrier() == {}\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.fixture
def exporter() -> Iterator[object]:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mem = InMemorySpanExporter()
    assert tracing.setup("test", env={}, exporter=mem)
    yield mem
    tracing.shutdown()


def test_spans_continue_the_callers_trace(exporter: object) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    assert isinstance(exporter, InMemorySpanExporter)
    with tracing.span("SubmitJob", parent={"traceparent": CALLER}, kind="server") as outer:
        carrier = tracing.current_carrier()
        outer.set_attribute("docparse.job_id", "j1")
    # What a worker does later with the record's field: a child of the submit span.
    with tracing.span("queue_wait", parent=carrier, start_time_ns=1) as wait:
        tracing.add_event(wait, "stage", {"stage": "open"})
    submit, queued = exporter.get_finished_spans()
    assert f"{submit.context.trace_id:032x}" == CALLER_TRACE
    assert submit.parent is not None and f"{submit.parent.span_id:016x}" == CALLER_SPAN
    assert dict(submit.attributes or {})["docparse.job_id"] == "j1"
    assert queued.context.trace_id == submit.context.trace_id
    assert queued.parent is not None and queued.parent.span_id == submit.context.span_id
    assert queued.start_time == 1
    assert [e.name for e in queued.events] == ["stage"]
    assert tracing.parse_traceparent(carrier["traceparent"]) is not None
