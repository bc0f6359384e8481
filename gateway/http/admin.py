"""GET /v1/admin/tenants: the current share of parse slots between tenants, for operators.

The numbers live in Redis, which only parser_svc reads, so this is the GetTenantShares call
upstream (with the caller's identity, as every route's call): parser_svc answers it for a key
marked `"admin": true` in the keys file only (PERMISSION_DENIED ADMIN_ONLY, 403, for any other
key, and in dev mode). To its answer the gateway adds what only the keys file knows: each
tenant's `max_queued_jobs`, `max_running_jobs` and `max_pages` (0: none), and the configured tenants
that have no job queued or running now (zeros, their key's weight). Tenants by name.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from google.protobuf import json_format

from docparse.v1 import parser_service_pb2
from docparse_server.tenancy import Limits
from gateway.http.keys import UPSTREAM

PATH = "/v1/admin/tenants"


def _with_keys(answer: dict[str, Any], configured: dict[str, Limits]) -> dict[str, Any]:
    """`answer` (GetTenantSharesResponse as JSON) with every configured tenant listed and
    each tenant's `max_queued_jobs`, `max_running_jobs` and `max_pages`."""
    tenants = {str(row["tenant"]): row for row in answer.get("tenants", [])}
    for tenant, limits in configured.items():
        tenants.setdefault(
            tenant,
            {
                "tenant": tenant,
                "weight": float(limits.weight or 1),
                "queued": 0,
                "pending_interactive": 0,
                "pending_bulk": 0,
                "running": 0,
            },
        )
    for tenant, row in tenants.items():
        limits = configured.get(tenant, Limits())
        row["max_queued_jobs"] = limits.max_queued_jobs
        row["max_running_jobs"] = limits.max_running_jobs
        row["max_pages"] = limits.max_pages
    answer["tenants"] = [tenants[name] for name in sorted(tenants)]
    return answer


async def tenant_shares(request: web.Request) -> web.Response:
    upstream = request.app[UPSTREAM]
    message = parser_service_pb2.GetTenantSharesRequest()
    reply, served = await upstream.unary(upstream.stub.GetTenantShares, message, request)
    answer = json_format.MessageToDict(
        reply, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    body = _with_keys(answer, upstream.auth.keys.tenants())
    return web.Response(
        text=json.dumps(body, separators=(",", ":")),
        content_type="application/json",
        headers={"X-Served-By": served, "Cache-Control": "no-store"},
    )


def register(app: web.Application) -> None:
    app.router.add_get(PATH, tenant_shares)
