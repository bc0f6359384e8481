"""The one settings object of the gateway; every field reads `DOCPARSE_GATEWAY_<NAME>`."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class GatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DOCPARSE_GATEWAY_", extra="ignore")

    # host:port the gateway listens on.
    listen: str = "127.0.0.1:50050"
    # parser_svc replicas: a gRPC target ("dns:///parser-svc-headless:50051", "ipv4:a:p,b:p")
    # or a comma-separated list of host:port. Calls are balanced per call (round_robin).
    backends: str = "127.0.0.1:50051"
    # Largest message in either direction.
    max_message_bytes: int = 65 * 1024 * 1024
    # Deadline for unary calls that arrive without one (streams keep none).
    default_unary_timeout_s: float = 120.0
    # SIGTERM: how long open calls may take to finish.
    shutdown_grace_s: float = 20.0
