"""The operators' read in the OpenAPI document (gateway.http.openapi): GET /v1/admin/tenants
(gateway.http.admin) and its body, the TenantShares schema: the GetTenantSharesResponse
message's schema with each tenant's `max_queued_jobs`, `max_running_jobs` and `max_pages` from
the keys file."""

from __future__ import annotations

from gateway.http.admin import PATH
from gateway.http.openapi_paths import ERRORS, SERVED, SERVED_BY, json_body
from gateway.http.openapi_schemas import Schema, ref

__all__ = ["PATH", "tenant_shares_path", "tenant_shares_schema"]


def tenant_shares_schema(response: Schema, share: Schema) -> Schema:
    """The answer's body; `response` and `share` are the schemas of the GetTenantSharesResponse
    and TenantShare messages."""
    limit: Schema = {
        "type": "object",
        "required": ["max_queued_jobs", "max_running_jobs", "max_pages"],
        "properties": {
            "max_queued_jobs": {
                "type": "integer",
                "minimum": 0,
                "description": "the tenant's key's max_queued_jobs in the keys file (0: none)",
            },
            "max_running_jobs": {
                "type": "integer",
                "minimum": 0,
                "description": "the tenant's key's max_running_jobs in the keys file (0: none)",
            },
            "max_pages": {
                "type": "integer",
                "minimum": 0,
                "description": "the tenant's key's max_pages in the keys file (0: none)",
            },
        },
    }
    tenants: Schema = {
        "type": "object",
        "properties": {"tenants": {"type": "array", "items": {"allOf": [share, limit]}}},
    }
    return {"allOf": [response, tenants]}


def tenant_shares_path() -> Schema:
    """The path item; its body is the component schema TenantShares."""
    answer = json_body(ref("TenantShares"), "each tenant's share of parse slots now")
    answer["headers"] = {SERVED: SERVED_BY}
    return {
        "get": {
            "operationId": "getTenantShares",
            "summary": "For operators (an API key marked admin in the keys file; others: 403 "
            "ADMIN_ONLY): every tenant's jobs queued and running, weight and limits, "
            "and the parse lanes' caps",
            "responses": {"200": answer, **ERRORS},
        }
    }
