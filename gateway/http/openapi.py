"""The HTTP API's OpenAPI 3.1 document, served at `GET /openapi.json`.

Paths are written here, next to the routes they describe; the schemas of the bodies are made
from the protobuf descriptors (the bodies are those messages in their JSON form: proto field
names, enums by name, 64-bit integers as strings, every field without presence present), so a
field added to a proto is in the document without anyone writing it twice. The committed copy,
docs/openapi.json, is this document: `python -m gateway.http.openapi > docs/openapi.json`
writes it, and tests/test_openapi.py fails when the two differ, when a route is added or
removed without the document following, and when the live gateway answers anything the
document does not allow (schemathesis).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2

ID_PATTERN = "^[^/:{}]+$"
JSON = "application/json"
Schema = dict[str, Any]

_INTEGER_32 = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SFIXED32,
}
_UNSIGNED_32 = {FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32}
_INTEGER_64 = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_SFIXED64,
}
_UNSIGNED_64 = {FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


class _Schemas:
    """JSON schemas of protobuf messages (and the messages they contain), by short name."""

    def __init__(self) -> None:
        self.schemas: dict[str, Schema] = {}

    def enum(self, enum: EnumDescriptor) -> Schema:
        if enum.name not in self.schemas:
            self.schemas[enum.name] = {
                "type": "string",
                "enum": [value.name for value in enum.values],
            }
        return _ref(enum.name)

    def message(self, message: Descriptor) -> Schema:
        if message.full_name == "google.protobuf.Timestamp":
            return {"type": "string", "format": "date-time"}
        if message.name in self.schemas:
            return _ref(message.name)
        self.schemas[message.name] = {}  # placeholder: messages may contain themselves
        properties: dict[str, Schema] = {}
        required: list[str] = []
        for field in message.fields:
            properties[field.name] = self.field(field)
            if not field.has_presence:
                required.append(field.name)
        schema: Schema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        self.schemas[message.name] = schema
        return _ref(message.name)

    def field(self, field: FieldDescriptor) -> Schema:
        message_type = field.message_type
        if message_type is not None and message_type.GetOptions().map_entry:
            value = message_type.fields_by_name["value"]
            return {"type": "object", "additionalProperties": self.single(value)}
        if field.is_repeated:
            return {"type": "array", "items": self.single(field)}
        return self.single(field)

    def single(self, field: FieldDescriptor) -> Schema:
        kind = field.type
        if field.message_type is not None:
            return self.message(field.message_type)
        if field.enum_type is not None:
            return self.enum(field.enum_type)
        if kind == FieldDescriptor.TYPE_STRING:
            return {"type": "string"}
        if kind == FieldDescriptor.TYPE_BYTES:
            return {"type": "string", "contentEncoding": "base64"}
        if kind == FieldDescriptor.TYPE_BOOL:
            return {"type": "boolean"}
        if kind in _INTEGER_32:
            return {"type": "integer"}
        if kind in _UNSIGNED_32:
            return {"type": "integer", "minimum": 0}
        if kind in _INTEGER_64:
            return {"type": "string", "pattern": "^-?[0-9]+$"}
        if kind in _UNSIGNED_64:
            return {"type": "string", "pattern": "^[0-9]+$"}
        return {"type": "number"}  # float, double


def _error_schema() -> Schema:
    return {
        "type": "object",
        "description": "The gRPC status of the replica (or the gateway's own check): the code "
        "name and the ErrorInfo reason, unchanged (README, Errors).",
        "required": ["code", "reason", "message", "metadata"],
        "properties": {
            "code": {"type": "string", "examples": ["NOT_FOUND"]},
            "reason": {"type": "string", "examples": ["JOB_EXPIRED"]},
            "message": {"type": "string"},
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }


def _json(schema: Schema, description: str, **headers: str) -> Schema:
    response: Schema = {"description": description, "content": {JSON: {"schema": schema}}}
    if headers:
        response["headers"] = {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in headers.items()
        }
    return response


ERROR: Schema = {"$ref": "#/components/responses/Error"}
SERVED_BY: Schema = {"$ref": "#/components/headers/X-Served-By"}
ERRORS: Schema = {
    status: ERROR for status in ("400", "401", "403", "404", "409", "410", "413", "429", "503")
}
ERRORS["default"] = ERROR


def _param(name: str, where: str, description: str, **schema: Any) -> Schema:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "description": description,
        "schema": schema or {"type": "string"},
    }


JOB_ID = _param("job_id", "path", "a job id", type="string", pattern=ID_PATTERN)
BATCH_ID = _param("batch_id", "path", "a batch id", type="string", pattern=ID_PATTERN)
AFTER_VERSION = _param(
    "after_version", "query", "resume after this version (as Last-Event-ID)", type="string"
)
LAST_EVENT_ID = _param("Last-Event-ID", "header", "resume after this version", type="string")
EVENTS = {
    "description": "Server-Sent Events: `event: job` (or `batch`) with `id` = version and "
    "`data` = the JSON record, heartbeat comments, `event: end` after the terminal record, "
    "`event: stream-error` with an error body",
    "content": {
        "text/event-stream": {
            "schema": {
                "description": "one event",
                "type": "object",
                "properties": {
                    "event": {"type": "string", "enum": ["job", "batch", "end", "stream-error"]},
                    "id": {"type": "string", "pattern": "^[0-9]+$"},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                    "retry": {"type": "integer", "minimum": 0},
                },
            }
        }
    },
}
ENDED = {"description": "the stream already ended at that version: nothing to resume"}


def build_document() -> Schema:
    """The OpenAPI 3.1 document of the gateway's HTTP side."""
    schemas = _Schemas()
    job = schemas.message(job_pb2.Job.DESCRIPTOR)
    batch = schemas.message(parser_service_pb2.Batch.DESCRIPTOR)
    listing = schemas.message(parser_service_pb2.ListJobsResponse.DESCRIPTOR)
    package = schemas.message(reading_package_pb2.ReadingPackage.DESCRIPTOR)
    schemas.schemas["Error"] = _error_schema()
    served = "X-Served-By"
    submit_form = {
        "type": "object",
        "required": ["file"],
        "properties": {
            "file": {"type": "string", "contentMediaType": "application/octet-stream"},
            "password": {"type": "string"},
            "request_id": {"type": "string", "maxLength": 256},
            "wait_ms": {"type": "string", "pattern": "^[0-9]+$"},
            "languages": {"type": "string", "description": "OCR hints: BCP-47, comma separated"},
            "callback_url": {"type": "string", "description": "webhook URL for the job's end"},
            "callback_secret": {"type": "string", "description": "name of the signing secret"},
        },
    }
    paths: dict[str, Schema] = {
        "/v1/jobs": {
            "post": {
                "operationId": "submitJob",
                "summary": "Submit one document (multipart `file`, or the raw body)",
                "parameters": [
                    _param("file_name", "query", "the upload's name (raw body)"),
                    _param("wait_ms", "query", "wait up to this long for the end", type="string"),
                    _param("request_id", "query", "idempotency key (AIP-155)"),
                    _param("Idempotency-Key", "header", "idempotency key (= request_id)"),
                    _param("X-Docparse-Password", "header", "password (raw body)"),
                    _param("languages", "query", "OCR hints: BCP-47 tags, comma separated"),
                    _param("callback_url", "query", "webhook URL, POSTed the job at its end"),
                    _param("callback_secret", "query", "name of the tenant's signing secret"),
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "multipart/form-data": {"schema": submit_form},
                        "application/octet-stream": {
                            "schema": {
                                "type": "string",
                                "contentMediaType": "application/octet-stream",
                            }
                        },
                    },
                },
                "responses": {
                    "200": _json(job, "the job, already ended (the sync answer)"),
                    "202": _json(job, "the job, queued or running", Location="/v1/jobs/{id}"),
                    **ERRORS,
                },
            },
            "get": {
                "operationId": "listJobs",
                "summary": "The caller's jobs, newest first, a page at a time (AIP-158)",
                "parameters": [
                    _param(
                        "state",
                        "query",
                        "only jobs in these states (comma separated; STATE_RUNNING or running)",
                    ),
                    _param("batch_id", "query", "only the files of this batch"),
                    _param("page_size", "query", "jobs per page (50; at most 500)", type="string"),
                    _param("page_token", "query", "next_page_token of the previous page"),
                ],
                "responses": {"200": _json(listing, "a page of jobs"), **ERRORS},
            },
        },
        "/v1/jobs/{job_id}": {
            "get": {
                "operationId": "getJob",
                "summary": "The job",
                "parameters": [JOB_ID],
                "responses": {"200": _json(job, "the job's current record"), **ERRORS},
            }
        },
        "/v1/jobs/{job_id}/result": {
            "get": {
                "operationId": "getResult",
                "summary": "The reading package of a SUCCEEDED job, checked against its sha256",
                "parameters": [
                    JOB_ID,
                    _param(
                        "format",
                        "query",
                        "json (default), text, markdown or proto",
                        type="string",
                        enum=["json", "text", "markdown", "proto"],
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "the package (ETag: its sha256)",
                        "content": {
                            JSON: {"schema": package},
                            "text/plain": {"schema": {"type": "string"}},
                            "text/markdown": {"schema": {"type": "string"}},
                            "application/x-protobuf": {"schema": {"type": "string"}},
                        },
                    },
                    **ERRORS,
                },
            }
        },
        "/v1/jobs/{job_id}:cancel": {
            "post": {
                "operationId": "cancelJob",
                "summary": "Cancel a job that has not ended",
                "parameters": [JOB_ID],
                "responses": {"200": _json(job, "the cancelled job"), **ERRORS},
            }
        },
        "/v1/jobs/{job_id}/events": {
            "get": {
                "operationId": "jobEvents",
                "summary": "The job's records as Server-Sent Events, until it ends",
                "parameters": [JOB_ID, AFTER_VERSION, LAST_EVENT_ID],
                "responses": {"200": EVENTS, "204": ENDED, **ERRORS},
            }
        },
        "/v1/jobs/{job_id}/assets/{asset_id}": {
            "get": {
                "operationId": "getAsset",
                "summary": "One asset (an image) of a SUCCEEDED job",
                "parameters": [
                    JOB_ID,
                    _param("asset_id", "path", "an asset id", type="string", pattern=ID_PATTERN),
                    _param("Range", "header", "one byte range: bytes=a-b, a- or -n"),
                    _param("If-None-Match", "header", "the ETag the client has"),
                    _param("If-Range", "header", "the range applies only to this ETag"),
                ],
                "responses": {
                    "200": {
                        "description": "the asset, as its type (ETag: its sha256)",
                        "content": {"*/*": {"schema": {"type": "string"}}},
                    },
                    "206": {
                        "description": "the byte range asked for (Content-Range)",
                        "content": {"*/*": {"schema": {"type": "string"}}},
                    },
                    "304": {"description": "the client's copy (If-None-Match) is current"},
                    "416": _json(_ref("Error"), "the range starts beyond the end"),
                    **ERRORS,
                },
            }
        },
        "/v1/batches": {
            "post": {
                "operationId": "createBatch",
                "summary": "Submit several documents as one batch (multipart)",
                "parameters": [
                    _param("request_id", "query", "idempotency key (AIP-155)"),
                    _param("Idempotency-Key", "header", "idempotency key (= request_id)"),
                    _param("languages", "query", "OCR hints for every file, comma separated"),
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "file": {
                                        "type": "array",
                                        "items": {
                                            "type": "string",
                                            "contentMediaType": "application/octet-stream",
                                        },
                                    },
                                    "request_id": {"type": "string", "maxLength": 256},
                                    "languages": {"type": "string"},
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "202": _json(batch, "the batch, its files queued", Location="/v1/batches/{id}"),
                    **ERRORS,
                },
            }
        },
        "/v1/batches/{batch_id}": {
            "get": {
                "operationId": "getBatch",
                "summary": "The batch: counters and every file's job",
                "parameters": [BATCH_ID],
                "responses": {"200": _json(batch, "the batch"), **ERRORS},
            }
        },
        "/v1/batches/{batch_id}/events": {
            "get": {
                "operationId": "batchEvents",
                "summary": "The batch as Server-Sent Events, until every file ended",
                "parameters": [BATCH_ID, AFTER_VERSION, LAST_EVENT_ID],
                "responses": {"200": EVENTS, "204": ENDED, **ERRORS},
            }
        },
        "/healthz": {
            "get": {
                "operationId": "healthz",
                "summary": "200 while serving, 503 while starting or shutting down",
                "security": [],
                "responses": {
                    status: {
                        "description": text,
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                    for status, text in (("200", "serving"), ("503", "starting or stopping"))
                },
            }
        },
        "/": {
            "get": {
                "operationId": "uploadPage",
                "summary": "The upload page",
                "security": [],
                "responses": {
                    "200": {
                        "description": "HTML",
                        "content": {"text/html": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/static/{name}": {
            "get": {
                "operationId": "staticFile",
                "summary": "A file of the upload page",
                "security": [],
                "parameters": [_param("name", "path", "the file's name")],
                "responses": {
                    "200": {
                        "description": "the file",
                        "content": {"*/*": {"schema": {"type": "string"}}},
                    },
                    "404": {
                        "description": "no such file",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                },
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "security": [],
                "responses": {"200": _json({"type": "object"}, "the OpenAPI document")},
            }
        },
    }
    for path in paths.values():
        for operation in path.values():
            for response in operation["responses"].values():
                if "$ref" not in response:
                    response.setdefault("headers", {})[served] = SERVED_BY
    error = _json(_ref("Error"), "an error (README, Errors: the HTTP status follows the gRPC code)")
    error["headers"] = {
        served: SERVED_BY,
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
                served: {
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
