"""The asset list in the OpenAPI document (gateway.http.openapi): GET /v1/jobs/{job_id}/assets
(gateway.http.assets.list_assets) and its body, the AssetList schema: each Asset record of the
package (the protobuf message's schema) with the first page that shows it and its URL."""

from __future__ import annotations

from gateway.http.openapi_paths import ERRORS, JOB_ID, SERVED, SERVED_BY, json_body
from gateway.http.openapi_schemas import Schema, ref

PATH = "/v1/jobs/{job_id}/assets"


def asset_list_schema(asset: Schema) -> Schema:
    """The answer's body; `asset` is the Asset message's schema."""
    listed: Schema = {
        "type": "object",
        "required": ["page", "url"],
        "properties": {
            "page": {
                "type": "integer",
                "minimum": 0,
                "description": "the first page (or slide) that shows it; 0: none does",
            },
            "url": {
                "type": "string",
                "description": "the path that GETs its bytes (getAsset), on this gateway",
            },
        },
    }
    return {
        "type": "object",
        "required": ["job_id", "assets"],
        "properties": {
            "job_id": {"type": "string"},
            "assets": {"type": "array", "items": {"allOf": [asset, listed]}},
        },
    }


def list_assets_path() -> Schema:
    """The path item; its body is the component schema AssetList."""
    answer = json_body(ref("AssetList"), "the package's assets", ETag="the package's sha256")
    answer["headers"][SERVED] = SERVED_BY
    return {
        "get": {
            "operationId": "listAssets",
            "summary": "The assets (images) of a SUCCEEDED job's package: their records, the "
            "page that shows each and the URL of its bytes",
            "parameters": [JOB_ID],
            "responses": {"200": answer, **ERRORS},
        }
    }
