"""What parser_svc tells its operators beyond the RPC metrics and access log both servers share
(`docparse_server.observability`): its own Prometheus metrics and the job events.

- Metrics of jobs (created, finished, retried), parse durations, the queue depth, open
  watchers, sweeper repairs and the state store's errors. They are created unregistered:
  `PARSER_METRICS` is what `parser_svc.server` hands to `start_metrics_server`, so merely
  importing this module exports none of them.
- Job events (`job_created`, `job_claimed`, `job_finished`, ...): one call per event does both
  the log line (logger docparse.jobs) and the metric, so they can never disagree.

Label values are always from small sets (states, reasons, tenants, content types): never job
ids, which belong in logs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.registry import Collector

jobs_log = logging.getLogger("docparse.jobs")

_PARSE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

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
PARSE_PROCESSES = Counter(
    "docparse_parse_processes_total",
    "Processes that read the pages of finished parses, by content type: above "
    "docparse_parse_seconds_count when long PDFs were read in page ranges on free cores",
    ["content_type"],
    registry=None,
)
PARSE_CHILDREN = Counter(
    "docparse_parse_children_total",
    "Parse children by how they started: start=spare (readied while the worker was idle: "
    "DOCPARSE_SPARE_AFTER_IDLE_MS), forked (when the job came), spawned (a fresh interpreter)",
    ["start"],
    registry=None,
)
QUEUE_JOBS = Gauge(
    "docparse_queue_jobs",
    "BullMQ jobs by queue state (the whole queue, as seen by this replica: use max, not sum)",
    ["state"],
    registry=None,
)
ADMISSIONS = Counter(
    "docparse_admissions_total",
    "Jobs fair admission let into the queue (parser_svc/state/admission.py), by lane",
    ["lane"],
    registry=None,
)
TENANT_QUEUED = Gauge(
    "docparse_tenant_queued_jobs",
    "Each tenant's jobs waiting for a parse slot (pushed, not yet claimed), as the sweeping "
    "replica last read them (use max, not sum)",
    ["tenant"],
    registry=None,
)
TENANT_RUNNING = Gauge(
    "docparse_tenant_running_jobs",
    "Each tenant's jobs running (claimed by a worker, active in the queue), as the sweeping "
    "replica last read them (use max, not sum)",
    ["tenant"],
    registry=None,
)
SUBMITS_THROTTLED = Counter(
    "docparse_submits_throttled_total",
    "Submit calls (SubmitJob, CreateBatch, UploadBatch) this replica refused with RATE_LIMITED, "
    "by tenant and reason: the key's limit that refused it (max_queued_jobs, submits_per_minute)",
    ["tenant", "reason"],
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
PUBSUB_LATE_SUBSCRIBES = Counter(
    "docparse_pubsub_late_subscribes_total",
    "Watches let in before Redis confirmed their subscription (they poll until it comes)",
    registry=None,
)
READS_THROTTLED = Counter(
    "docparse_reads_throttled_total",
    "Reads refused with RATE_LIMITED by this replica's per-tenant read limits "
    "(parser_svc/api/read_limits.py), by tenant and method",
    ["tenant", "method"],
    registry=None,
)
WEBHOOK_SLOTS = Gauge(
    "docparse_webhook_deliveries_in_flight",
    "Webhook deliveries this replica's dispatcher has on the wire, by tenant",
    ["tenant"],
    registry=None,
)
WEBHOOK_HELD_BACK = Counter(
    "docparse_webhook_deliveries_held_back_total",
    "Due webhook deliveries left for later: the tenant's or the host's concurrency cap was "
    "full (cap=tenant, cap=host), or the host's circuit was open after timeouts (cap=circuit)",
    ["tenant", "cap"],
    registry=None,
)

PARSER_METRICS: tuple[Collector, ...] = (
    JOBS_CREATED,
    JOBS_FINISHED,
    JOBS_RETRIED,
    SWEEPER_REPAIRS,
    PARSE_SECONDS,
    PARSE_PROCESSES,
    PARSE_CHILDREN,
    QUEUE_JOBS,
    ADMISSIONS,
    TENANT_QUEUED,
    TENANT_RUNNING,
    SUBMITS_THROTTLED,
    WATCH_STREAMS,
    REDIS_ERRORS,
    PUBSUB_RECONNECTS,
    PUBSUB_LATE_SUBSCRIBES,
    READS_THROTTLED,
    WEBHOOK_SLOTS,
    WEBHOOK_HELD_BACK,
)
QUEUE_STATES = ("waiting", "active", "delayed", "failed")


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


def tenant_jobs(jobs: Iterable[tuple[str, int, int]]) -> None:
    """The per-tenant gauges from one read of fair admission's state: (tenant, queued, running)
    for each tenant with jobs; a tenant left out has none (its series go)."""
    TENANT_QUEUED.clear()
    TENANT_RUNNING.clear()
    for tenant, queued, running in jobs:
        if queued:
            TENANT_QUEUED.labels(tenant).set(queued)
        if running:
            TENANT_RUNNING.labels(tenant).set(running)


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


def parse_observed(content_type: str, seconds: float, processes: int = 1, start: str = "") -> None:
    PARSE_SECONDS.labels(content_type or "unknown").observe(seconds)
    PARSE_PROCESSES.labels(content_type or "unknown").inc(processes)
    if start:
        PARSE_CHILDREN.labels(start).inc()


def redis_error(err: BaseException) -> None:
    REDIS_ERRORS.labels(type(err).__name__).inc()
