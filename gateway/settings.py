"""The one settings object of the gateway; every field reads `DOCPARSE_GATEWAY_<NAME>`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from docparse_server.access_log import AccessLog, access_log_setting
from docparse_server.cpus import usable_cpus
from docparse_server.flow_control import DEFAULT_RECEIVE_WINDOW_BYTES


class GatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DOCPARSE_GATEWAY_", extra="ignore")

    # host:port the gateway listens on.
    listen: str = "127.0.0.1:50050"
    # parser_svc replicas: a gRPC target ("dns:///parser-svc-headless:50051", "ipv4:a:p,b:p")
    # or a comma-separated list of host:port. Calls are balanced per call (round_robin).
    backends: str = "127.0.0.1:50051"
    # Largest message in either direction.
    max_message_bytes: int = 65 * 1024 * 1024
    # HTTP/2 receive window per stream, fixed (bytes), on the gRPC port and on the channel to
    # the replicas: what the gateway holds of a stream it relays when the other side is slow
    # (docparse_server/flow_control.py).
    receive_window_bytes: int = DEFAULT_RECEIVE_WINDOW_BYTES
    # Deadline for unary calls that arrive without one (streams keep none).
    default_unary_timeout_s: float = 120.0
    # SIGTERM: how long open calls may take to finish.
    shutdown_grace_s: float = 20.0

    # host:port of the HTTP side (JSON API, Server-Sent Events, the upload page at /); "" turns
    # it off.
    http_listen: str = "127.0.0.1:8080"
    # Worker processes that render results as JSON, text or Markdown (GET /v1/jobs/{id}/result),
    # off the event loop: at most this many renders run at once, the rest wait their turn in
    # their tenant's line, tenants served round-robin (gateway/http/render_queue.py). Default:
    # the CPUs this process may use (docparse_server/cpus.py), at most 4.
    http_render_workers: int = Field(default_factory=lambda: min(4, usable_cpus()))
    # Renders one tenant may have running and waiting on this gateway, in each lane (big
    # results, small results); beyond it 429
    # TOO_MANY_RENDERS (Retry-After) before the result is fetched. 0 = no limit.
    http_render_per_tenant: int = 4
    # Renders waiting for a worker on this gateway, all tenants together; beyond it 429
    # TOO_MANY_RENDERS. 0 = no limit.
    http_render_max_waiting: int = 32
    # Results of at most this many bytes (the serialized package: a one-page result is a few
    # kB) render in a lane of their own, one worker process, with the same limits; 0 = no
    # such lane.
    http_render_small_bytes: int = 1024 * 1024
    # Address space of each render worker (RLIMIT_AS), MB; a result that needs more answers
    # RESULT_TOO_LARGE_TO_RENDER (HTTP 413; format=proto still works). 0 = no limit.
    http_render_memory_mb: int = 2048
    # Largest file an HTTP upload may carry (each file of a batch counts on its own).
    http_max_upload_bytes: int = 64 * 1024 * 1024
    # SSE: the `retry:` a browser waits before reconnecting (it resumes with Last-Event-ID).
    sse_retry_ms: int = 2000
    # SSE: how long the gateway keeps resuming a broken upstream watch (UNAVAILABLE, a replica
    # draining) before it ends the event stream and leaves the reconnect to the browser.
    sse_resume_budget_s: float = 30.0
    # SSE: event streams one tenant may hold open on this gateway (an API key's `max_streams`
    # overrides it; 0 = unlimited). Beyond it: 429 TOO_MANY_STREAMS before anything is asked
    # upstream. Each open one also holds a watch stream on a parser_svc replica (its
    # DOCPARSE_MAX_STREAMS_PER_TENANT).
    http_max_event_streams_per_tenant: int = 100
    # CORS: origins ("https://app.example.com", scheme://host[:port], comma separated) whose
    # pages may call the HTTP API from a browser, or "*" for any origin; "" (the default)
    # allows none: no CORS headers, and a POST from another site's page is refused
    # (CROSS_SITE_REQUEST). Requests authenticate with API keys in headers, never cookies.
    http_cors_origins: str = ""
    # Host names (comma separated) the HTTP side answers besides loopback ones and the address
    # it listens on. Checked in dev mode (auth disabled) against DNS rebinding, and whenever
    # set; a request naming another host: 403 CROSS_SITE_REQUEST (gateway/http/hosts.py).
    http_allowed_hosts: str = ""
    # How long a browser may reuse a preflight (OPTIONS) answer.
    http_cors_max_age_s: int = 600

    # Authentication of docparse.v1 calls: "required" (API keys) or "disabled" (dev mode: every
    # call is the tenant "default"; `docparse up` runs this way and says so).
    auth: Literal["required", "disabled"] = "required"
    # API keys as JSON {"keys": [{"sha256": "<hex of sha256(key)>", "tenant": "acme",
    # "max_upload_bytes": 0, "submits_per_minute": 0, "max_streams": 0}]} — inline, or in a
    # file (a mounted Secret). 0 = the service-wide default.
    api_keys: str = ""
    api_keys_file: Path | None = None
    # Shared secret parser_svc requires with the tenant identity the gateway forwards
    # (DOCPARSE_INTERNAL_TOKEN there); empty only in dev mode.
    internal_token: str = ""
    # TLS for the gRPC port: PEM certificate chain and key; both empty serve plaintext.
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    # TLS to parser_svc (its DOCPARSE_TLS_CERT_FILE): the CA certificates that sign the
    # replicas' certificate; unset: plaintext, and the internal token and every document travel
    # in clear between the gateway and the replicas. Every replica's certificate must name
    # `upstream_tls_server_name`; unset: the host of the first `backends` entry (a host:port
    # list, e.g. "parser-svc-headless" of "parser-svc-headless:50051"), or a target URI's own
    # authority ("dns:///parser-svc-headless:50051"; set the name with an "ipv4:" list).
    upstream_tls_ca_file: Path | None = None
    upstream_tls_server_name: str = ""

    # The event loop: "uvloop" (libuv: 5-15% less CPU per call in bench/bench_spine.py; the
    # standard loop where uvloop is not installed) or "asyncio" (docparse_server/loops.py).
    event_loop: Literal["asyncio", "uvloop"] = "uvloop"

    # Logs on stderr: "json" (one object per line, see parser_svc's DOCPARSE_LOG_FORMAT) or "text".
    log_format: Literal["json", "text"] = "json"
    log_level: str = "INFO"
    # One INFO line per RPC (method, code, reason, duration, job id, the replica that
    # answered): for every call but the successful polls (GetStatus, GetBatch, ListJobs;
    # `quiet_reads`), for every call (`all`, or `true`) or none (`off`, or `false`).
    # docparse_server/access_log.py.
    access_log: AccessLog = "quiet_reads"
    _access_log = field_validator("access_log", mode="before")(access_log_setting)
    # host:port of the Prometheus endpoint (GET /metrics), e.g. "0.0.0.0:9464"; "" turns it off.
    metrics_listen: str = ""
