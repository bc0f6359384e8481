"""One HTTP submit is one trace, across the gateway, the parser_svc replica that took the call,
and the worker (another replica) that ran the job and its parse child, exported over OTLP/HTTP
to a collector (a small receiver here, decoding the OTLP protobuf as a collector does).

The stack's two replicas split the roles (replica 0 serves only the API, replica 1 also runs
the workers), so a submit that the gateway sends to replica 0 is parsed on replica 1: its trace
can continue only through the job record, as it must in production."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2
from tests.conftest import make_stack
from tests.gateway.test_http import submit, wait_done
from tests.helpers import make_pdf, stub

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"
GRPC_CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
GRPC_CALLER = f"00-{GRPC_CALLER_TRACE}-b7ad6b7169203331-01"


@dataclass(frozen=True)
class Span:
    service: str
    instance: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]


class Collector(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP traces receiver: every span of every export request, decoded."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Receive)
        self.spans: list[Span] = []
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def add(self, body: bytes) -> None:
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for s in scope.spans:
                    attributes = {a.key: _value(a.value) for a in s.attributes}
                    span = Span(
                        resource.get("service.name", ""),
                        resource.get("service.instance.id", ""),
                        s.name,
                        s.trace_id.hex(),
                        s.span_id.hex(),
                        s.parent_span_id.hex(),
                        attributes,
                        [
                            (e.name, {a.key: _value(a.value) for a in e.attributes})
                            for e in s.events
                        ],
                    )
                    with self.lock:
                        self.spans.append(span)

    def trace_of(self, job_id: str) -> list[Span]:
        """The trace of the job's submit: the one where parser_svc's spans name the job (the
        gateway's reads of it name it too, each in a trace of its own)."""
        with self.lock:
            ids = {
                s.trace_id
                for s in self.spans
                if s.service == "parser_svc" and s.attributes.get("docparse.job_id") == job_id
            }
            return [s for s in self.spans if s.trace_id in ids]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class _Receive(http.server.BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        assert self.path == "/v1/traces"
        self.server.add(body)
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, collector: Collector) -> Iterator[LocalStack]:
    stack = make_stack(
        tmp_path_factory.mktemp("tracing"),
        replicas=2,
        gateways=1,
        extra_env={"DOCPARSE_TRACING_ENDPOINT": collector.endpoint},
    )
    stack.parsers[0].env["DOCPARSE_ROLE"] = "api"  # takes calls, runs no job
    with stack as running:
        yield running


EXPECTED = {
    ("parser_svc", "docparse.v1.ParserService/SubmitJob"),
    ("parser_svc", "job.queued"),
    ("parser_svc", "job.run"),
    ("parser_svc", "parse.child"),
}


def _complete_trace(collector: Collector, job_id: str, timeout_s: float = 30) -> list[Span]:
    """The job's spans once every expected one has arrived (exporters send in batches)."""
    deadline = time.monotonic() + timeout_s
    while True:
        spans = collector.trace_of(job_id)
        complete = {(s.service, s.name) for s in spans} >= EXPECTED
        if complete and any(s.service == "gateway" for s in spans):
            return spans
        if time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def test_one_http_submit_is_one_trace_across_gateway_replicas_worker_and_child(
    stack: LocalStack, collector: Collector
) -> None:
    address = stack.http_addresses[0]
    crossed = 0
    for n in range(4):  # the gateway sends submits round robin: two of them reach replica 0
        reply = submit(address, make_pdf(2, f"traced {n}"), f"t{n}.pdf")
        assert reply.status in (200, 202), reply.body
        job_id = json.loads(reply.body)["job_id"]
        assert wait_done(address, job_id)["state"] == "STATE_SUCCEEDED"

        spans = _complete_trace(collector, job_id)
        shown = [(s.service, s.name, s.instance) for s in spans]
        assert {(s.service, s.name) for s in spans} >= EXPECTED, shown
        assert len({s.trace_id for s in spans}) == 1, "one trace per submit"
        by_id = {s.span_id: s for s in spans}
        roots = [s for s in spans if s.parent_id not in by_id]
        assert [(r.service, r.name) for r in roots] == [("gateway", "POST /v1/jobs")], shown

        http_span = _one(spans, "POST /v1/jobs")
        call = _one(spans, "docparse.v1.ParserService/SubmitJob")
        queued, run, child = (_one(spans, n) for n in ("job.queued", "job.run", "parse.child"))
        assert call.parent_id == http_span.span_id, "the replica continues the gateway's span"
        assert queued.parent_id == run.parent_id == call.span_id, "the worker continues the call"
        assert child.parent_id == run.span_id
        assert child.attributes["docparse.pages"] == 2
        progress = [e for name, e in child.events if name == "parse.progress"]
        assert [(e["done"], e["total"]) for e in progress][-1] == (2, 2), child.events
        for span in (http_span, call, queued, run, child):
            assert span.attributes["docparse.job_id"] == job_id
        api_only, worker = (_instance(child) for child in stack.parsers)
        assert run.instance == child.instance == worker, "jobs run on replica 1 only"
        assert call.instance in (api_only, worker)
        crossed += call.instance == api_only
    assert crossed >= 1, "no submit reached the API-only replica: the test proved no crossing"


def _one(spans: list[Span], name: str) -> Span:
    [span] = [s for s in spans if s.name == name]
    return span


def _instance(child: Any) -> str:
    """service.instance.id of a replica: what x-served-by says, `<host>/<pid>`."""
    return f"{socket.gethostname()}/{child.proc.pid}"


def test_a_callers_traceparent_is_continued(stack: LocalStack, collector: Collector) -> None:
    address = stack.http_addresses[0]
    reply = submit(address, make_pdf(1, "caller"), "c.pdf", headers={"traceparent": CALLER})
    job_id = json.loads(reply.body)["job_id"]
    wait_done(address, job_id)
    spans = _complete_trace(collector, job_id)
    assert {(s.service, s.name) for s in spans} >= EXPECTED
    assert {s.trace_id for s in spans} == {CALLER_TRACE}
    [http_span] = [s for s in spans if s.service == "gateway"]
    assert http_span.parent_id == CALLER.split("-")[2]


def test_a_grpc_submit_through_the_gateway_is_one_trace(
    stack: LocalStack, collector: Collector
) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        request = parser_service_pb2.SubmitJobRequest(file_name="g.pdf", content=make_pdf(1))
        job = s.SubmitJob(request, metadata=(("traceparent", GRPC_CALLER),)).job
    address = stack.http_addresses[0]
    assert wait_done(address, job.job_id)["state"] == "STATE_SUCCEEDED"
    spans = _complete_trace(collector, job.job_id)
    assert {s.trace_id for s in spans} == {GRPC_CALLER_TRACE}
    [proxied] = [s for s in spans if s.service == "gateway"]
    assert proxied.name == "/docparse.v1.ParserService/SubmitJob"
    assert proxied.parent_id == GRPC_CALLER.split("-")[2]
    call = _one(spans, "docparse.v1.ParserService/SubmitJob")
    assert call.parent_id == proxied.span_id, "the replica continues the gateway's span"
    assert _one(spans, "job.run").parent_id == call.span_id
