"""The HTTP API's OpenAPI 3.1 document, served at `GET /openapi.json`.

The paths are written in gateway.http.openapi_paths, next to each other as the routes are in
gateway.http; the schemas of the bodies are made from the protobuf descriptors
(gateway.http.openapi_schemas), so a field added to a proto is in the document without anyone
writing it twice. This module puts the two together. The committed copy, docs/openapi.json,
is this document: `python -m gateway.http.openapi > docs/openapi.json` writes it, and
tests/gateway/test_openapi.py fails when the two differ, when a route is added or removed without
the
document following, and when the live gateway answers anything the document does not allow
(schemathesis).
"""

from __future__ import annotations

import json

from aiohttp import web

from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from gateway.http.openapi_admin import PATH as TENANT_SHARES
from gateway.http.openapi_admin import tenant_shares_path, tenant_shares_schema
from gateway.http.openapi_assets import PATH as ASSET_LIST
from gateway.http.openapi_assets import asset_list_schema, list_assets_path
from gateway.http.openapi_paths import JSON, SERVED, SERVED_BY, json_body, path_items
from gateway.http.openapi_schemas import MessageSchemas, Schema, error_schema, ref


def build_document() -> Schema:
    """The OpenAPI 3.1 document of the gateway's HTTP side."""
    schemas = MessageSchemas()
    job = schemas.message(job_pb2.Job.DESCRIPTOR)
    batch = schemas.message(parser_service_pb2.Batch.DESCRIPTOR)
    listing = schemas.message(parser_service_pb2.ListJobsResponse.DESCRIPTOR)
    package = schemas.message(reading_package_pb2.ReadingPackage.DESCRIPTOR)
    schemas.schemas["Error"] = error_schema()
    asset = schemas.message(reading_package_pb2.Asset.DESCRIPTOR)
    schemas.schemas["AssetList"] = asset_list_schema(asset)
    shares = schemas.message(parser_service_pb2.GetTenantSharesResponse.DESCRIPTOR)
    share = schemas.message(parser_service_pb2.TenantShare.DESCRIPTOR)
    schemas.schemas["TenantShares"] = tenant_shares_schema(shares, share)
    paths = path_items(job, batch, listing, package)
    paths[TENANT_SHARES] = tenant_shares_path()
    paths[ASSET_LIST] = list_assets_path()
    error = json_body(
        ref("Error"), "an error (README, Errors: the HTTP status follows the gRPC code)"
    )
    error["headers"] = {
        SERVED: SERVED_BY,
        "Retry-After": {
            "description": "seconds to wait before a retry (429, 503)",
            "schema": {"type": "string"},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "docparse HTTP API",
            "version": "v1",
            "description": "The gateway's HTTP side: JSON for jobs, batches and results, "
            "Server-Sent Events for progress, assets. Bodies are the docparse.v1 protobuf "
            "messages in their JSON form (proto field names, enums by name, 64-bit integers "
            "as strings). README.md, 'HTTP API', says the rest.",
        },
        "paths": paths,
        "components": {
            "schemas": dict(sorted(schemas.schemas.items())),
            "responses": {"Error": error},
            "headers": {
                SERVED: {
                    "description": "the replica that answered, then this gateway",
                    "schema": {"type": "string"},
                }
            },
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
                "accessToken": {"type": "apiKey", "in": "query", "name": "access_token"},
            },
        },
        "security": [{"bearer": []}, {"apiKey": []}, {"accessToken": []}, {}],
    }


def document_text() -> str:
    return json.dumps(build_document(), indent=2, sort_keys=False) + "\n"


async def openapi_json(request: web.Request) -> web.Response:
    return web.Response(
        text=request.app[DOCUMENT],
        content_type=JSON,
        headers={"Cache-Control": "no-cache"},
    )


DOCUMENT = web.AppKey("openapi_document", str)


def register(app: web.Application) -> None:
    app[DOCUMENT] = document_text()
    app.router.add_get("/openapi.json", openapi_json)


if __name__ == "__main__":
    print(document_text(), end="")
