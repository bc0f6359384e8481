"""How the SDK waits for a job: a small state machine with no I/O, shared by the sync and the
asyncio clients so both decide exactly alike.

Waiting is read-only. It follows WatchJob and, when a stream breaks, resumes with
`after_version` on a new call (which may land on another replica); after repeated stream
failures, or when the server cannot stream, it polls GetStatus instead. It never submits.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import grpc

from docparse.errors import DocparseError, JobFailed, WaitTimeout
from docparse.v1 import job_pb2

TERMINAL = frozenset({job_pb2.STATE_SUCCEEDED, job_pb2.STATE_FAILED, job_pb2.STATE_CANCELLED})
# Errors after which the same read may simply be tried again (with backoff).
TRANSIENT = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)


def state_name(state: int) -> str:
    return job_pb2.State.Name(state).removeprefix("STATE_")  # type: ignore[arg-type]


@dataclass(frozen=True)
class WaitPolicy:
    """Defaults suit interactive use; batch backends may raise `timeout_s`."""

    # Give up waiting (the job goes on) after this long.
    timeout_s: float = 600.0
    # GetStatus polling interval once streaming is off.
    poll_interval_s: float = 1.0
    # Backoff after a transient error: first delay, doubled up to the maximum.
    backoff_s: float = 0.1
    max_backoff_s: float = 5.0
    # Stream failures in a row before waiting falls back to polling.
    stream_failures_before_polling: int = 3


class Action(enum.Enum):
    STREAM = "stream"  # (re)open WatchJob with after_version
    POLL = "poll"  # call GetStatus after `delay`
    DONE = "done"


@dataclass
class Waiter:
    job_id: str
    policy: WaitPolicy
    started: float
    last: job_pb2.Job = field(default_factory=job_pb2.Job)
    polling: bool = False
    failures: int = 0

    @property
    def after_version(self) -> int:
        return self.last.version

    def observe(self, job: job_pb2.Job) -> bool:
        """Takes a record; True when it is newer than anything seen before (older ones, e.g.
        from a lagging replica, are ignored). Any progress resets the failure count."""
        if job.version <= self.last.version:
            return False
        self.last = job
        self.failures = 0
        return True

    @property
    def finished(self) -> bool:
        return self.last.state in TERMINAL

    def next_action(self) -> Action:
        if self.finished:
            return Action.DONE
        return Action.POLL if self.polling else Action.STREAM

    def on_error(self, err: DocparseError) -> float:
        """Decides what a failed read means: returns the delay before the next try, or raises
        (NOT_FOUND and contract-level errors are final; NOT_FOUND tells if it expired)."""
        if err.code == grpc.StatusCode.UNIMPLEMENTED and not self.polling:
            self.polling = True  # this server cannot stream: poll instead
            return 0.0
        if err.code not in TRANSIENT:
            raise err
        self.failures += 1
        if not self.polling and self.failures >= self.policy.stream_failures_before_polling:
            self.polling = True
        delay: float = self.policy.backoff_s * 2 ** (self.failures - 1)
        return min(delay, self.policy.max_backoff_s)

    def check_deadline(self, now: float) -> float:
        """The time left, or WaitTimeout carrying the job id and the last state seen."""
        left = self.started + self.policy.timeout_s - now
        if left <= 0:
            raise WaitTimeout(
                self.job_id, state_name(self.last.state), self.last.version, now - self.started
            )
        return left

    def outcome(self) -> job_pb2.Job:
        """The terminal record, or JobFailed with the job's reason."""
        job = self.last
        if job.state != job_pb2.STATE_SUCCEEDED:
            raise JobFailed(job.job_id, state_name(job.state), job.error.reason, job.error.message)
        return job
