"""The component schemas of the OpenAPI document (gateway.http.openapi): the JSON schemas of
the bodies, made from the protobuf descriptors (the bodies are those messages in their JSON
form: proto field names, enums by name, 64-bit integers as strings, every field without
presence present), the error body, the upload forms and the marks of a result with `pages`."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from docparse.reasons import ErrorReason

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


def ref(name: str) -> Schema:
    """A reference to the component schema `name`."""
    return {"$ref": f"#/components/schemas/{name}"}


class MessageSchemas:
    """JSON schemas of protobuf messages (and the messages they contain), by short name."""

    def __init__(self) -> None:
        self.schemas: dict[str, Schema] = {}

    def enum(self, enum: EnumDescriptor) -> Schema:
        if enum.name not in self.schemas:
            self.schemas[enum.name] = {
                "type": "string",
                "enum": [value.name for value in enum.values],
            }
        return ref(enum.name)

    def message(self, message: Descriptor) -> Schema:
        if message.full_name == "google.protobuf.Timestamp":
            return {"type": "string", "format": "date-time"}
        if message.name in self.schemas:
            return ref(message.name)
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
        return ref(message.name)

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


def error_schema() -> Schema:
    """The JSON error body (gateway.http.errors)."""
    return {
        "type": "object",
        "description": "The gRPC status of the replica (or the gateway's own check): the code "
        "name and the ErrorInfo reason, unchanged (README, Errors).",
        "required": ["code", "reason", "message", "metadata"],
        "properties": {
            "code": {"type": "string", "examples": ["NOT_FOUND"]},
            "reason": {"type": "string", "examples": [ErrorReason.JOB_EXPIRED]},
            "message": {"type": "string"},
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }


# GET /v1/jobs/{id}/result?pages= (gateway/http/page_results.py).
PARTIAL = "Docparse-Partial"


def partial_header() -> Schema:
    return {
        "description": "with `pages`: true while the job runs (pages not read yet are absent, "
        "drafts may change), false once every page is its final",
        "schema": {"type": "string", "enum": ["true", "false"]},
    }


def page_marks() -> Schema:
    """The fields a JSON answer with `pages` has beside the package's."""
    return {
        "type": "object",
        "properties": {
            "partial": {
                "type": "boolean",
                "description": "with `pages`: as the Docparse-Partial header",
            },
            "draft_pages": {
                "type": "array",
                "items": {"type": "integer", "minimum": 1},
                "description": "with `pages`: the pages whose content is a draft ([] when "
                "every page is final)",
            },
        },
    }


# SubmitJob's per-job parse options (gateway/http/job_options.py), as form fields and queries.
SUBMIT_OPTIONS = (
    ("pages", 'PDF pages to read, 1-based: "1-5,10,20-" (default: every page)'),
    ("images", "none | referenced (default: listed, JPEGs stored as they are) | all"),
    ("ocr_mode", "auto (default) | force | off"),
    ("ocr_dpi", "OCR render resolution, 72 to 400 (default: the deployment's)"),
)
SUBMIT_FORM = {
    "type": "object",
    "required": ["file"],
    "properties": {
        "file": {"type": "string", "contentMediaType": "application/octet-stream"},
        "password": {"type": "string"},
        "request_id": {"type": "string", "maxLength": 256},
        "wait_ms": {"type": "string", "pattern": "^[0-9]+$"},
        "languages": {"type": "string", "description": "OCR hints: BCP-47, comma separated"},
        **{name: {"type": "string", "description": about} for name, about in SUBMIT_OPTIONS},
        "callback_url": {"type": "string", "description": "webhook URL for the job's end"},
        "callback_secret": {"type": "string", "description": "name of the signing secret"},
    },
}
BATCH_FORM = {
    "type": "object",
    "properties": {
        "file": {
            "type": "array",
            "items": {"type": "string", "contentMediaType": "application/octet-stream"},
        },
        "request_id": {"type": "string", "maxLength": 256},
        "languages": {"type": "string"},
        "callback_url": {"type": "string", "description": "webhook URL for the batch's end"},
        "callback_secret": {"type": "string", "description": "name of the signing secret"},
    },
}
