"""The one expected error type: a gRPC status code plus a stable ErrorInfo reason.

Servers raise `DocparseError` anywhere below a handler; the handler boundary turns it into a
`google.rpc.Status` with an `ErrorInfo{domain: "docparse", reason, metadata}` detail.
Clients get the same type back from `DocparseError.from_rpc_error`.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

DOMAIN = "docparse"


class DocparseError(Exception):
    """An expected failure with the gRPC status it maps to."""

    def __init__(
        self,
        code: grpc.StatusCode,
        reason: str,
        message: str,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code.name} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata = dict(metadata or {})

    def to_status(self) -> grpc.Status:
        info = error_details_pb2.ErrorInfo(
            reason=self.reason, domain=DOMAIN, metadata=self.metadata
        )
        detail = any_pb2.Any()
        detail.Pack(info)
        details = [detail]
        if (wait := self.retry_after_s) is not None:  # google.rpc.RetryInfo, as AIP-193 says
            retry = error_details_pb2.RetryInfo()
            retry.retry_delay.FromSeconds(wait)
            details.append(any_pb2.Any())
            details[-1].Pack(retry)
        proto = status_pb2.Status(
            code=getattr(code_pb2, self.code.name), message=self.message, details=details
        )
        status: grpc.Status = rpc_status.to_status(proto)
        return status

    @property
    def retry_after_s(self) -> int | None:
        """Seconds to wait before retrying, when the error names them (a rate limit)."""
        raw = self.metadata.get("retry_after_s", "")
        return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 6 else None

    @property
    def expired(self) -> bool:
        """NOT_FOUND because the job's retention ended (not because it never existed)."""
        return self.reason == "JOB_EXPIRED"

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError) -> DocparseError:
        """Reads the ErrorInfo back from a failed call (reason "" when the server sent none)."""
        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        details = err.details() if hasattr(err, "details") else str(err)
        reason, metadata = "", {}
        try:
            status = rpc_status.from_call(err)
        except ValueError:
            status = None
        if status is not None:
            for any_detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if any_detail.Unpack(info):
                    reason, metadata = info.reason, dict(info.metadata)
                    break
        return cls(code, reason, details or "", metadata)


def not_found(job_id: str) -> DocparseError:
    return DocparseError(
        grpc.StatusCode.NOT_FOUND,
        "JOB_NOT_FOUND",
        f"job {job_id} does not exist",
        {"job_id": job_id},
    )


def cursor_ahead(id_: str, after_version: int, version: int, kind: str = "job") -> DocparseError:
    """A watch cursor beyond the job's (or batch's: `kind`) version: no version it could wait
    for is promised. Metadata names it as `job_id` or `batch_id`."""
    return DocparseError(
        grpc.StatusCode.OUT_OF_RANGE,
        "AFTER_VERSION_AHEAD",
        f"{kind} {id_} is at version {version}; after_version {after_version} is ahead of it "
        "(resume with the last version you received)",
        {f"{kind}_id": id_, "version": str(version), "after_version": str(after_version)},
    )


# A request_id is an idempotency key (AIP-155: a UUID is 36 characters), never a payload.
MAX_REQUEST_ID_BYTES = 256


def check_request_id(request_id: str) -> None:
    """INVALID_ARGUMENT REQUEST_ID_TOO_LONG for a request_id over MAX_REQUEST_ID_BYTES."""
    size = len(request_id.encode("utf-8", "surrogatepass"))
    if size > MAX_REQUEST_ID_BYTES:
        raise DocparseError(
            grpc.StatusCode.INVALID_ARGUMENT,
            "REQUEST_ID_TOO_LONG",
            f"request_id is {size} bytes; at most {MAX_REQUEST_ID_BYTES} (a UUID is 36)",
            {"limit_bytes": str(MAX_REQUEST_ID_BYTES), "size_bytes": str(size)},
        )


def store_failure(err: BaseException) -> str:
    """What a client may be told about a failed store call: how it failed, in words, never
    the exception's class or text (the server's log has those)."""
    if isinstance(err, TimeoutError):
        return "timed out"
    if isinstance(err, OSError):
        return "connection failed"
    return "the call failed"


def store_unavailable(detail: str) -> DocparseError:
    return DocparseError(
        grpc.StatusCode.UNAVAILABLE,
        "STATE_STORE_UNAVAILABLE",
        f"the job state store did not answer: {detail}; retry the call, do not resubmit",
    )


class ClientError(Exception):
    """Raised by the SDK for outcomes that are not an RPC error of one call."""


class ContractError(ClientError):
    """The server answered something the API contract rules out (e.g. a SubmitJob answer with
    no usable job). Raised at once: it is a bug to report, never "no result yet"."""


class JobFailed(ClientError):
    """The job ended FAILED or CANCELLED; `reason` is its stable code (CORRUPT_DOCUMENT, ...)."""

    def __init__(self, job_id: str, state: str, reason: str, message: str) -> None:
        super().__init__(f"job {job_id} ended {state}: {reason}: {message}")
        self.job_id, self.state, self.reason, self.message = job_id, state, reason, message


class WaitTimeout(ClientError):
    """Waiting ran out of time; the job goes on. Carries what was last seen of it."""

    def __init__(
        self, job_id: str, last_state: str, last_version: int, waited_s: float, kind: str = "job"
    ) -> None:
        seen = (
            f"still {last_state} (version {last_version})"
            if last_version
            else "no new record received"
        )
        super().__init__(f"{kind} {job_id} {seen} after {waited_s:.1f} s; it goes on")
        self.job_id, self.last_state, self.last_version = job_id, last_state, last_version
        self.kind = kind
