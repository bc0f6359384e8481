"""What a local stack has turned on, said at its start (`docparse up`): authentication,
webhooks, tracing and CORS, each read from the environment its servers get, so a user sees at
once whether the `DOCPARSE_*` (and `OTEL_*`) variables they set took effect.

The rules are the servers' own (parser_svc/settings.py, gateway/settings.py,
docparse_server/tracing.py), restated here: the client package imports no server code.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}


def tracing_endpoint(env: Mapping[str, str]) -> str:
    """The OTLP/HTTP traces URL the servers export to, "" when tracing is off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return ""
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return ""
    named = env.get("DOCPARSE_TRACING_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return (named or "").strip() or (base.rstrip("/") + "/v1/traces" if base else "")


def auth_line(env: Mapping[str, str], enforced: bool) -> str:
    """API keys: required (with the keys' source), or dev mode (and keys set but not checked)."""
    named = ("DOCPARSE_GATEWAY_API_KEYS_FILE", "DOCPARSE_GATEWAY_API_KEYS")
    keys = [k for k in named if env.get(k)]
    if enforced:
        source = f"keys file {env[keys[0]]}" if keys and keys[0].endswith("_FILE") else "keys"
        return f"on: API keys required ({source}); clients send --api-key or DOCPARSE_API_KEY"
    ignored = f" ({' and '.join(keys)} set but not checked)" if keys else ""
    return (
        f"off{ignored}: dev mode, every call is the tenant 'default'; 127.0.0.1 only, other "
        "sites' browser posts refused; --api-keys-file FILE requires keys"
    )


def webhooks_line(env: Mapping[str, str]) -> str:
    secrets = env.get("DOCPARSE_WEBHOOK_SECRETS_FILE", "").strip()
    if not secrets:
        return (
            "off: no DOCPARSE_WEBHOOK_SECRETS_FILE, so a submit with a callback is refused "
            "(CALLBACK_SECRET_UNKNOWN)"
        )
    cidrs = env.get("DOCPARSE_WEBHOOK_ALLOW_CIDRS", "").strip()
    reach = (
        f"receivers at public addresses and in {cidrs} (DOCPARSE_WEBHOOK_ALLOW_CIDRS)"
        if cidrs
        else "receivers at public addresses only (DOCPARSE_WEBHOOK_ALLOW_CIDRS=127.0.0.1/32 "
        "allows one on this machine)"
    )
    return f"on: secrets {Path(secrets).resolve()}; {reach}"


def tracing_line(env: Mapping[str, str]) -> str:
    endpoint = tracing_endpoint(env)
    if endpoint:
        return f"on: spans to {endpoint} (OTLP/HTTP)"
    return "off: no OTEL_EXPORTER_OTLP_ENDPOINT or DOCPARSE_TRACING_ENDPOINT"


def cors_line(env: Mapping[str, str]) -> str:
    origins = env.get("DOCPARSE_GATEWAY_HTTP_CORS_ORIGINS", "").strip()
    if origins:
        return f"on for {origins} (DOCPARSE_GATEWAY_HTTP_CORS_ORIGINS)"
    return (
        "off: no DOCPARSE_GATEWAY_HTTP_CORS_ORIGINS, so pages of other origins cannot call "
        "the HTTP API"
    )


def feature_lines(env: Mapping[str, str], auth_enforced: bool) -> list[str]:
    """One line each for auth, webhooks, tracing and CORS, as `docparse up` prints them."""
    return [
        "features (the servers get this environment: its DOCPARSE_* and OTEL_* variables apply):",
        f"  {'auth':<9} {auth_line(env, auth_enforced)}",
        f"  {'webhooks':<9} {webhooks_line(env)}",
        f"  {'tracing':<9} {tracing_line(env)}",
        f"  {'CORS':<9} {cors_line(env)}",
    ]
