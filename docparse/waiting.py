"""How the SDK waits for a job: a small state machine with no I/O, shared by the sync and the
asyncio clients so both decide exactly alike.

Waiting is read-only. It follows WatchJob and, when a stream breaks, resumes with
`after_version` on a new call (which may land on another replica); after repeated stream
failures, or when the server cannot stream, it polls GetStatus instead. It never submits.
`follow` is that loop, as a plan (docparse.effects) the clients run; a Feed says what to call
for a job or a batch.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf.message import Message

from docparse.effects import END, Call, Emit, Leave, Open, Receive, Records, Sleep
from docparse.errors import DocparseError, JobFailed, WaitTimeout
from docparse.reasons import ErrorReason
from docparse.retries import Verdict, backoff_delay, classify, failed_call, gave_up, log
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.v1.parser_service_pb2 import (
    GetBatchRequest,
    GetStatusRequest,
    WatchBatchRequest,
    WatchJobRequest,
)

TERMINAL = frozenset({job_pb2.STATE_SUCCEEDED, job_pb2.STATE_FAILED, job_pb2.STATE_CANCELLED})


def state_name(state: int) -> str:
    return job_pb2.State.Name(state).removeprefix("STATE_")  # type: ignore[arg-type]


@dataclass(frozen=True)
class WaitPolicy:
    """Defaults suit interactive use; batch backends may raise `timeout_s`."""

    # Give up waiting (the job goes on) after this long: WaitTimeout.
    timeout_s: float = 600.0
    # GetStatus polling interval once streaming is off.
    poll_interval_s: float = 1.0
    # Backoff after a transient error: first delay, doubled up to the maximum.
    backoff_s: float = 0.1
    max_backoff_s: float = 5.0
    # Stream failures in a row before waiting falls back to polling.
    stream_failures_before_polling: int = 3
    # Retried errors (UNAVAILABLE, ...; docparse.retries) with no answer in between for this
    # long end the call or the wait with the last error, before `timeout_s`: a service that is
    # gone (a target refusing connections) is reported, not waited out. A Redis outage shorter
    # than this, or a replica restart, is ridden out.
    unavailable_budget_s: float = 30.0
    # A retry delay a server names (RATE_LIMITED's retry_after_s) is waited out up to this
    # long; a longer one ends the call at once.
    max_retry_delay_s: float = 60.0


class Action(enum.Enum):
    STREAM = "stream"  # (re)open WatchJob with after_version
    POLL = "poll"  # call GetStatus after `delay`
    DONE = "done"


R = TypeVar("R", job_pb2.Job, parser_service_pb2.Batch)


@dataclass
class Waiter(Generic[R]):
    """What a wait knows and decides; the clients do the I/O. JobWaiter and BatchWaiter say
    when their record is final.

    `cursor` is the last version handed out (a caller's `after_version` at first): only newer
    records are new. `last` is the newest record seen, even one at or below the cursor (a
    status read after a stream ended): a final `last` ends the wait."""

    subject_id: str
    policy: WaitPolicy
    started: float
    last: R
    cursor: int = 0
    polling: bool = False
    failures: int = 0
    # Since when every read failed (None: the last read was answered).
    failing_since: float | None = None
    # Read the status once before streaming again (a stream ended short of the end).
    check_status: bool = False
    # Whether the cursor is a version this waiter received (not one a caller gave).
    cursor_seen: bool = False
    rng: random.Random = field(default_factory=random.Random)

    kind = "job"

    def is_final(self, record: R) -> bool:
        raise NotImplementedError

    def state_text(self) -> str:
        raise NotImplementedError

    @property
    def after_version(self) -> int:
        return self.cursor

    def heard(self) -> None:
        """Any answer (a record, a heartbeat): the service is there."""
        self.failing_since = None

    def observe(self, record: R) -> bool:
        """Takes a record; True when it is newer than the cursor (older ones, e.g. from a
        lagging replica, are not handed out again). Any progress resets the failure count."""
        self.heard()
        if record.version > self.last.version:
            self.last = record
        if record.version <= self.cursor:
            return False
        self.cursor, self.cursor_seen = record.version, True
        self.failures = 0
        return True

    @property
    def finished(self) -> bool:
        return self.is_final(self.last)

    def next_action(self) -> Action:
        if self.finished:
            return Action.DONE
        return Action.POLL if self.polling or self.check_status else Action.STREAM

    def on_stream_end(self, progressed: bool) -> float:
        """A stream ended OK. Unless it brought the terminal record, read the status once
        before streaming again (the job may have ended at the cursor); a stream that brought
        nothing new counts as a failure, so reconnects back off instead of spinning."""
        if self.finished:
            return 0.0
        self.check_status = True
        if progressed:
            return 0.0
        self.failures += 1
        return self._backoff()

    def after_poll(self) -> float:
        """The delay after a GetStatus answer: none after the one read that follows a stream
        end (streaming resumes at once), the polling interval when polling."""
        quick = self.check_status and not self.polling
        self.check_status = False
        return 0.0 if self.finished or quick else self.policy.poll_interval_s

    def on_error(self, err: DocparseError, now: float) -> float:
        """Decides what a failed read means: returns the delay before the next try, or raises.
        Reads are idempotent, so docparse.retries' table decides with that; NOT_FOUND is final
        (it tells if it expired); retried errors become final after `unavailable_budget_s`
        without an answer."""
        if not failed_call(err):
            raise err  # JobFailed, WaitTimeout, ContractError: an outcome, not a failed read
        cannot_stream = err.code == grpc.StatusCode.UNIMPLEMENTED  # this server
        if (cannot_stream or err.reason == ErrorReason.TOO_MANY_STREAMS) and not self.polling:
            self.polling = True  # poll instead (at our stream limit: poll, not knock again)
            return 0.0
        lagging = err.reason == ErrorReason.AFTER_VERSION_AHEAD and self.cursor_seen  # a stale read
        # A stream a server or proxy cancelled (a gateway or replica stopping at the wrong
        # moment): a wait never cancels its own calls, so this is a cut stream to resume.
        cut = err.code == grpc.StatusCode.CANCELLED and "Locally cancelled" not in err.message
        verdict = Verdict.BACKOFF if lagging or cut else classify(err, idempotent=True)
        self.failing_since = now if self.failing_since is None else self.failing_since
        spent = now - self.failing_since
        self.failures += 1
        if verdict is Verdict.FINAL:
            raise err
        if verdict is Verdict.AFTER_DELAY:
            delay = float(err.retry_after_s or 0)
            if delay > self.policy.max_retry_delay_s:
                raise err
        else:
            if spent >= self.policy.unavailable_budget_s:
                what = f"the wait for {self.kind} {self.subject_id}"
                raise gave_up(err, what, self.failures, spent)
            if not self.polling and self.failures >= self.policy.stream_failures_before_polling:
                self.polling = True
            delay = self._backoff()
        log.info(
            "%s %s: retrying in %.1f s after %s %s: %s",
            self.kind,
            self.subject_id,
            delay,
            err.code.name,
            err.reason or "NO_REASON",
            err.message,
        )
        return delay

    def _backoff(self) -> float:
        return backoff_delay(self.policy, self.failures, self.rng)

    def left(self, now: float) -> float:
        return self.started + self.policy.timeout_s - now

    def check_deadline(self, now: float) -> float:
        """The time left, or WaitTimeout carrying the id and the last state seen."""
        left = self.left(now)
        if left <= 0:
            raise WaitTimeout(
                self.subject_id,
                self.state_text(),
                self.last.version,
                now - self.started,
                self.kind,
            )
        return left


class JobWaiter(Waiter[job_pb2.Job]):
    @property
    def job_id(self) -> str:
        return self.subject_id

    def is_final(self, record: job_pb2.Job) -> bool:
        return record.state in TERMINAL

    def state_text(self) -> str:
        return state_name(self.last.state)

    def outcome(self) -> job_pb2.Job:
        """The terminal record, or JobFailed with the job's reason."""
        job = self.last
        if job.state != job_pb2.STATE_SUCCEEDED:
            raise JobFailed(job.job_id, state_name(job.state), job.error.reason, job.error.message)
        return job


class BatchWaiter(Waiter[parser_service_pb2.Batch]):
    kind = "batch"

    def is_final(self, record: parser_service_pb2.Batch) -> bool:
        return record.total > 0 and record.completed >= record.total

    def state_text(self) -> str:
        return f"at {self.last.completed}/{self.last.total} files ended"


@dataclass(frozen=True)
class Feed(Generic[R]):
    """How to follow a job or a batch: its watch stream, given `after_version` (WatchJob,
    WatchBatch), the read that polling makes instead (GetStatus, GetBatch), and the field of
    their answers that holds the record (a stream's heartbeats have none)."""

    watch: Callable[..., Message]
    poll: Message
    field: str

    def record(self, answer: Any) -> R | None:
        found: R | None = getattr(answer, self.field) if answer.HasField(self.field) else None
        return found


def job_feed(job_id: str) -> Feed[job_pb2.Job]:
    return Feed(partial(WatchJobRequest, job_id=job_id), GetStatusRequest(job_id=job_id), "job")


def batch_feed(batch_id: str) -> Feed[parser_service_pb2.Batch]:
    poll = GetBatchRequest(batch_id=batch_id)
    return Feed(partial(WatchBatchRequest, batch_id=batch_id), poll, "batch")


def rpc_name(request: Message) -> str:
    """The method a request is for: WatchJobRequest is WatchJob's."""
    return request.DESCRIPTOR.name.removesuffix("Request")


def follow(
    waiter: Waiter[R], feed: Feed[R], clock: Callable[[], float], call_timeout_s: float
) -> Records[R]:
    """The waiting loop (the decisions are the waiter's): emits each new record."""
    while (action := waiter.next_action()) is not Action.DONE:
        left = waiter.check_deadline(clock())
        try:
            if action is Action.STREAM:
                progressed = False
                request = feed.watch(after_version=waiter.after_version)
                stream = yield Open(rpc_name(request), request, left)
                while (message := (yield Receive(stream))) is not END:
                    waiter.heard()
                    record = feed.record(message)
                    if record is not None and waiter.observe(record):
                        progressed = True
                        yield Emit(record)
                        if waiter.finished:  # the rest adds nothing; a cut there is no retry
                            yield Leave(stream)
                            break
                delay = waiter.on_stream_end(progressed)
            else:
                response, _ = yield Call(rpc_name(feed.poll), feed.poll, call_timeout_s)
                polled: R = getattr(response, feed.field)
                if waiter.observe(polled):
                    yield Emit(polled)
                delay = waiter.after_poll()
        except DocparseError as err:
            delay = waiter.on_error(err, clock())
        if delay > 0:
            yield Sleep(min(delay, max(0.0, waiter.left(clock()))))
