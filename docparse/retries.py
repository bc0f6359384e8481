"""Which failed calls the SDK tries again, and when: one table, no I/O, shared by the sync and
the asyncio clients (and by their waits), so both decide exactly alike.

| failure                                   | retried                                         |
|-------------------------------------------|-------------------------------------------------|
| UNAVAILABLE (any reason)                  | yes, jittered exponential backoff, within the   |
|                                           | policy's `unavailable_budget_s` (30 s)          |
| DEADLINE_EXCEEDED, ABORTED                | only for idempotent calls (reads, and submits,  |
|                                           | which carry a request_id), with backoff         |
| RESOURCE_EXHAUSTED with a retry delay     | once that delay has passed (`RATE_LIMITED`'s    |
| (RetryInfo / `retry_after_s`)             | `retry_after_s`), if it fits `max_retry_delay_s` |
| RESOURCE_EXHAUSTED without one            | never (DOCUMENT_TOO_LARGE, a message over the   |
|                                           | client's own size limit: MESSAGE_TOO_LARGE)     |
| INVALID_ARGUMENT, PERMISSION_DENIED,      | never: the same call fails the same way         |
| UNAUTHENTICATED, INTERNAL, NOT_FOUND, ... |                                                 |
| INTERNAL with no ErrorInfo on UploadBatch | up to twice, to learn the status transport lost |
| ClientError: JobFailed, WaitTimeout,      | never: outcomes under the same root, not a      |
| ContractError                             | failed call                                     |

The INTERNAL row: a server that refuses an UploadBatch at a file header (DOCUMENT_TOO_LARGE,
RATE_LIMITED) ends the call while the client is still sending; through the gateway, gRPC then
sometimes (about 1 call in 10 here) reports a bare INTERNAL instead of the status the replica
and the gateway sent. No docparse server sends INTERNAL without a reason, and the upload
carries its request_id, so repeating it is safe and brings the real answer.

A wait (docparse.waiting) reads with the same table, and resumes as well a watch stream that
ends CANCELLED: a wait never cancels its own calls, so a server or proxy cut it (a gateway or
replica stopping); a unary call that ends CANCELLED stays final.

A call that is given up after retries fails with its last error, whose message then says what
was tried (`SubmitJob tried 9 times over 29.6 s`). Each retry is logged on the
`docparse.client` logger at INFO (the CLI shows them with `--verbose`).
"""

from __future__ import annotations

import enum
import logging
import random
from dataclasses import dataclass, field
from typing import Protocol

import grpc

from docparse.errors import ClientError, DocparseError
from docparse.reasons import ErrorReason

log = logging.getLogger("docparse.client")

# Calls that may run twice with the same outcome: reads, and the submits (a request_id makes a
# repeated SubmitJob / CreateBatch / UploadBatch answer with the first one's job or batch).
IDEMPOTENT = frozenset(
    {
        "SubmitJob",
        "GetStatus",
        "WatchJob",
        "CreateBatch",
        "UploadBatch",
        "GetBatch",
        "WatchBatch",
        "GetResult",
        "GetAsset",
        "StreamResult",
        "ListJobs",
    }
)
# A retry delay a server names is honoured only for these codes and never for these reasons.
NEVER_RETRIED_REASONS = frozenset({ErrorReason.DOCUMENT_TOO_LARGE, ErrorReason.MESSAGE_TOO_LARGE})


class Verdict(enum.Enum):
    BACKOFF = "backoff"  # try again after a jittered, growing delay
    AFTER_DELAY = "after_delay"  # try again once the delay the server named has passed
    FINAL = "final"  # the same call would fail the same way


# How often an UploadBatch whose status was lost (a bare INTERNAL) is repeated.
LOST_STATUS_RETRIES = 2


def lost_status(err: DocparseError, method: str) -> bool:
    """A bare INTERNAL (no ErrorInfo) ending a client stream: gRPC lost the server's status."""
    return (
        method == "UploadBatch"
        and failed_call(err)
        and err.code == grpc.StatusCode.INTERNAL
        and not err.reason
    )


def failed_call(err: DocparseError) -> bool:
    """A failed call, not a ClientError (JobFailed, WaitTimeout, ContractError): those end
    the call as they are, never retried nor rewritten."""
    return not isinstance(err, ClientError)


def classify(err: DocparseError, idempotent: bool) -> Verdict:
    """The table above, for one failure."""
    if not failed_call(err) or err.reason in NEVER_RETRIED_REASONS:
        return Verdict.FINAL
    if err.code == grpc.StatusCode.UNAVAILABLE:
        return Verdict.BACKOFF
    if err.code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED):
        return Verdict.BACKOFF if idempotent else Verdict.FINAL
    if err.code == grpc.StatusCode.RESOURCE_EXHAUSTED and err.retry_after_s is not None:
        return Verdict.AFTER_DELAY
    return Verdict.FINAL


class RetryBudget(Protocol):
    """What the retry decisions read of a wait policy (docparse.waiting.WaitPolicy)."""

    @property
    def timeout_s(self) -> float: ...
    @property
    def backoff_s(self) -> float: ...
    @property
    def max_backoff_s(self) -> float: ...
    @property
    def unavailable_budget_s(self) -> float: ...
    @property
    def max_retry_delay_s(self) -> float: ...


def backoff_delay(policy: RetryBudget, failures: int, rng: random.Random) -> float:
    """The delay after the `failures`-th failure in a row (1, 2, ...): the policy's backoff,
    doubled each time up to its maximum, with "equal jitter" (half fixed, half random) so that
    many clients failing together do not retry in step."""
    ceiling: float = min(policy.backoff_s * 2 ** max(0, failures - 1), policy.max_backoff_s)
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


def gave_up(err: DocparseError, method: str, attempts: int, spent_s: float) -> DocparseError:
    """`err` saying what was tried before it became final (nothing added for a first try)."""
    if attempts <= 1 or not failed_call(err):
        return err
    return DocparseError(
        err.code,
        err.reason,
        f"{err.message} ({method} tried {attempts} times over {spent_s:.1f} s)",
        {**err.metadata, "attempts": str(attempts)},
    )


@dataclass
class Retrier:
    """The retry decisions of one call (all its attempts). The clients do the I/O:

    retrier = Retrier("SubmitJob", policy, clock())
    while True:
        try:
            return transport.call(...)
        except DocparseError as err:
            sleep(retrier.on_error(err, clock()))   # or raises the final error
    """

    method: str
    policy: RetryBudget
    started: float
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0
    failures: int = 0  # backoff failures in a row
    lost: int = 0  # UploadBatch statuses lost in transport (see the table's last row)

    @property
    def idempotent(self) -> bool:
        return self.method in IDEMPOTENT

    def on_error(self, err: DocparseError, now: float) -> float:
        """The delay before the next attempt, or raises the error that ends the call."""
        self.attempts += 1
        spent = now - self.started
        verdict = classify(err, self.idempotent)
        if lost_status(err, self.method) and self.lost < LOST_STATUS_RETRIES:
            self.lost += 1
            verdict = Verdict.BACKOFF
        if verdict is Verdict.FINAL:
            raise gave_up(err, self.method, self.attempts, spent)
        if verdict is Verdict.AFTER_DELAY:
            delay = float(err.retry_after_s or 0)
            if delay > self.policy.max_retry_delay_s or spent + delay > self.policy.timeout_s:
                raise gave_up(err, self.method, self.attempts, spent)
        else:
            self.failures += 1
            delay = backoff_delay(self.policy, self.failures, self.rng)
            if spent + delay > self.policy.unavailable_budget_s:
                raise gave_up(err, self.method, self.attempts, spent)
        log.info(
            "retrying %s in %.1f s after %s %s: %s (attempt %d, %.1f s spent)",
            self.method,
            delay,
            err.code.name,
            err.reason or "NO_REASON",
            err.message,
            self.attempts,
            spent,
        )
        return delay
