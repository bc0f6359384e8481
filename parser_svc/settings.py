"""The one settings object of parser_svc. Every field reads `DOCPARSE_<NAME>` from the
environment (e.g. DOCPARSE_REDIS_URL, DOCPARSE_RETENTION_S)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from docparse_server.access_log import AccessLog, access_log_setting
from docparse_server.cpus import usable_cpus
from docparse_server.flow_control import DEFAULT_RECEIVE_WINDOW_BYTES
from parser_svc.parsers import (
    DEFAULT_MAX_ASSET_MB,
    DEFAULT_MAX_ASSETS,
    DEFAULT_MAX_CELLS,
    DEFAULT_MAX_PAGES,
    DEFAULT_MAX_UNZIPPED_MB,
    DEFAULT_OCR_DPI,
    DEFAULT_OCR_MAX_SIDE_PX,
    DEFAULT_OCR_MIN_CHARS,
    DEFAULT_PDF_SPLIT_MIN_PAGES,
    MB,
    ParseOptions,
)
from parser_svc.parsers.ocr import preload_scripts


def _known_scripts(value: str) -> str:
    preload_scripts(value)  # ValueError naming an unknown script
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DOCPARSE_", extra="ignore")

    # Where job state, events and the queue live. Required in production.
    redis_url: str = "redis://127.0.0.1:6379/0"
    # Namespace of every key: docparse:{env}:...; separates deployments sharing one Redis.
    env: str = "dev"
    # host:port the gRPC server listens on.
    listen: str = "127.0.0.1:50051"
    # "all" serves the API and runs queue workers; "api" and "worker" split them for scaling.
    role: Literal["all", "api", "worker"] = "all"
    # Shared directory (a volume all pods mount) for uploads and large results.
    blob_dir: Path = Path("var/blobs")

    # A state store call that takes longer than this fails with STATE_STORE_UNAVAILABLE.
    redis_timeout_s: float = 2.0
    # Connections of a replica's state store pool at most. More concurrent calls (a burst of
    # GetStatus, thousands of WatchJob resync reads) wait for a free one, up to
    # `redis_timeout_s`, instead of failing (redis-py's own pool refuses call 101 at once).
    redis_max_connections: int = 100
    # A job's record (GetStatus, WatchJob's snapshots and resyncs) is read on connections of
    # its own that carry any number of reads at once (parser_svc/state/pipelined_reads.py): about
    # a third less CPU per GetStatus than through the pool. One Redis only (redis://,
    # rediss://, unix://); Sentinel and Cluster URLs read through the pool. false: the pool.
    redis_pipelined_reads: bool = True
    redis_read_connections: int = Field(default=2, ge=1, le=64)
    # Durability across a Redis failover (replication is asynchronous): creates and terminal
    # writes wait (WAIT) until this many replicas have them, up to `redis_replica_wait_ms`;
    # short of that the call answers UNAVAILABLE STATE_STORE_NOT_REPLICATED and is retried.
    # 0 (default): the primary's acknowledgement is enough (the loss window of a failover).
    redis_min_replicas_ack: int = 0
    redis_replica_wait_ms: int = 500
    # TLS to Redis (a rediss:// or rediss+sentinel:// URL; URL forms in
    # parser_svc/state/redis_conn.py):
    # the CA certificates that sign the server's (unset: the system's), and a client
    # certificate and its key for a server that requires one. Set with a plaintext URL, or
    # unreadable, they stop the start (exit 2). The server's name or IP in the URL is checked.
    redis_tls_ca_file: Path | None = None
    redis_tls_cert_file: Path | None = None
    redis_tls_key_file: Path | None = None
    # Redis Cluster (a redis+cluster:// URL): the cells jobs are placed in
    # (parser_svc/state/keys.py),
    # each one hash slot. Fixed for a deployment's life: another number moves where a
    # request_id's retry looks for its first job. A few per shard spread the load evenly.
    redis_cells: int = Field(default=16, ge=1, le=4096)
    # Terminal jobs stay readable this long after they end; then only a tombstone remains.
    retention_s: int = 24 * 3600
    # The tombstone (GetStatus answers JOB_EXPIRED) outlives the record by this much.
    tombstone_s: int = 7 * 24 * 3600
    # A queued job's record lives this long without being picked up.
    queued_ttl_s: int = 24 * 3600
    # A running job's record lives this long past its last write (the worker renews it).
    running_ttl_s: int = 3600

    # A SubmitJob request_id is remembered this long (AIP-155): a retry returns the first job.
    request_id_ttl_s: int = 24 * 3600

    # The shared secret the gateway sends with each caller's tenant identity; calls without it
    # are refused (UNAUTHENTICATED). Required: without it parser_svc refuses to start, unless
    # `dev_mode` says so explicitly (then every call is the tenant "default", and it logs so).
    internal_token: str = ""
    # A local single-tenant run without an internal token (`docparse up` without API keys).
    dev_mode: bool = False
    # TLS for the gRPC port: PEM certificate chain and key (both or neither; one alone stops
    # the start, TLS_INCOMPLETE). Unset: plaintext, and the internal token travels in clear
    # from the gateway (its DOCPARSE_GATEWAY_UPSTREAM_TLS_CA_FILE turns TLS on there).
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    # host:port of a plaintext port that answers grpc.health.v1 only (no token, no job data),
    # for probes that cannot speak TLS (Kubernetes' gRPC probes), e.g. "0.0.0.0:50052"; "" off.
    health_listen: str = ""

    # Results up to this size are kept inline in Redis; larger ones go to the blob store.
    inline_result_max_bytes: int = 256 * 1024
    # Largest upload SubmitJob accepts (also the gRPC max message size, plus headroom).
    max_upload_bytes: int = 64 * 1024 * 1024
    # HTTP/2 receive window per stream, fixed (bytes): what a stalled replica may find waiting
    # for it per upload on waking, and the most a stream moves per round trip
    # (docparse_server/flow_control.py).
    receive_window_bytes: int = DEFAULT_RECEIVE_WINDOW_BYTES

    # Queue workers.
    queue_name: str = "parse"
    # Parses a replica runs at once; 0 = one per CPU this process may use (its cgroup's CPU
    # quota rounded up, or its CPU affinity: never the node's core count).
    worker_concurrency: int = 0
    # A worker holds a job's lock this long and renews it at half-time; a worker that stops
    # renewing (killed, frozen) loses the job to another replica after at most this long.
    lock_duration_ms: int = 30_000
    # Executions a job gets (crashed parser, lost worker) before it ends FAILED for good.
    max_attempts: int = 3
    # First retry delay; doubles per attempt.
    retry_backoff_ms: int = 1000
    # The sweeper (one worker replica at a time, under a lease): every `sweep_interval_s` it
    # enqueues jobs created more than `sweep_enqueue_after_s` ago that the queue does not have
    # (a lost reply or a replica that died between create and enqueue), and deletes uploads
    # older than `sweep_uploads_after_s` whose job was never created or has ended.
    sweep_interval_s: float = 5.0
    sweep_enqueue_after_s: float = 10.0
    sweep_uploads_after_s: float = 600.0
    # Fair admission (parser_svc/state/admission.py): a created job waits on its tenant's list
    # of its lane, and is added to the queue while fewer than `admit_window` jobs wait there
    # (0: twice `worker_concurrency`), interactive lane first (a server wait, or an upload of
    # at most `admit_interactive_bytes`), one bulk job after every `admit_bulk_every`
    # interactive ones while bulk waits; tenants by their keys' `weight`. Bulk jobs take at most
    # the replicas' `worker_concurrency` slots; with `admit_reserve` > 0 each replica's worker
    # runs that many more, which only the interactive lane reaches (a small job then never
    # waits for a long one to end; each costs one more parse's memory and CPU). false: every
    # job is added to the queue at once, first come first served, and no slot is reserved.
    fair_admission: bool = True
    admit_window: int = Field(default=0, ge=0)
    admit_bulk_every: int = Field(default=3, ge=1)
    admit_interactive_bytes: int = 256 * 1024
    admit_reserve: int = Field(default=0, ge=0)
    # Parse children. What a child is told comes from the settings below through
    # `parse_options`, on its stdin with the job, never from its environment; only its CPU and
    # memory limits are on its command line: process limits it sets on itself as it starts,
    # before any parser runs (parser_svc.child.parse_child.main). The worker keeps the wall clock.
    # Testing and demo aid: the parse child pauses this long after each page. Keep 0.
    parse_page_delay_ms: int = 0
    # Fault injection for tests: a parse child whose document contains these bytes kills
    # itself with SIGSEGV (exercises the real crash path). Keep empty.
    fault_segv_marker: str = ""
    # How each parse subprocess starts: "fork_server" forks it from a pre-imported process the
    # worker keeps (parser_svc.child.zygote: a few ms per job); "spawn" starts a fresh interpreter
    # per job (~0.3 s of CPU each). Isolation, limits and failure reasons are the same.
    parse_launch: Literal["fork_server", "spawn"] = "fork_server"
    # The fork server's memory as transparent huge pages (parser_svc.child.huge_pages; Linux 6.1+):
    # a fork and an exit cost ~3 ms instead of 6-14. Off: 4 KB pages, as before.
    fork_server_huge_pages: bool = True
    # Spare children (parser_svc.child.zygote): a worker idle this long, with no job waiting,
    # has its fork server ready the next job's child (at start too). 0 turns spares off: every
    # job's child is forked when the job comes, as before. Below ~10 the jobs of a burst wait
    # for the spare's own parse (bench/README.md, "Spare parse children").
    spare_after_idle_ms: float = Field(default=10.0, ge=0)
    # Fault injection for tests: a parse child whose document contains these bytes leaks
    # 64 MB and corrupts a parser global (no later job may notice). Keep empty.
    fault_corrupt_marker: str = ""
    # Limits of each parse subprocess. Over the wall clock or CPU time: PARSE_TIMEOUT; over the
    # address-space limit (RLIMIT_AS): DOCUMENT_TOO_LARGE; a child that dies of a signal:
    # PARSER_CRASHED. OCR needs ~1.3 GB of address space (onnxruntime): keep >= 1536 with OCR.
    # A forked child's memory limit counts what a spawned child's would: the address space
    # beyond a fresh interpreter's start-up, not what the fork server preloaded (shared).
    parse_timeout_s: float = 300.0
    parse_cpu_s: int = 300
    parse_memory_mb: int = 2048
    # Documents over these end FAILED with DOCUMENT_TOO_LARGE: pages of a PDF (slides of a
    # presentation), the declared uncompressed size of an Office (zip) package's parts (zip
    # bombs), and the cells with a value in a workbook.
    parse_max_pages: int = DEFAULT_MAX_PAGES
    parse_max_unzipped_mb: int = DEFAULT_MAX_UNZIPPED_MB
    parse_max_cells: int = DEFAULT_MAX_CELLS
    # Images kept as assets per document (beyond them: a warning on the result, not a failure).
    parse_max_assets: int = DEFAULT_MAX_ASSETS
    parse_max_asset_mb: int = DEFAULT_MAX_ASSET_MB
    # OCR of PDF pages that have images but fewer than `ocr_min_chars` usable characters of text:
    # rendered at `ocr_dpi` (the longer side capped at `ocr_max_side_px`), recognised with
    # `ocr_threads` threads (0 = onnxruntime's default). Off: such pages get a warning instead.
    ocr_enabled: bool = True
    ocr_dpi: int = DEFAULT_OCR_DPI
    ocr_max_side_px: int = DEFAULT_OCR_MAX_SIDE_PX
    ocr_min_chars: int = DEFAULT_OCR_MIN_CHARS
    ocr_threads: int = 0
    # A PDF's OCR pages are read on up to this many threads at once, each with its own engine
    # (~40 MB more per thread, loaded when a second page waits; documents of 4 pages or more),
    # and no more than the cores the replica's other running parses leave free (the worker
    # decides per job): a lone long scan uses the replica's cores. 0 = the CPUs this process
    # may use (docparse_server/cpus.py).
    ocr_page_threads: int = 0
    # The OCR models each worker's fork server loads at its start, shared copy-on-write by every
    # parse child: "all" (each script's, ~2 s of CPU and ~215 MB once), "none", or some scripts
    # ("latin,cyrillic"; arabic, han, japanese, hangul). A page needing models not loaded has its
    # child load them: 0.1-0.7 s a job (bench/README.md, "OCR models at the fork server's
    # start"). Unknown names stop the start. With `ocr_enabled` off none are loaded.
    ocr_preload: str = "all"
    _ocr_preload = field_validator("ocr_preload")(_known_scripts)
    # Ruled-table detection on PDF pages.
    pdf_tables: bool = True
    # A PDF of at least twice this many pages is read in page ranges by more than one process
    # when the replica has cores its other parses leave free (parsers/pdf_split.py): a lone
    # long document uses the replica's cores. Each range has at least this many pages, so a
    # short document never pays a second fork. 0 = one process per document.
    pdf_split_min_pages: int = DEFAULT_PDF_SPLIT_MIN_PAGES
    # The antiword program that reads DOC files; "" = antiword on PATH.
    antiword: str = ""
    # The uid and gid each parse child drops to once it has opened its document, when the
    # server runs as root (parser_svc/child/privileges.py): it then cannot open another job's
    # files. 0 = no drop. Not root: children keep the server's uid (said once at start). The
    # worker tells each child (ParseOptions.child_uid) with the scratch directory it made it.
    child_uid: int = Field(default=65534, ge=0)
    child_gid: int = Field(default=65534, ge=0)
    # Each parse child confines what files it may open with Landlock once its document is
    # open (parser_svc/child/landlock.py): whatever its uid, it reads only the Python
    # installation and system files a parse needs and writes only its scratch directory. A
    # kernel without Landlock: said once at start, children run as before.
    child_landlock: bool = True

    # WatchJob: re-read the record this often (pub/sub is at-most-once) ...
    watch_resync_s: float = 5.0
    # ... and send a heartbeat on a stream idle this long.
    watch_heartbeat_s: float = 15.0
    # Garbage-collector pacing (docparse_server/gc_pacing.py): what survived is frozen this
    # often, and everything is collected once every `gc_full_every_s`. 0 = Python's collector
    # as it is (full collections then pause the loop ~0.3 s every few seconds at 5,000 streams).
    gc_freeze_every_s: float = 1.0
    gc_full_every_s: float = 600.0
    # Open WatchJob + WatchBatch streams one tenant may hold on this replica (an API key's
    # `max_streams` overrides it; 0 = unlimited). Beyond it: RESOURCE_EXHAUSTED
    # TOO_MANY_STREAMS, before the stream reads anything. The gateway's SSE streams hold one
    # each on the replica that serves them.
    max_streams_per_tenant: int = 100
    # UploadBatch streams (gRPC, and the gateway's HTTP batch uploads) one tenant may have open
    # on this replica at once; 0 = unlimited. Each can hold up to `receive_window_bytes` plus a
    # chunk in memory while the replica is slow (about 8 MiB at the default window, measured
    # stalled), so this bounds what one tenant's uploads hold here. Beyond it: RESOURCE_EXHAUSTED
    # TOO_MANY_UPLOADS, before the stream reads anything (the SDK retries after `retry_after_s`).
    max_uploads_per_tenant: int = 8
    # Per-tenant read rates on this replica (parser_svc/api/read_limits.py), calls a second,
    # with bursts of `*_burst` calls; 0 = unlimited. Beyond it: RESOURCE_EXHAUSTED
    # RATE_LIMITED with `retry_after_s`. GetStatus is never limited.
    list_jobs_per_s: float = 20.0
    list_jobs_burst: int = 40
    # GetResult and GetAsset together (the HTTP result, its renders, and a result page whose
    # images all load at once: hence the larger burst).
    result_reads_per_s: float = 50.0
    result_reads_burst: int = 200
    # A read past its rate whose token is due within this many seconds waits for it instead of
    # being refused (so at most rate x this many of a tenant's calls wait); 0 refuses at once.
    read_limit_max_wait_s: float = 1.0
    # The read that turns a running job's drafts on waits at most this long for the pages its
    # parse read before (api/draft_backfill.py): the worker hears of it within a progress
    # write (0.2 s) and the parse at its next page.
    draft_backfill_wait_s: float = Field(default=2.0, ge=0.0, le=30.0)

    # Clients reconnect (and re-resolve) after this, so new replicas get traffic.
    max_connection_age_ms: int = 5 * 60 * 1000
    max_connection_age_grace_ms: int = 30_000
    # SIGTERM: how long in-flight calls and parses may take to finish.
    shutdown_grace_s: float = 20.0

    # The event loop: "uvloop" (libuv: 5-15% less CPU per call in bench/bench_spine.py; the
    # standard loop where uvloop is not installed) or "asyncio" (docparse_server/loops.py).
    event_loop: Literal["asyncio", "uvloop"] = "uvloop"

    # Logs on stderr: "json" (one object per line: ts, level, logger, msg, service, replica, pid
    # and the event's fields such as job_id, tenant, method, code, duration_ms) or "text".
    log_format: Literal["json", "text"] = "json"
    log_level: str = "INFO"
    # One INFO line per RPC (method, code, reason, duration, job id, tenant): for every
    # call but the successful polls (GetStatus, GetBatch, ListJobs; `quiet_reads`), for every
    # call (`all`, or `true`) or none (`off`, or `false`). docparse_server/access_log.py.
    access_log: AccessLog = "quiet_reads"
    _access_log = field_validator("access_log", mode="before")(access_log_setting)
    # host:port of the Prometheus endpoint (GET /metrics), e.g. "0.0.0.0:9464"; "" turns it off.
    metrics_listen: str = ""
    # docparse_queue_jobs is refreshed this often (one BullMQ count call per period).
    queue_metrics_interval_s: float = 10.0

    # Webhooks (SubmitJobRequest.callback; parser_svc/webhooks/callbacks.py). The secrets every
    # tenant
    # registered, a JSON file {"<tenant>": {"<secret name>": "whsec_<base64>"}}: a callback
    # names one of its tenant's secrets, never the secret itself. Unset: every callback is
    # refused (CALLBACK_SECRET_UNKNOWN). A file that cannot be read stops the start (exit 2);
    # it is re-read when it changes (rotate a secret by adding the new name first).
    webhook_secrets_file: Path | None = None
    # Callbacks whose host resolves to a private, loopback, link-local, multicast or reserved
    # address are refused, at submit and at every delivery, unless one of these comma separated
    # CIDRs ("10.1.2.0/24,fd00::/8") lists the address.
    webhook_allow_cidrs: str = ""
    # Deliveries: one worker replica at a time (a lease) is woken by each job's terminal event
    # (pub/sub) and looks every `webhook_poll_s` for due ones; a job that had not ended is
    # looked at again after `webhook_recheck_s` (the floor when an event is lost), waits at most
    # `webhook_timeout_s` for an answer (reads at most `webhook_max_response_bytes` of it; no
    # redirect is followed) and sends up to `webhook_concurrency` at once. A delivery without
    # a 2xx answer is retried after `webhook_backoff_ms`, doubling up to `webhook_backoff_max_s`;
    # after `webhook_max_attempts` attempts it moves to the dead-letter set.
    webhook_poll_s: float = 1.0
    webhook_recheck_s: float = 5.0
    webhook_timeout_s: float = 10.0
    webhook_max_response_bytes: int = 64 * 1024
    webhook_concurrency: int = 16
    # Of those, at most this many for one tenant and to one host (host:port) at once; ready
    # deliveries start as slots free up, tenants in turns (parser_svc/webhooks/slots.py).
    webhook_per_tenant: int = 4
    webhook_per_host: int = 4
    # Connecting to the receiver is bounded apart from the whole attempt (`webhook_timeout_s`).
    webhook_connect_timeout_s: float = 3.0
    # A host that timed out this many times in a row gets no delivery for
    # `webhook_circuit_open_s`, doubling while it keeps timing out, up to
    # `webhook_circuit_max_open_s`; its deliveries wait in the outbox meanwhile (no slot held,
    # no attempt counted).
    webhook_circuit_after: int = 3
    webhook_circuit_open_s: float = 30.0
    webhook_circuit_max_open_s: float = 600.0
    webhook_backoff_ms: int = 5000
    webhook_backoff_max_s: float = 3600.0
    webhook_max_attempts: int = 10

    @property
    def fork_server_ocr_preload(self) -> str:
        """What the fork server is told to preload (parsers/ocr.preload_scripts)."""
        return self.ocr_preload if self.ocr_enabled else "none"

    def parse_options(self, **per_job: Any) -> ParseOptions:
        """What a parse child is told besides the document: the one mapping of these settings
        onto ParseOptions. `per_job` adds the job's own fields (password, job_id, assets_dir,
        languages) or overrides one."""
        options = ParseOptions(
            deployment=self.env,
            max_pages=self.parse_max_pages,
            max_unzipped_bytes=self.parse_max_unzipped_mb * MB,
            max_cells=self.parse_max_cells,
            max_assets=self.parse_max_assets,
            max_asset_bytes=self.parse_max_asset_mb * MB,
            ocr=self.ocr_enabled,
            ocr_dpi=self.ocr_dpi,
            ocr_max_side_px=self.ocr_max_side_px,
            ocr_min_chars=self.ocr_min_chars,
            ocr_threads=self.ocr_threads,
            # The worker names it per job; cgroup files are read only when it does not.
            ocr_page_threads=per_job.pop("ocr_page_threads", 0)
            or self.ocr_page_threads
            or usable_cpus(),
            pdf_tables=self.pdf_tables,
            pdf_split_min_pages=self.pdf_split_min_pages,
            antiword=self.antiword,
            page_delay_ms=self.parse_page_delay_ms,
            fault_segv_marker=self.fault_segv_marker,
            fault_corrupt_marker=self.fault_corrupt_marker,
            landlock=self.child_landlock,
        )
        return replace(options, **per_job)
