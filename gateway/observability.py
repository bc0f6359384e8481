"""What the gateway tells its operators beyond the RPC metrics and access log both servers share
(`docparse_server.observability`): its upstream calls that failed, and who failed them.

`GATEWAY_METRICS` is created unregistered; `gateway.server` hands it to `start_metrics_server`,
so parser_svc, which never imports this module, does not export it.
"""

from __future__ import annotations

import grpc
from prometheus_client import Counter, Gauge
from prometheus_client.registry import Collector

from docparse_server.serving import SERVED_BY_KEY

UPSTREAM_ERRORS = Counter(
    "docparse_gateway_upstream_errors_total",
    "Failed upstream calls: origin=replica when a parser_svc replica answered with the error "
    "(it carries its x-served-by), origin=transport when no replica answered",
    ["code", "origin"],
    registry=None,
)

# Result renders (gateway/http/render_queue.py), per tenant.
RENDERS_RUNNING = Gauge(
    "docparse_gateway_renders_running",
    "Result renders (JSON, text, Markdown, HTML) running on this gateway's workers",
    ["tenant"],
    registry=None,
)
RENDERS_QUEUED = Gauge(
    "docparse_gateway_renders_queued",
    "Result renders waiting in their tenant's line for a render worker (nothing fetched yet)",
    ["tenant"],
    registry=None,
)
RENDERS_REFUSED = Counter(
    "docparse_gateway_renders_refused_total",
    "Result renders refused with TOO_MANY_RENDERS (HTTP 429): the tenant's or the gateway's "
    "limit on renders running and waiting",
    ["tenant"],
    registry=None,
)

GATEWAY_METRICS: tuple[Collector, ...] = (
    UPSTREAM_ERRORS,
    RENDERS_RUNNING,
    RENDERS_QUEUED,
    RENDERS_REFUSED,
)


def upstream_error(err: grpc.aio.AioRpcError) -> None:
    """Counts a failed upstream call of a proxy, telling a replica's answer from no answer."""
    answered = any(k == SERVED_BY_KEY for k, _ in err.trailing_metadata() or ())
    UPSTREAM_ERRORS.labels(err.code().name, "replica" if answered else "transport").inc()
