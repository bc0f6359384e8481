"""JSON endpoints: submit, status, result, cancel, batches. Each is one (or one streaming)
call to a parser_svc replica through the gateway's upstream channel; the answers are the
protobuf messages in their JSON form (proto field names, enums by name, 64-bit integers as
strings, every scalar field present)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError
from google.protobuf import json_format
from google.protobuf.message import Message

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.errors import check_request_id, error
from gateway.http.errors import echo, parse_uint
from gateway.http.job_options import job_options
from gateway.http.keys import SETTINGS, UPSTREAM
from gateway.http.render_turns import release_turn, renderer
from gateway.http.rendering import HTML_RESULT_CSP, RESULT_FORMATS, result_format
from gateway.http.result_fetch import fetch_result
from gateway.http.upstream import HttpError, Req, Resp, rpc_failure, served_by_header

TERMINAL = frozenset({job_pb2.STATE_SUCCEEDED, job_pb2.STATE_FAILED, job_pb2.STATE_CANCELLED})
CHUNK_BYTES = 1024 * 1024
FIELD_LIMIT_BYTES = 4096
MAX_WAIT_MS = 10 * 60 * 1000


def to_json(message: Message) -> str:
    return json_format.MessageToJson(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
        indent=None,
    )


def json_response(
    message: Message, served_by: str, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        status=status,
        text=to_json(message),
        content_type="application/json",
        headers={"X-Served-By": served_by, "Cache-Control": "no-store", **(headers or {})},
    )


def upload_too_large(file_name: str, limit: int) -> DocparseError:
    return error(
        ErrorReason.DOCUMENT_TOO_LARGE,
        f"{echo(file_name)} is larger than the upload limit of {limit} bytes",
        {"file_name": file_name[:200], "limit_bytes": str(limit)},
    )


async def _read_limited(part: BodyPartReader, limit: int, name: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await part.read_chunk(CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            raise HttpError(upload_too_large(name, limit))
        chunks.append(chunk)
    return b"".join(chunks)


async def _parts(request: web.Request) -> MultipartReader:
    try:
        return await request.multipart()
    except (AssertionError, ValueError) as err:  # not multipart, or no boundary
        raise HttpError(
            error(ErrorReason.BAD_MULTIPART, "unreadable multipart body (no boundary?)")
        ) from err


class Upload:
    """The files and form fields of one multipart request, read one part at a time."""

    def __init__(self, reader: MultipartReader, limit: int) -> None:
        self.reader = reader
        self.limit = limit
        self.fields: dict[str, str] = {}

    async def next_file(self) -> tuple[str, bytes] | None:
        """The next part that is a file (name, content); plain fields are kept in `fields`.
        A body that is not the multipart it claims to be: BAD_MULTIPART."""
        try:
            return await self._next_file()
        except (ValueError, AssertionError, LookupError, HttpProcessingError) as err:
            raise HttpError(
                error(ErrorReason.BAD_MULTIPART, "unreadable multipart body (boundary, headers?)")
            ) from err

    async def _next_file(self) -> tuple[str, bytes] | None:
        while True:
            part = await self.reader.next()
            if part is None:
                return None
            if not isinstance(part, BodyPartReader):
                raise HttpError(
                    error(ErrorReason.BAD_MULTIPART, "nested multipart is not supported")
                )
            if part.filename is None:
                value = await _read_limited(part, FIELD_LIMIT_BYTES, part.name or "field")
                self.fields[text(part.name or "")] = value.decode("utf-8", "replace")
                continue
            name = text(part.filename)
            return name, await _read_limited(part, self.limit, name)


def text(value: str) -> str:
    """A client's string as protobuf can carry it: lone surrogates (what undecodable bytes in
    a URL, header or part name become) replaced, so building the request cannot fail."""
    return value.encode("utf-8", "replace").decode("utf-8")


def _wait_ms(request: web.Request, fields: dict[str, str]) -> int:
    raw = request.query.get("wait_ms", fields.get("wait_ms", "0")).strip() or "0"
    return min(parse_uint(raw, "wait_ms", ErrorReason.INVALID_WAIT), MAX_WAIT_MS)


def _callback(request: web.Request, fields: dict[str, str]) -> parser_service_pb2.Callback:
    """The webhook: `callback_url` and `callback_secret` (the name of a secret the tenant
    registered), as form fields or in the URL; the replica checks them."""
    url, name = (
        request.query.get(k, fields.get(k, "")) for k in ("callback_url", "callback_secret")
    )
    return parser_service_pb2.Callback(url=text(url), secret_name=text(name))


def _request_id(request: web.Request, fields: dict[str, str]) -> str:
    request_id = text(
        request.headers.get("Idempotency-Key")
        or request.query.get("request_id")
        or fields.get("request_id", "")
    )
    check_request_id(request_id)
    return request_id


def _languages(request: web.Request, fields: dict[str, str]) -> list[str]:
    """The OCR language hints: `languages` in the URL or a form field, comma separated BCP-47
    tags ("de", "en,ru"). Passed through as given: the replica checks them (an uninstalled one
    is 400 LANGUAGE_NOT_INSTALLED naming the installed ones)."""
    raw = text(request.query.get("languages", fields.get("languages", "")))
    return [tag.strip() for tag in raw.split(",") if tag.strip()]


def _checked_before_reading(request: web.Request) -> int:
    """What can be checked before a byte of an upload is read: the API key (401), and the
    parameters that came in the URL or headers (400). Returns the upload limit: the gateway's,
    or the key's `max_upload_bytes` when that is lower."""
    caller = request.app[UPSTREAM].caller(request)
    limit: int = request.app[SETTINGS].http_max_upload_bytes
    if caller.limits.max_upload_bytes:
        limit = min(limit, caller.limits.max_upload_bytes)
    if "wait_ms" in request.query:
        _wait_ms(request, {})
    _request_id(request, {})
    return limit


async def submit_job(request: web.Request) -> web.Response:
    """POST /v1/jobs: a multipart upload (field `file`, optional `password`, `request_id`,
    `wait_ms`, `languages`, `pages`, `images`, `ocr_mode`, `ocr_dpi`) or the raw document as
    the body with `?file_name=` (and the same options in the URL). 200 with a terminal job
    (the sync answer, when `wait_ms` allowed it), else 202 with the QUEUED/RUNNING job."""
    limit = _checked_before_reading(request)
    fields: dict[str, str] = {}
    if request.content_type.startswith("multipart/"):
        upload = Upload(await _parts(request), limit)
        found = await upload.next_file()
        if found is None:
            raise HttpError(error(ErrorReason.MISSING_FILE, "the multipart body has no file part"))
        if await upload.next_file() is not None:
            raise HttpError(
                error(ErrorReason.TOO_MANY_FILES, "POST /v1/jobs takes one file; use /v1/batches")
            )
        file_name, content = found
        fields = upload.fields
        password = text(fields.get("password", ""))
    else:
        file_name = text(request.query.get("file_name", ""))
        if request.content_length is not None and request.content_length > limit:
            raise HttpError(upload_too_large(file_name, limit))
        content = await request.content.read(limit + 1)
        while len(content) <= limit and (more := await request.content.read(limit + 1)):
            content += more
        if len(content) > limit:
            raise HttpError(upload_too_large(file_name, limit))
        password = text(request.headers.get("X-Docparse-Password", ""))
    wait_ms = _wait_ms(request, fields)
    upstream = request.app[UPSTREAM]
    reply, served = await upstream.unary(
        upstream.stub.SubmitJob,
        parser_service_pb2.SubmitJobRequest(
            file_name=file_name,
            content=content,
            request_id=_request_id(request, fields),
            callback=_callback(request, fields),
            wait_timeout_ms=wait_ms,
            password=password,
            languages=_languages(request, fields),
            **job_options(request, fields),  # type: ignore[arg-type]
        ),
        request,
        extra_timeout_s=wait_ms / 1000,
    )
    job = reply.job
    status = 200 if job.state in TERMINAL else 202
    return json_response(job, served, status, {"Location": f"/v1/jobs/{job.job_id}"})


async def _answer_record(
    request: web.Request,
    method: grpc.aio.UnaryUnaryMultiCallable[Req, Resp],
    message: Req,
    record: Callable[[Resp], Message],
) -> web.Response:
    """One unary call whose reply carries one record (a job, a batch): that record, as JSON."""
    reply, served = await request.app[UPSTREAM].unary(method, message, request)
    return json_response(record(reply), served)


async def get_job(request: web.Request) -> web.Response:
    """GET /v1/jobs/{id}: the job's current record."""
    stub, job_id = request.app[UPSTREAM].stub, text(request.match_info["job_id"])
    message = parser_service_pb2.GetStatusRequest(job_id=job_id)
    return await _answer_record(request, stub.GetStatus, message, lambda reply: reply.job)


async def cancel_job(request: web.Request) -> web.Response:
    """POST /v1/jobs/{id}:cancel: the cancelled job."""
    stub, job_id = request.app[UPSTREAM].stub, text(request.match_info["job_id"])
    message = parser_service_pb2.CancelJobRequest(job_id=job_id)
    return await _answer_record(request, stub.CancelJob, message, lambda reply: reply.job)


async def send_bytes(req: web.Request, data: bytes, head: dict[str, str]) -> web.StreamResponse:
    """`data` as the answer, written in chunks."""
    response = web.StreamResponse(headers=head)
    response.content_length = len(data)
    await response.prepare(req)
    view = memoryview(data)
    for offset in range(0, len(data), CHUNK_BYTES):
        await response.write(view[offset : offset + CHUNK_BYTES])
    await response.write_eof()
    return response


async def get_result(request: web.Request) -> web.StreamResponse:
    """GET /v1/jobs/{id}/result[?format=json|text|markdown|html|chunks|proto][&furniture=true]:
    the reading package, checked before anything is sent (`pages`: page_results.py)."""
    job_id = text(request.match_info["job_id"])
    fmt, furniture = result_format(request.query)
    data, ref, served = await fetch_result(request, job_id)
    headers = {
        "X-Served-By": served,
        "ETag": f'"{ref.sha256}"',
        "Cache-Control": "no-store",
        "Content-Type": RESULT_FORMATS[fmt] + ("" if fmt == "proto" else "; charset=utf-8"),
    }
    if fmt == "html":  # escaped already; nothing in it runs or loads from elsewhere anyway
        headers["Content-Security-Policy"] = HTML_RESULT_CSP
    if fmt != "proto":  # seconds of CPU for a big package: never on this loop
        data = await renderer(request).render(data, fmt, furniture)
        release_turn(request)  # the worker goes to the next in line (render_turns.py)
    return await send_bytes(request, data, headers)


async def create_batch(request: web.Request) -> web.Response:
    """POST /v1/batches: multipart with several file parts (any field name), optional
    `request_id`, `languages`, `callback_url` and `callback_secret` (fields before the first
    file, or in the URL). Streamed to a replica with UploadBatch one file at a time: the gateway
    holds at most one file in memory. 202 with the batch (its files QUEUED)."""
    if not request.content_type.startswith("multipart/"):
        raise HttpError(
            error(ErrorReason.BAD_MULTIPART, "POST /v1/batches takes multipart/form-data")
        )
    upload = Upload(await _parts(request), _checked_before_reading(request))
    upstream = request.app[UPSTREAM]
    call = upstream.stub.UploadBatch(
        timeout=upstream.unary_timeout_s, metadata=upstream.metadata(request)
    )
    try:
        header_sent = False
        files_sent = 0
        while (found := await upload.next_file()) is not None:
            if not header_sent:  # request_id may be a field before the first file
                await _send_header(call, _upload_header(request, upload.fields))
                header_sent = True
            file_name, content = found
            await _send_file(call, files_sent, file_name, content)
            files_sent += 1
        if not header_sent:
            await call.write(_upload_header(request, upload.fields))
        await call.done_writing()
        reply = await call
        served = served_by_header(await call.trailing_metadata())
    except grpc.aio.AioRpcError as err:
        raise rpc_failure(err) from err
    except asyncio.InvalidStateError:
        # The replica ended the call (it refused a file) while a write was on its way: answer
        # with its status, not a 500.
        try:
            await call
        except grpc.aio.AioRpcError as err:
            raise rpc_failure(err) from err
        raise
    except BaseException:
        call.cancel()
        raise
    batch_id = reply.batch.batch_id
    return json_response(reply.batch, served, 202, {"Location": f"/v1/batches/{batch_id}"})


async def _send_file(
    call: grpc.aio.StreamUnaryCall[Any, Any], index: int, file_name: str, content: bytes
) -> None:
    """One file of an UploadBatch: its header, then its bytes in chunks."""
    if not content:  # the replica refuses it only once the next file is on its way
        raise HttpError(
            error(
                ErrorReason.EMPTY_CONTENT,
                f"file {index} is empty",
                {"file_index": str(index), "file_name": file_name[:200]},
            )
        )
    await call.write(
        parser_service_pb2.UploadBatchRequest(
            file=parser_service_pb2.UploadFileHeader(file_name=file_name, size_bytes=len(content))
        )
    )
    for offset in range(0, len(content), CHUNK_BYTES):
        chunk = content[offset : offset + CHUNK_BYTES]
        await call.write(parser_service_pb2.UploadBatchRequest(chunk=chunk))


async def _send_header(
    call: grpc.aio.StreamUnaryCall[Any, Any], header: parser_service_pb2.UploadBatchRequest
) -> None:
    """Writes an UploadBatch header and waits for the replica's verdict on it (initial metadata
    `x-docparse-upload: header-accepted`, or the end of the call): a refused header (a language
    that is not installed) then answers with the replica's status. Writing files at once would
    race the refusal, and a write that loses the race ends the call INTERNAL, the replica's
    reason lost."""
    await call.write(header)
    metadata = await call.initial_metadata()
    if ("x-docparse-upload", "header-accepted") not in tuple(metadata or ()):
        await call  # the call ends (trailers only): raises the replica's error


def _upload_header(
    request: web.Request, fields: dict[str, str]
) -> parser_service_pb2.UploadBatchRequest:
    header = parser_service_pb2.UploadBatchHeader(
        request_id=_request_id(request, fields), languages=_languages(request, fields)
    )
    header.callback.CopyFrom(_callback(request, fields))  # the replica checks it, as a job's
    return parser_service_pb2.UploadBatchRequest(header=header)


async def get_batch(request: web.Request) -> web.Response:
    """GET /v1/batches/{id}: the batch, its counters and every file's job."""
    stub, batch_id = request.app[UPSTREAM].stub, text(request.match_info["batch_id"])
    message = parser_service_pb2.GetBatchRequest(batch_id=batch_id)
    return await _answer_record(request, stub.GetBatch, message, lambda reply: reply.batch)
