"""The one expected error type: a gRPC status code plus a stable ErrorInfo reason.

Servers raise `DocparseError` anywhere below a handler (built by docparse_server.errors, whose
table gives each reason its code); the handler boundary turns it into a `google.rpc.Status`
with an `ErrorInfo{domain: "docparse", reason, metadata}` detail. Clients get the same type
back from `DocparseError.from_rpc_error`.

It is also the one root of what an SDK call ends with when it does not return its answer
(as httpx's `HTTPError` is): a failed call is a `DocparseError`; so are the outcomes that are
no one call's failure, its subclasses, each with a code, a reason and a message as well:

    DocparseError           a call failed: the server's code, reason, message, metadata
    └── ClientError         an outcome that is no one call's failure (never retried)
        ├── JobFailed       the job ended FAILED or CANCELLED (`reason`: the job's own)
        ├── WaitTimeout     waiting ran out of time; the job goes on
        └── ContractError   the server answered what the API contract rules out

Misuse of the SDK (a wrong argument) stays a `TypeError` or `ValueError`.
"""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from docparse.reasons import ErrorReason

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
        return self.reason == ErrorReason.JOB_EXPIRED

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


class ClientError(DocparseError):
    """An outcome of an SDK call that is not one call's failure: the SDK never retries it
    nor rewrites it on the way out (docparse.retries)."""


class ContractError(ClientError):
    """The server answered something the API contract rules out (e.g. a SubmitJob answer with
    no usable job): INTERNAL UPSTREAM_CONTRACT. Raised at once, never retried: it is a bug to
    report, never "no result yet"."""

    def __init__(self, message: str) -> None:
        super().__init__(grpc.StatusCode.INTERNAL, ErrorReason.UPSTREAM_CONTRACT, message)
        self.args = (message,)


class JobFailed(ClientError):
    """The job ended FAILED or CANCELLED: FAILED_PRECONDITION (as GetResult would answer) with
    the job's own reason (CORRUPT_DOCUMENT, ..., CANCELLED) and message; metadata `job_id` and
    `state`. Every call succeeded; the job did not."""

    def __init__(self, job_id: str, state: str, reason: str, message: str) -> None:
        metadata = {"job_id": job_id, "state": state}
        super().__init__(grpc.StatusCode.FAILED_PRECONDITION, reason, message, metadata)
        self.args = (f"job {job_id} ended {state}: {reason}: {message}",)
        self.job_id, self.state = job_id, state


class WaitTimeout(ClientError):
    """Waiting ran out of time; the job goes on. DEADLINE_EXCEEDED with no reason (no server
    sent it), carrying what was last seen of the job (or batch: `kind`)."""

    def __init__(
        self, job_id: str, last_state: str, last_version: int, waited_s: float, kind: str = "job"
    ) -> None:
        seen = (
            f"still {last_state} (version {last_version})"
            if last_version
            else "no new record received"
        )
        message = f"{kind} {job_id} {seen} after {waited_s:.1f} s; it goes on"
        metadata = {f"{kind}_id": job_id, "state": last_state, "version": str(last_version)}
        super().__init__(grpc.StatusCode.DEADLINE_EXCEEDED, "", message, metadata)
        self.args = (message,)
        self.job_id, self.last_state, self.last_version = job_id, last_state, last_version
        self.kind = kind
