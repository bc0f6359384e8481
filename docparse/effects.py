"""The SDK's sans-I/O core: every client operation is written once, as a plan (a generator) that
yields the I/O it needs as effects and is sent back each outcome (or has the error thrown in).
`docparse.client.Client` performs the effects with blocking calls, `docparse.aio.AsyncClient`
with awaits; neither decides anything, so both behave alike by construction (httpx's
BaseClient split, carried down to the loops: docparse.operations holds the plans,
docparse.shells makes them the clients' methods).

    @answering                                       # a plan, in docparse.operations
    def status(self, job_id):
        request = GetStatusRequest(job_id=job_id)
        response, served_by = yield Call("GetStatus", request, self.timeout_s)
        return Answer(response.job, served_by)
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from docparse.uploads import BatchUpload

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Rpc:
    method: str
    request: Message
    deadline_s: float | None


class Call(Rpc):
    """A unary call: answers `(response, served_by)`."""


class Open(Rpc):
    """A server-streaming call: answers the stream, to read with Receive."""


@dataclass(frozen=True)
class Receive:
    """The next message of an opened stream, or END once it ended."""

    stream: Any


@dataclass(frozen=True)
class Leave:
    """Stops reading an opened stream once its terminal record came: the server's own end is
    awaited a moment (so `on_answer` hears who answered the stream), then the call is
    cancelled. Nothing after the terminal record is read, so a cut there is never a retry."""

    stream: Any


@dataclass(frozen=True)
class Upload:
    """UploadBatch, its files read in chunks as gRPC asks for them: `(response, served_by)`."""

    method: str
    upload: BatchUpload
    deadline_s: float | None


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Blocking:
    """File work (reading a document, writing a result): answers `run()`, which the asyncio
    client calls in a thread, off the event loop."""

    run: Callable[[], Any]


@dataclass(frozen=True)
class Emit(Generic[R]):
    """A record for the caller of an iterating operation (watch); no answer."""

    record: R


IO = Call | Open | Receive | Leave | Upload | Sleep | Blocking
Effect = IO | Emit[Any]
# An operation that answers a T; Records[R]: one that hands out R records as it goes.
Plan = Generator[Effect, Any, T]
Records = Generator[IO | Emit[R], Any, None]
END = object()  # what Receive answers at the end of a stream


def once(effect: Effect) -> Plan[Any]:
    """A plan of one effect: its answer."""
    return (yield effect)


class Run(Generic[T]):
    """Steps one plan for a shell: `step()` is the next effect (None when the plan returned,
    its value then in `value`); `answer()` or `fail()` tells the plan how that effect went."""

    def __init__(self, plan: Generator[Effect, Any, T]) -> None:
        self.plan = plan
        self.value: T | None = None
        self._answer: Any = None
        self._error: Exception | None = None

    def step(self) -> Effect | None:
        answer, error, self._answer, self._error = self._answer, self._error, None, None
        try:
            return self.plan.send(answer) if error is None else self.plan.throw(error)
        except StopIteration as stop:
            self.value = stop.value
            return None

    def answer(self, value: Any) -> None:
        self._answer = value

    def fail(self, error: Exception) -> None:
        self._error = error

    def result(self) -> T:
        return self.value  # type: ignore[return-value]  # set when step() returned None
