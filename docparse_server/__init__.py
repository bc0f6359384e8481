"""What both servers (parser_svc and gateway) share and no client needs: structured logging (logs),
the RPC metrics and the call interceptor (observability, access_fields; each service's own
metrics live in its package), the error interceptor and server plumbing (serving), the fixed
HTTP/2 receive window (flow_control), tenants and API keys (tenancy), OpenTelemetry tracing
(tracing), the event loop (loops) and the CPUs a process may use (cpus). Installed with
`pip install docparse[server]`; the client package `docparse` never imports it (an
import-linter contract in pyproject.toml)."""
