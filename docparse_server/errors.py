"""The servers' side of the error vocabulary: one table keyed by reason, and the constructors
every raise site in parser_svc, gateway and docparse_server uses.

    raise error(ErrorReason.JOB_NOT_FOUND, f"job {job_id} does not exist", {"job_id": job_id})

The table gives each reason (docparse.reasons.ErrorReason, the proto enum's names) the gRPC
code it comes with and what the caller does about it, as the comments of
protos/docparse/v1/error_reason.proto say (tests/docparse_server/test_error_reasons.py checks
the codes against them):

| advice   | what the caller does                                                            |
|----------|---------------------------------------------------------------------------------|
| RETRY    | the same call again later: after the delay it names (RetryInfo, `retry_after_s`) |
|          | or with backoff; never a new submit for it                                      |
| WAIT     | the job has not ended: watch it, then ask again                                 |
| FIX      | change the request (or the document): the same call fails the same way          |
| FINAL    | the answer stands: no such thing (any more), or it has ended; do not retry      |
| OPERATOR | whoever runs the server or the local tool changes its setup; until then, the    |
|          | same answer                                                                     |
| REPORT   | a fault on the server's side (its log says more); report it                     |

A reason with no code is a job's reason only (`JobError.reason` of a FAILED or CANCELLED job),
never an RPC error's: `error()` refuses it. One documented override: a server that must not
start says so with FAILED_PRECONDITION whatever the reason (`refusal_to_start`), since only its
operator can fix it (a state store it cannot use at start is not a retry).

The SDK and the CLI (docparse/, which imports nothing of the servers) raise their own local
reasons (CHECKSUM_MISMATCH, PORT_IN_USE, ...) with the codes listed here; a test compares them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import NamedTuple

import grpc

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason as R


class Advice(enum.Enum):
    RETRY = "retry the same call later; never resubmit for it"
    WAIT = "watch the job until it ends, then ask again"
    FIX = "change the request or the document; the same call fails the same way"
    FINAL = "the answer stands; do not retry"
    OPERATOR = "the server's (or local tool's) setup must change; the same answer until then"
    REPORT = "a fault on the server's side, in its log; report it"


class Rule(NamedTuple):
    code: grpc.StatusCode | None  # None: a job's reason only, never an RPC error's
    advice: Advice


_C = grpc.StatusCode
_A = Advice

RULES: dict[R, Rule] = {
    # Jobs, batches, results, assets
    R.JOB_NOT_FOUND: Rule(_C.NOT_FOUND, _A.FINAL),
    R.JOB_EXPIRED: Rule(_C.NOT_FOUND, _A.FINAL),
    R.BATCH_NOT_FOUND: Rule(_C.NOT_FOUND, _A.FINAL),
    R.ASSET_NOT_FOUND: Rule(_C.NOT_FOUND, _A.FINAL),
    R.ASSET_OTHER_DEPLOYMENT: Rule(_C.FAILED_PRECONDITION, _A.FINAL),
    R.RESULT_NOT_READY: Rule(_C.FAILED_PRECONDITION, _A.WAIT),
    R.JOB_NOT_SUCCEEDED: Rule(_C.FAILED_PRECONDITION, _A.FINAL),
    R.RESULT_EXPIRED: Rule(_C.NOT_FOUND, _A.FINAL),
    R.JOB_ALREADY_ENDED: Rule(_C.FAILED_PRECONDITION, _A.FINAL),
    R.AFTER_VERSION_AHEAD: Rule(_C.OUT_OF_RANGE, _A.FIX),
    R.CANCELLED: Rule(None, _A.FINAL),
    # Bad requests
    R.EMPTY_CONTENT: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.UNSUPPORTED_FORMAT: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.INVALID_JOB_ID: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.INVALID_ASSET_ID: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.REQUEST_ID_REUSED: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.REQUEST_ID_TOO_LONG: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.LANGUAGE_NOT_INSTALLED: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.EMPTY_BATCH: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.TOO_MANY_FILES: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.UPLOAD_PROTOCOL: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.UPLOAD_SIZE_MISMATCH: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.MALFORMED_REQUEST: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.BAD_MULTIPART: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.MISSING_FILE: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.INVALID_FORMAT: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.INVALID_WAIT: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.INVALID_RESUME_CURSOR: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.CROSS_SITE_REQUEST: Rule(_C.PERMISSION_DENIED, _A.FIX),
    R.INVALID_PAGE_SIZE: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.INVALID_STATE: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.INVALID_PAGE_TOKEN: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.RANGE_NOT_SATISFIABLE: Rule(_C.OUT_OF_RANGE, _A.FIX),
    R.CORS_NOT_ALLOWED: Rule(_C.PERMISSION_DENIED, _A.OPERATOR),
    R.INVALID_PAGE_RANGE: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.PAGE_RANGE_NOT_SUPPORTED: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.PAGE_RANGE_PAST_END: Rule(_C.INVALID_ARGUMENT, _A.FIX),  # also a job FAILED
    R.INVALID_OCR_DPI: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.CONTENT_ENCODING_REFUSED: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    # Limits
    R.DOCUMENT_TOO_LARGE: Rule(_C.RESOURCE_EXHAUSTED, _A.FIX),
    R.RATE_LIMITED: Rule(_C.RESOURCE_EXHAUSTED, _A.RETRY),
    R.TOO_MANY_STREAMS: Rule(_C.RESOURCE_EXHAUSTED, _A.RETRY),  # or poll GetStatus instead
    R.MESSAGE_TOO_LARGE: Rule(_C.RESOURCE_EXHAUSTED, _A.FIX),
    R.RESULT_TOO_LARGE_TO_RENDER: Rule(_C.RESOURCE_EXHAUSTED, _A.FIX),  # ask for format=proto
    R.TOO_MANY_UPLOADS: Rule(_C.RESOURCE_EXHAUSTED, _A.RETRY),
    R.TOO_MANY_RENDERS: Rule(_C.RESOURCE_EXHAUSTED, _A.RETRY),  # or format=proto
    # Identity
    R.API_KEY_MISSING: Rule(_C.UNAUTHENTICATED, _A.FIX),
    R.API_KEY_INVALID: Rule(_C.UNAUTHENTICATED, _A.FIX),
    R.INTERNAL_TOKEN_INVALID: Rule(_C.UNAUTHENTICATED, _A.OPERATOR),
    R.INTERNAL_TOKEN_MISSING: Rule(_C.FAILED_PRECONDITION, _A.OPERATOR),
    R.AUTH_NOT_CONFIGURED: Rule(_C.FAILED_PRECONDITION, _A.OPERATOR),
    R.ADMIN_ONLY: Rule(_C.PERMISSION_DENIED, _A.FIX),
    # Availability
    R.STATE_STORE_UNAVAILABLE: Rule(_C.UNAVAILABLE, _A.RETRY),
    R.STATE_STORE_FULL: Rule(_C.UNAVAILABLE, _A.RETRY),
    R.STATE_STORE_NOT_REPLICATED: Rule(_C.UNAVAILABLE, _A.RETRY),
    R.STATE_STORE_ERROR: Rule(_C.INTERNAL, _A.REPORT),
    R.SERVER_SHUTTING_DOWN: Rule(_C.UNAVAILABLE, _A.RETRY),
    R.NO_REPLICA_REACHABLE: Rule(_C.UNAVAILABLE, _A.RETRY),
    R.TARGET_UNREACHABLE: Rule(_C.UNAVAILABLE, _A.RETRY),
    R.RENDER_FAILED: Rule(_C.UNAVAILABLE, _A.RETRY),
    R.UPSTREAM_CONTRACT: Rule(_C.INTERNAL, _A.REPORT),
    # Why a job ended FAILED
    R.CORRUPT_DOCUMENT: Rule(None, _A.FIX),
    R.PASSWORD_REQUIRED: Rule(None, _A.FIX),
    R.WRONG_PASSWORD: Rule(None, _A.FIX),
    R.PARSE_TIMEOUT: Rule(None, _A.FIX),
    R.PARSER_CRASHED: Rule(None, _A.REPORT),
    R.WORKER_LOST: Rule(None, _A.REPORT),
    R.WORKER_FAILED: Rule(None, _A.REPORT),
    # Webhooks
    R.CALLBACK_INVALID: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.CALLBACK_NOT_ALLOWED: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.CALLBACK_SECRET_UNKNOWN: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.WEBHOOK_CONFIG_INVALID: Rule(_C.FAILED_PRECONDITION, _A.OPERATOR),
    # Servers at start
    R.SETTING_INVALID: Rule(_C.FAILED_PRECONDITION, _A.OPERATOR),
    # Local tools: raised by docparse/ (and CHECKSUM_MISMATCH by the gateway's HTTP side too)
    R.CHECKSUM_MISMATCH: Rule(_C.DATA_LOSS, _A.RETRY),
    R.WRITE_FAILED: Rule(_C.DATA_LOSS, _A.OPERATOR),
    R.PORT_IN_USE: Rule(_C.FAILED_PRECONDITION, _A.OPERATOR),
    R.DIR_IN_USE: Rule(_C.FAILED_PRECONDITION, _A.OPERATOR),
    R.BIND_FAILED: Rule(_C.FAILED_PRECONDITION, _A.OPERATOR),
    R.CHILD_EXITED: Rule(_C.UNAVAILABLE, _A.REPORT),
    R.NOT_READY: Rule(_C.DEADLINE_EXCEEDED, _A.REPORT),
    R.FILE_NOT_FOUND: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.FILE_UNREADABLE: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.NO_FILES: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.OUTPUT_UNWRITABLE: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.OUTPUT_REQUIRED: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.TLS_INCOMPLETE: Rule(_C.INVALID_ARGUMENT, _A.FIX),
    R.PASSWORD_UNREADABLE: Rule(_C.INVALID_ARGUMENT, _A.FIX),
}


def code_of(reason: R) -> grpc.StatusCode:
    """The gRPC code `reason` comes with; ValueError for a job's reason (it has none)."""
    code = RULES[reason].code
    if code is None:
        raise ValueError(f"{reason} is a job's reason (JobError), never an RPC error's")
    return code


def error(reason: R, message: str, metadata: Mapping[str, str] | None = None) -> DocparseError:
    """The error a server raises: `reason` with its code from the table."""
    return DocparseError(code_of(reason), reason, message, metadata)


def refusal_to_start(
    reason: R, message: str, metadata: Mapping[str, str] | None = None
) -> DocparseError:
    """Why a server must not start: FAILED_PRECONDITION whatever the reason (the override the
    module docstring names), logged by docparse_server.serving.exit_on_startup_error."""
    return DocparseError(grpc.StatusCode.FAILED_PRECONDITION, reason, message, metadata)


# --- the errors several places raise ------------------------------------------------------


def not_found(job_id: str) -> DocparseError:
    return error(R.JOB_NOT_FOUND, f"job {job_id} does not exist", {"job_id": job_id})


def cursor_ahead(id_: str, after_version: int, version: int, kind: str = "job") -> DocparseError:
    """A watch cursor beyond the job's (or batch's: `kind`) version: no version it could wait
    for is promised. Metadata names it as `job_id` or `batch_id`."""
    return error(
        R.AFTER_VERSION_AHEAD,
        f"{kind} {id_} is at version {version}; after_version {after_version} is ahead of it "
        "(resume with the last version you received)",
        {f"{kind}_id": id_, "version": str(version), "after_version": str(after_version)},
    )


def store_unavailable(detail: str) -> DocparseError:
    return error(
        R.STATE_STORE_UNAVAILABLE,
        f"the job state store did not answer: {detail}; retry the call, do not resubmit",
    )


# A request_id is an idempotency key (AIP-155: a UUID is 36 characters), never a payload.
MAX_REQUEST_ID_BYTES = 256


def check_request_id(request_id: str) -> None:
    """INVALID_ARGUMENT REQUEST_ID_TOO_LONG for a request_id over MAX_REQUEST_ID_BYTES."""
    size = len(request_id.encode("utf-8", "surrogatepass"))
    if size > MAX_REQUEST_ID_BYTES:
        raise error(
            R.REQUEST_ID_TOO_LONG,
            f"request_id is {size} bytes; at most {MAX_REQUEST_ID_BYTES} (a UUID is 36)",
            {"limit_bytes": str(MAX_REQUEST_ID_BYTES), "size_bytes": str(size)},
        )
