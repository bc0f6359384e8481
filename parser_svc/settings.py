"""The one settings object of parser_svc. Every field reads `DOCPARSE_<NAME>` from the
environment (e.g. DOCPARSE_REDIS_URL, DOCPARSE_RETENTION_S)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict


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

    # Results up to this size are kept inline in Redis; larger ones go to the blob store.
    inline_result_max_bytes: int = 256 * 1024
    # Largest upload SubmitJob accepts (also the gRPC max message size, plus headroom).
    max_upload_bytes: int = 64 * 1024 * 1024

    # Queue workers.
    queue_name: str = "parse"
    worker_concurrency: int = 2
    # A worker holds a job's lock this long and renews it at half-time; a worker that stops
    # renewing (killed, frozen) loses the job to another replica after at most this long.
    lock_duration_ms: int = 30_000
    # Executions a job gets (crashed parser, lost worker) before it ends FAILED for good.
    max_attempts: int = 3
    # First retry delay; doubles per attempt.
    retry_backoff_ms: int = 1000
    # Testing and demo aid: the parse child pauses this long after each page. Keep 0.
    parse_page_delay_ms: int = 0
    # Fault injection for tests: a parse child whose document contains these bytes kills
    # itself with SIGSEGV (exercises the real crash path). Keep empty.
    fault_segv_marker: str = ""
    # Limits of each parse subprocess.
    parse_timeout_s: float = 300.0
    parse_cpu_s: int = 300
    parse_memory_mb: int = 2048

    # WatchJob: re-read the record this often (pub/sub is at-most-once) ...
    watch_resync_s: float = 5.0
    # ... and send a heartbeat on a stream idle this long.
    watch_heartbeat_s: float = 15.0

    # Clients reconnect (and re-resolve) after this, so new replicas get traffic.
    max_connection_age_ms: int = 5 * 60 * 1000
    max_connection_age_grace_ms: int = 30_000
    # SIGTERM: how long in-flight calls and parses may take to finish.
    shutdown_grace_s: float = 20.0
