"""Every gateway span of a call that names a job carries `docparse.job_id` (a batch:
`docparse.batch_id`), as docs/operations.md says of every span: the gRPC calls (the id read
from the request, or from the answer of a call that creates the job or batch) and the HTTP
reads (the id in the path), exported over OTLP/HTTP to a collector."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from tests.conftest import make_stack
from tests.docparse_server.test_tracing_stack import Collector, Span
from tests.gateway.test_http import request, wait_done
from tests.helpers import eventually, make_pdf, stub

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    server = Collector()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, collector: Collector) -> Iterator[LocalStack]:
    env = {"DOCPARSE_TRACING_ENDPOINT": collector.endpoint}
    with make_stack(tmp_path_factory.mktemp("spans"), replicas=1, extra_env=env) as running:
        yield running


def gateway_span(collector: Collector, name: str, **attributes: str) -> Span | None:
    """The gateway's span `name` with these attributes, once it has been exported."""
    with collector.lock:
        spans = list(collector.spans)
    for span in spans:
        if (span.service, span.name) == ("gateway", name) and all(
            span.attributes.get(k) == v for k, v in attributes.items()
        ):
            return span
    return None


def exported(collector: Collector, name: str, key: str, value: str) -> Span:
    """Waits for the gateway's span `name` whose attribute `key` is `value`."""
    return eventually(
        lambda: gateway_span(collector, name, **{key: value}), 30, f"{name} {key}={value}"
    )


def test_grpc_calls_name_their_job_or_batch(stack: LocalStack, collector: Collector) -> None:
    channel, gateway = stub(stack.gateway_addresses[0])
    with channel:
        job = gateway.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name="a.pdf", content=make_pdf(1)),
            timeout=30,
        ).job
        gateway.GetStatus(parser_service_pb2.GetStatusRequest(job_id=job.job_id), timeout=30)
        files = [parser_service_pb2.BatchFile(file_name="b.pdf", content=make_pdf(1, "b"))]
        batch = gateway.CreateBatch(
            parser_service_pb2.CreateBatchRequest(files=files), timeout=30
        ).batch
        gateway.GetBatch(parser_service_pb2.GetBatchRequest(batch_id=batch.batch_id), timeout=30)
    service = "/docparse.v1.ParserService"  # the gateway names its spans by the method's path
    for name, key, value in [
        (f"{service}/SubmitJob", "docparse.job_id", job.job_id),  # from the answer
        (f"{service}/GetStatus", "docparse.job_id", job.job_id),  # from the request
        (f"{service}/CreateBatch", "docparse.batch_id", batch.batch_id),
        (f"{service}/GetBatch", "docparse.batch_id", batch.batch_id),
    ]:
        exported(collector, name, key, value)


def test_grpc_streams_get_a_span_naming_the_job_in_the_callers_trace(
    stack: LocalStack, collector: Collector
) -> None:
    trace = "5bf92f3577b34da6a3ce929d0e0e4737"
    caller = (("traceparent", f"00-{trace}-00f067aa0ba902b8-01"),)
    channel, gateway = stub(stack.gateway_addresses[0])
    with channel:
        job = gateway.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name="w.pdf", content=make_pdf(2, "w")),
            timeout=30,
        ).job
        watched = parser_service_pb2.WatchJobRequest(job_id=job.job_id)
        for event in gateway.WatchJob(watched, timeout=60, metadata=caller):
            if event.job.state == job_pb2.STATE_SUCCEEDED:
                break
        asked = parser_service_pb2.GetResultRequest(job_id=job.job_id)
        assert list(gateway.GetResult(asked, timeout=60, metadata=caller))
    for method in ("WatchJob", "GetResult"):
        span = exported(
            collector, f"/docparse.v1.ParserService/{method}", "docparse.job_id", job.job_id
        )
        assert span.trace_id == trace, f"{method}: not in the caller's trace"


def test_http_reads_name_their_job(stack: LocalStack, collector: Collector) -> None:
    address = stack.http_addresses[0]
    reply = request(address, "POST", "/v1/jobs?file_name=r.pdf&wait_ms=30000", make_pdf(2))
    job_id = json.loads(reply.body)["job_id"]
    assert wait_done(address, job_id)["state"] == "STATE_SUCCEEDED"
    assert request(address, "GET", f"/v1/jobs/{job_id}").status == 200
    assert request(address, "GET", f"/v1/jobs/{job_id}/result?format=text").status == 200
    missing = "0" * 32
    assert request(address, "GET", f"/v1/jobs/{missing}").status == 404
    for name, named in [
        ("GET /v1/jobs/{job_id}", job_id),
        ("GET /v1/jobs/{job_id}/result", job_id),
        ("GET /v1/jobs/{job_id}/events", job_id),
        ("GET /v1/jobs/{job_id}", missing),  # an error names the job it was about too
    ]:
        exported(collector, name, "docparse.job_id", named)
