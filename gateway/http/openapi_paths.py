"""The path items of the OpenAPI document (gateway.http.openapi): every route of the HTTP
side, its parameters, bodies and answers, written next to each other so a route added to
gateway.http is added here too (tests/gateway/test_openapi.py fails until it is)."""

from __future__ import annotations

from typing import Any

from gateway.http.openapi_schemas import (
    BATCH_FORM,
    PARTIAL,
    SUBMIT_FORM,
    SUBMIT_OPTIONS,
    Schema,
    page_marks,
    partial_header,
    ref,
)

ID_PATTERN = "^[^/:{}]+$"
JSON = "application/json"
PROTO = "application/x-protobuf"
SERVED = "X-Served-By"

ERROR: Schema = {"$ref": "#/components/responses/Error"}
SERVED_BY: Schema = {"$ref": f"#/components/headers/{SERVED}"}
ERRORS: Schema = {
    status: ERROR for status in ("400", "401", "403", "404", "409", "410", "413", "429", "503")
}
ERRORS["default"] = ERROR


def json_body(schema: Schema, description: str, **headers: str) -> Schema:
    """A JSON response of `schema`, with string headers (name: description)."""
    response: Schema = {"description": description, "content": {JSON: {"schema": schema}}}
    if headers:
        response["headers"] = {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in headers.items()
        }
    return response


def _raw(description: str, media_type: str = "*/*") -> Schema:
    """A response that is not JSON: bytes or text of `media_type`."""
    return {"description": description, "content": {media_type: {"schema": {"type": "string"}}}}


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


def _operation(
    operation_id: str,
    summary: str,
    responses: Schema,
    *,
    parameters: list[Schema] | None = None,
    request_body: Schema | None = None,
    public: bool = False,
) -> Schema:
    """One operation; `public` ones need no API key."""
    operation: Schema = {"operationId": operation_id, "summary": summary}
    if public:
        operation["security"] = []
    if parameters is not None:
        operation["parameters"] = parameters
    if request_body is not None:
        operation["requestBody"] = request_body
    operation["responses"] = responses
    return operation


def _record(operation_id: str, summary: str, id_param: Schema, answer: Schema) -> Schema:
    """An operation on one job or batch (by its id in the path) that answers its record."""
    return _operation(operation_id, summary, {"200": answer, **ERRORS}, parameters=[id_param])


def _events(
    operation_id: str,
    summary: str,
    parameters: list[Schema],
    about: str,
    names: tuple[str, ...] = ("job", "batch"),
    event_id: Schema | None = None,
) -> Schema:
    """Server-Sent Events (gateway.http.sse, gateway.http.page_events)."""
    event = {
        "description": about,
        "content": {
            "text/event-stream": {
                "schema": {
                    "description": "one event",
                    "type": "object",
                    "properties": {
                        "event": {"type": "string", "enum": [*names, "end", "stream-error"]},
                        "id": event_id or {"type": "string", "pattern": "^[0-9]+$"},
                        "data": {"type": "string", "contentMediaType": "application/json"},
                        "retry": {"type": "integer", "minimum": 0},
                    },
                }
            }
        },
    }
    ended = {"description": "the stream already ended there: nothing to resume"}
    return _operation(
        operation_id, summary, {"200": event, "204": ended, **ERRORS}, parameters=parameters
    )


def _record_events(operation_id: str, summary: str, id_param: Schema) -> Schema:
    about = (
        "Server-Sent Events: `event: job` (or `batch`) with `id` = version and `data` = the "
        "JSON record, heartbeat comments, `event: end` after the terminal record, "
        "`event: stream-error` with an error body"
    )
    return _events(operation_id, summary, [id_param, AFTER_VERSION, LAST_EVENT_ID], about)


def _page_events() -> Schema:
    """A job's pages as they are read: GET /v1/jobs/{job_id}/pages (gateway.http.page_events)."""
    about = (
        "Server-Sent Events: `event: page` per page with `id` = its cursor and `data` = JSON "
        "{page_number, final, attempt, sha256, cursor, markdown (the page as Markdown), "
        "json_url (the page as JSON: result?pages=n)}: drafts (final false) while the job "
        "runs, then every page of the final package; heartbeat comments; `event: end` with "
        "`id: end` and the terminal job as data; `event: stream-error` with an error body"
    )
    parameters = [
        JOB_ID,
        _param("cursor", "query", "resume after this page event id (as Last-Event-ID)"),
        _param("Last-Event-ID", "header", "resume after this page event id; `end`: 204"),
    ]
    summary = "The job's pages as Server-Sent Events while it runs, then its final pages"
    return _events("jobPages", summary, parameters, about, ("page",), {"type": "string"})


def _submit_job(job: Schema) -> Schema:
    """Submit one document: POST /v1/jobs."""
    return _operation(
        "submitJob",
        "Submit one document (multipart `file`, or the raw body)",
        {
            "200": json_body(job, "the job, already ended (the sync answer)"),
            "202": json_body(job, "the job, queued or running", Location="/v1/jobs/{id}"),
            **ERRORS,
        },
        parameters=[
            _param("file_name", "query", "the upload's name (raw body)"),
            _param("wait_ms", "query", "wait up to this long for the end", type="string"),
            _param("request_id", "query", "idempotency key (AIP-155)"),
            _param("Idempotency-Key", "header", "idempotency key (= request_id)"),
            _param("X-Docparse-Password", "header", "password (raw body)"),
            _param("languages", "query", "OCR hints: BCP-47 tags, comma separated"),
            *(_param(name, "query", about) for name, about in SUBMIT_OPTIONS),
            _param("callback_url", "query", "webhook URL, POSTed the job at its end"),
            _param("callback_secret", "query", "name of the tenant's signing secret"),
        ],
        request_body={
            "required": True,
            "content": {
                "multipart/form-data": {"schema": SUBMIT_FORM},
                "application/octet-stream": {
                    "schema": {"type": "string", "contentMediaType": "application/octet-stream"}
                },
            },
        },
    )


def _list_jobs(listing: Schema) -> Schema:
    """A page of the caller's jobs: GET /v1/jobs."""
    return _operation(
        "listJobs",
        "The caller's jobs, newest first, a page at a time (AIP-158)",
        {"200": json_body(listing, "a page of jobs"), **ERRORS},
        parameters=[
            _param(
                "state",
                "query",
                "only jobs in these states (comma separated; STATE_RUNNING or running)",
            ),
            _param("batch_id", "query", "only the files of this batch"),
            _param("page_size", "query", "jobs per page (50; at most 500)", type="string"),
            _param("page_token", "query", "next_page_token of the previous page"),
        ],
    )


def _get_result(package: Schema) -> Schema:
    """A job's reading package: GET /v1/jobs/{job_id}/result."""
    texts = ("text/plain", "text/markdown", "text/html", "application/jsonl")
    answer: Schema = {
        "description": "the package (ETag: its sha256; with `pages`, Docparse-Partial instead)",
        "content": {
            JSON: {"schema": {"allOf": [package, page_marks()]}},
            **{media: {"schema": {"type": "string"}} for media in (*texts, PROTO)},
        },
        "headers": {PARTIAL: partial_header()},
    }
    return _operation(
        "getResult",
        "The reading package of a SUCCEEDED job, checked against its sha256, or some of its "
        "pages (also while the job runs)",
        {"200": answer, **ERRORS},
        parameters=[
            JOB_ID,
            _param(
                "pages",
                "query",
                'only these pages: "1-5,10,20-" (1-based; "" every page; else 400 '
                "INVALID_PAGE_RANGE); while the job runs, the pages read so far, the answer "
                "marked partial (Docparse-Partial: true; JSON: partial, draft_pages); the "
                "first such read turns the job's drafts on and waits, at most 2 s, for the "
                "pages read before it",
            ),
            _param(
                "format",
                "query",
                "json (default), text, markdown, html (a self-contained HTML5 document: "
                "heading tree, lists, tables with merged cells), chunks (JSON Lines: sections "
                "by heading path for retrieval) or proto",
                type="string",
                enum=["json", "text", "markdown", "html", "chunks", "proto"],
            ),
            _param(
                "furniture",
                "query",
                "true keeps page furniture (running headers, footers, page numbers) in text, "
                "markdown and html; false (default) leaves it out",
                type="string",
                enum=["true", "false"],
            ),
        ],
    )


def _get_asset() -> Schema:
    """One asset of a job: GET /v1/jobs/{job_id}/assets/{asset_id}."""
    return _operation(
        "getAsset",
        "One asset (an image) of a SUCCEEDED job",
        {
            "200": _raw("the asset, as its type (ETag: its sha256)"),
            "206": _raw("the byte range asked for (Content-Range)"),
            "304": {"description": "the client's copy (If-None-Match) is current"},
            "416": json_body(ref("Error"), "the range starts beyond the end"),
            **ERRORS,
        },
        parameters=[
            JOB_ID,
            _param("asset_id", "path", "an asset id", type="string", pattern=ID_PATTERN),
            _param("Range", "header", "one byte range: bytes=a-b, a- or -n"),
            _param("If-None-Match", "header", "the ETag the client has"),
            _param("If-Range", "header", "the range applies only to this ETag"),
        ],
    )


def _job_paths(job: Schema, listing: Schema, package: Schema) -> dict[str, Schema]:
    submit, list_jobs = _submit_job(job), _list_jobs(listing)
    result, asset = _get_result(package), _get_asset()
    return {
        "/v1/jobs": {"post": submit, "get": list_jobs},
        "/v1/jobs/{job_id}": {
            "get": _record("getJob", "The job", JOB_ID, json_body(job, "the job's current record"))
        },
        "/v1/jobs/{job_id}/result": {"get": result},
        "/v1/jobs/{job_id}:cancel": {
            "post": _record(
                "cancelJob",
                "Cancel a job that has not ended",
                JOB_ID,
                json_body(job, "the cancelled job"),
            )
        },
        "/v1/jobs/{job_id}/events": {
            "get": _record_events(
                "jobEvents", "The job's records as Server-Sent Events, until it ends", JOB_ID
            )
        },
        "/v1/jobs/{job_id}/pages": {"get": _page_events()},
        "/v1/jobs/{job_id}/assets/{asset_id}": {"get": asset},
    }


def _batch_paths(batch: Schema) -> dict[str, Schema]:
    create = _operation(
        "createBatch",
        "Submit several documents as one batch (multipart)",
        {
            "202": json_body(batch, "the batch, its files queued", Location="/v1/batches/{id}"),
            **ERRORS,
        },
        parameters=[
            _param("request_id", "query", "idempotency key (AIP-155)"),
            _param("Idempotency-Key", "header", "idempotency key (= request_id)"),
            _param("languages", "query", "OCR hints for every file, comma separated"),
            _param("callback_url", "query", "webhook URL, POSTed the batch when all files end"),
            _param("callback_secret", "query", "name of the tenant's signing secret"),
        ],
        request_body={
            "required": True,
            "content": {"multipart/form-data": {"schema": BATCH_FORM}},
        },
    )
    return {
        "/v1/batches": {"post": create},
        "/v1/batches/{batch_id}": {
            "get": _record(
                "getBatch",
                "The batch: counters and every file's job",
                BATCH_ID,
                json_body(batch, "the batch"),
            )
        },
        "/v1/batches/{batch_id}/events": {
            "get": _record_events(
                "batchEvents", "The batch as Server-Sent Events, until every file ended", BATCH_ID
            )
        },
    }


def _public_paths() -> dict[str, Schema]:
    """The routes that need no API key: health, the upload page, this document."""
    healthz = _operation(
        "healthz",
        "200 while serving, 503 while starting or shutting down",
        {
            status: _raw(text, "text/plain")
            for status, text in (("200", "serving"), ("503", "starting or stopping"))
        },
        public=True,
    )
    static = _operation(
        "staticFile",
        "A file of the upload page",
        {"200": _raw("the file"), "404": _raw("no such file", "text/plain")},
        parameters=[_param("name", "path", "the file's name")],
        public=True,
    )
    return {
        "/healthz": {"get": healthz},
        "/": {
            "get": _operation(
                "uploadPage", "The upload page", {"200": _raw("HTML", "text/html")}, public=True
            )
        },
        "/static/{name}": {"get": static},
        "/openapi.json": {
            "get": _operation(
                "openapi",
                "This document",
                {"200": json_body({"type": "object"}, "the OpenAPI document")},
                public=True,
            )
        },
    }


def path_items(job: Schema, batch: Schema, listing: Schema, package: Schema) -> dict[str, Schema]:
    """Every route, by path; the schemas are references to the component schemas of the
    bodies. Every answer but the shared error response says its X-Served-By header."""
    paths = {**_job_paths(job, listing, package), **_batch_paths(batch), **_public_paths()}
    for path in paths.values():
        for operation in path.values():
            for response in operation["responses"].values():
                if "$ref" not in response:
                    response.setdefault("headers", {})[SERVED] = SERVED_BY
    return paths
