"""gRPC status → HTTP status, and the one JSON error body every HTTP endpoint answers with.

The body is `{"code", "reason", "message", "metadata"}`: the gRPC code name and the ErrorInfo
reason of the replica's `google.rpc.Status`, unchanged, so an HTTP client branches on the same
stable reasons as a gRPC client. The reason picks between statuses where HTTP is finer than
gRPC: a job that never existed is 404, one whose retention ran out is 410.
"""

from __future__ import annotations

import json

import grpc
from aiohttp import web

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse_server.errors import error

# Seconds a client should wait before retrying a 503 / 429.
RETRY_AFTER_S = 1

_BY_CODE: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
# Reasons that refine the code's status.
_BY_REASON: dict[tuple[grpc.StatusCode, str], int] = {
    (grpc.StatusCode.NOT_FOUND, ErrorReason.JOB_EXPIRED): 410,
    (grpc.StatusCode.NOT_FOUND, ErrorReason.RESULT_EXPIRED): 410,
    (grpc.StatusCode.RESOURCE_EXHAUSTED, ErrorReason.DOCUMENT_TOO_LARGE): 413,
    (grpc.StatusCode.RESOURCE_EXHAUSTED, ErrorReason.RESULT_TOO_LARGE_TO_RENDER): 413,
}
_RETRYABLE = {429, 503}


def http_status(err: DocparseError) -> int:
    return _BY_REASON.get((err.code, err.reason), _BY_CODE.get(err.code, 500))


def error_body(err: DocparseError) -> dict[str, object]:
    return {
        "code": err.code.name,
        "reason": err.reason,
        "message": err.message,
        "metadata": err.metadata,
    }


def retry_after_s(err: DocparseError) -> int:
    """The wait the error names (`retry_after_s` in its metadata: a rate limit's rest of the
    minute), else RETRY_AFTER_S."""
    wait = err.retry_after_s
    return max(1, wait) if wait is not None else RETRY_AFTER_S


def error_response(err: DocparseError, served_by: str = "") -> web.Response:
    status = http_status(err)
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    if status in _RETRYABLE:
        headers["Retry-After"] = str(retry_after_s(err))
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="docparse"'
    if served_by:
        headers["X-Served-By"] = served_by
    return web.Response(
        status=status,
        text=json.dumps(error_body(err)),
        content_type="application/json",
        headers=headers,
    )


def echo(value: str, limit: int = 80) -> str:
    """A client's value quoted in a message: bounded, so an error never echoes a payload."""
    return repr(value[:limit]) + ("..." if len(value) > limit else "")


# Integer parameters are ASCII digits only (str.isdigit() also takes superscripts and other
# scripts' digits), and short: int() of 5,000 digits raises (CPython's limit) and a value
# >= 2**64 fails upstream.
MAX_UINT64 = 2**64 - 1


def parse_uint(raw: str, name: str, reason: ErrorReason, maximum: int = MAX_UINT64) -> int:
    """`raw` as a non-negative integer <= maximum; DocparseError INVALID_ARGUMENT `reason`
    (HTTP 400) otherwise."""
    if not (raw.isascii() and raw.isdigit() and len(raw) <= len(str(maximum))):
        raise error(reason, f"{name} must be a whole number: {echo(raw)}", {"parameter": name})
    value = int(raw)
    if value > maximum:
        raise error(reason, f"{name} must be at most {maximum}: {echo(raw)}", {"parameter": name})
    return value
