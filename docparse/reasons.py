"""Every reason docparse names, as a type: `ErrorReason.JOB_EXPIRED` where code raises or
compares one, never the string.

The members are the names of the proto enum `docparse.v1.ErrorReason`
(protos/docparse/v1/error_reason.proto, whose comments say what each means, with which gRPC
code, and what the caller does); tests/docparse_server/test_error_reasons.py keeps the two
lists equal. The wire carries a reason's name as a string (`ErrorInfo.reason`,
`JobError.reason`), and a member *is* that string (a `StrEnum`), so both hold:

    err.reason == ErrorReason.JOB_EXPIRED
    err.reason == "JOB_EXPIRED"

A reason a newer server sends that this enum does not list yet stays a plain string.
"""

from __future__ import annotations

from enum import StrEnum, auto


class ErrorReason(StrEnum):
    """The stable reasons of `ErrorInfo{domain: "docparse"}` and of `JobError`."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list[str]) -> str:
        return name  # each member's value is its own name

    # Jobs, batches, results, assets
    JOB_NOT_FOUND = auto()
    JOB_EXPIRED = auto()
    BATCH_NOT_FOUND = auto()
    ASSET_NOT_FOUND = auto()
    ASSET_OTHER_DEPLOYMENT = auto()
    RESULT_NOT_READY = auto()
    JOB_NOT_SUCCEEDED = auto()
    RESULT_EXPIRED = auto()
    JOB_ALREADY_ENDED = auto()
    AFTER_VERSION_AHEAD = auto()
    CANCELLED = auto()
    # Bad requests (INVALID_ARGUMENT unless said otherwise): fix the call, do not retry
    EMPTY_CONTENT = auto()
    UNSUPPORTED_FORMAT = auto()
    INVALID_JOB_ID = auto()
    INVALID_ASSET_ID = auto()
    REQUEST_ID_REUSED = auto()
    REQUEST_ID_TOO_LONG = auto()
    LANGUAGE_NOT_INSTALLED = auto()
    EMPTY_BATCH = auto()
    TOO_MANY_FILES = auto()
    UPLOAD_PROTOCOL = auto()
    UPLOAD_SIZE_MISMATCH = auto()
    MALFORMED_REQUEST = auto()
    BAD_MULTIPART = auto()
    MISSING_FILE = auto()
    INVALID_FORMAT = auto()
    INVALID_WAIT = auto()
    INVALID_RESUME_CURSOR = auto()
    CROSS_SITE_REQUEST = auto()
    INVALID_PAGE_SIZE = auto()
    INVALID_STATE = auto()
    INVALID_PAGE_TOKEN = auto()
    RANGE_NOT_SATISFIABLE = auto()
    CORS_NOT_ALLOWED = auto()
    INVALID_PAGE_RANGE = auto()
    PAGE_RANGE_NOT_SUPPORTED = auto()
    PAGE_RANGE_PAST_END = auto()
    INVALID_OCR_DPI = auto()
    CONTENT_ENCODING_REFUSED = auto()
    # Limits (RESOURCE_EXHAUSTED)
    DOCUMENT_TOO_LARGE = auto()
    RATE_LIMITED = auto()
    TOO_MANY_STREAMS = auto()
    MESSAGE_TOO_LARGE = auto()
    RESULT_TOO_LARGE_TO_RENDER = auto()
    TOO_MANY_UPLOADS = auto()
    TOO_MANY_RENDERS = auto()
    # Identity
    API_KEY_MISSING = auto()
    API_KEY_INVALID = auto()
    INTERNAL_TOKEN_INVALID = auto()
    INTERNAL_TOKEN_MISSING = auto()
    AUTH_NOT_CONFIGURED = auto()
    ADMIN_ONLY = auto()
    # Availability (UNAVAILABLE unless said otherwise): retry the same call, do not resubmit
    STATE_STORE_UNAVAILABLE = auto()
    STATE_STORE_FULL = auto()
    STATE_STORE_NOT_REPLICATED = auto()
    STATE_STORE_ERROR = auto()
    SERVER_SHUTTING_DOWN = auto()
    NO_REPLICA_REACHABLE = auto()
    TARGET_UNREACHABLE = auto()
    RENDER_FAILED = auto()
    UPSTREAM_CONTRACT = auto()
    # Why a job ended FAILED (JobError.reason)
    CORRUPT_DOCUMENT = auto()
    PASSWORD_REQUIRED = auto()
    WRONG_PASSWORD = auto()
    PARSE_TIMEOUT = auto()
    PARSER_CRASHED = auto()
    WORKER_LOST = auto()
    WORKER_FAILED = auto()
    # Webhooks (SubmitJobRequest.callback; INVALID_ARGUMENT unless said otherwise)
    CALLBACK_INVALID = auto()
    CALLBACK_NOT_ALLOWED = auto()
    CALLBACK_SECRET_UNKNOWN = auto()
    WEBHOOK_CONFIG_INVALID = auto()
    # Servers at start (exit code 2)
    SETTING_INVALID = auto()
    # Local tools: the SDK, the CLI and the local stack (exit code 2 unless said otherwise)
    CHECKSUM_MISMATCH = auto()
    WRITE_FAILED = auto()
    PORT_IN_USE = auto()
    DIR_IN_USE = auto()
    BIND_FAILED = auto()
    CHILD_EXITED = auto()
    NOT_READY = auto()
    FILE_NOT_FOUND = auto()
    FILE_UNREADABLE = auto()
    NO_FILES = auto()
    OUTPUT_UNWRITABLE = auto()
    OUTPUT_REQUIRED = auto()
    TLS_INCOMPLETE = auto()
    PASSWORD_UNREADABLE = auto()
