"""The job (or batch) a gateway gRPC span is about, as the span attributes `docparse.job_id` and
`docparse.batch_id`: read from the request of a call that names one (GetStatus, CancelJob,
GetBatch, ...) or from the answer of one that creates it (SubmitJob, CreateBatch). The gateway
forwards raw bytes; only these small messages are decoded, and only while tracing is on (the
access line's decoders, docparse_server/access_fields.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from google.protobuf.descriptor import ServiceDescriptor

from docparse_server.access_fields import raw_parsers, request_ids, response_ids


def _attributes(ids: dict[str, str]) -> dict[str, str]:
    return {f"docparse.{name}": value for name, value in ids.items()}


class SpanIds:
    def __init__(self, services: Iterable[ServiceDescriptor]) -> None:
        self._requests, self._responses = raw_parsers(services)

    def of_request(self, method: str, request: Any) -> dict[str, str]:
        """`docparse.job_id` / `docparse.batch_id` of a request that names one; {} otherwise."""
        return _attributes(request_ids(request, self._requests.get(method)))

    def of_response(self, method: str, response: Any) -> dict[str, str]:
        """Those of the job or batch a call created (its answer); {} for other calls."""
        parse = self._responses.get(method)
        return _attributes(response_ids(response, parse)) if parse is not None else {}
