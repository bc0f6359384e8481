"""A job's spans on the worker side: the worker continues the trace of the call that created
the job (the create stored that span's `traceparent` in the record, parser_svc/api/submit.py), with
the job's time in the queue and its run here as spans (the parse child's run is one more, made
by the worker around it). Nothing is read or made when tracing is off
(docparse_server/tracing.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from docparse.v1 import job_pb2
from docparse_server import tracing
from parser_svc.state.store import JobStore


async def trace_parent(store: JobStore, job_id: str) -> dict[str, str]:
    """The submitter's trace context from the job's record (one HMGET), or {} when off."""
    if not tracing.enabled():
        return {}
    return tracing.carrier_from(await store.job_fields(job_id, tracing.TRACE_KEYS))


@contextlib.contextmanager
def job_span(job_id: str, record: job_pb2.Job, parent: dict[str, str]) -> Iterator[None]:
    """`job.queued` (from the create to this claim: a retried job's includes its earlier
    attempts) and `job.run` around the body, as children of `parent`."""
    if not tracing.enabled():
        yield
        return
    attributes = {"docparse.job_id": job_id, "docparse.attempt": record.attempt}
    created_ns = record.create_time.ToNanoseconds()
    with tracing.span(
        "job.queued", parent=parent, attributes=attributes, start_time_ns=created_ns,
        kind="consumer",
    ):  # fmt: skip
        pass
    with tracing.span("job.run", parent=parent, attributes=attributes, kind="consumer"):
        yield
