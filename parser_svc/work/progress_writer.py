"""The progress writes of a running job: coalesced to at most one per
`PROGRESS_WRITE_INTERVAL_S`, every stage change kept, each fenced by the worker's claim
(parser_svc/work/worker.py runs the job)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import grpc

from docparse.errors import DocparseError
from parser_svc.state.store import JobStore

# A running job's progress is written at most this often (the latest state; a stage change is
# never skipped), and the claim publishes nothing: the first write after it does, at most this
# long after it. A job that ends sooner costs two state writes (claim, terminal) and one
# message (the terminal record, which carries the last progress): bench/README.md, "Redis per job".
PROGRESS_WRITE_INTERVAL_S = 0.2


class LostOwnership(Exception):
    """The state store refused a write: another worker owns the job, or it already ended."""

    def __init__(self, message: str, status: str = "") -> None:
        super().__init__(message)
        self.status = status


class ProgressWriter:
    """The progress writes of one claimed job (claimed quietly: nothing published yet).

    `report()` takes every progress event of the parse; a write goes out when the last one
    (or the claim) is `interval_s` old, else the event waits as the pending state and a timer
    writes the latest one when the interval is up. A pending event of another stage is
    written before it is replaced, so every stage change is published. The first write after
    the claim announces the record (published even when it changes nothing), and `start()`
    arms it on its own, so watchers learn of RUNNING within the interval however long the first
    page takes. `latest` (done, total) is what the terminal write carries (`last_progress()`).

    A refused write (the job was cancelled, or another worker took it over) is raised as
    LostOwnership by `report()` or `check()`; a write that fails while Redis is away is best
    effort (the next one carries the state), as progress always was.
    """

    def __init__(self, store: JobStore, job_id: str, fence: str, interval_s: float) -> None:
        self._store = store
        self._job_id = job_id
        self._fence = fence
        self._interval_s = interval_s
        self._pending: tuple[int, int, str] | None = None
        self._announced = False
        self._last_write = time.monotonic()
        self._lock = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None
        self._timer_writing = False
        self._failure: BaseException | None = None
        self._closed = False
        self.latest: tuple[int, int] | None = None
        # The pages readers can have (a page selection), read at each write; `nudge()` when
        # it grows between progress events. What the last write carried: `_written_ready`.
        self.ready: Callable[[], str] = str
        self._written_ready = ""
        # Told when a write's answer says a reader asks for the job's pages (DraftSwitch).
        self.drafts_wanted: Callable[[], None] = lambda: None

    def start(self) -> None:
        self._arm()

    async def report(self, done: int, total: int, stage: str) -> None:
        self.check()
        self.latest = (done, total)
        if self._pending is not None and self._pending[2] != stage:
            await self._flush()
        self._pending = (done, total, stage)
        if time.monotonic() - self._last_write >= self._interval_s and not self._timer_writing:
            await self._flush()
        else:
            self._arm()
        self.check()

    def nudge(self) -> None:
        """The pages ready changed: a write carries them within the interval, with the
        latest progress, even when the parse reports nothing meanwhile."""
        if not self._closed and self._failure is None:
            self._arm()

    def check(self) -> None:
        """Raises what a write of this job met: LostOwnership or a store error."""
        if self._failure is not None:
            raise self._failure

    async def close(self) -> None:
        """No more writes: a timer that waits is dropped, one that writes is waited for."""
        self._closed = True
        timer, self._timer = self._timer, None
        if timer is None:
            return
        if not self._timer_writing:
            timer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await timer

    def last_progress(self) -> dict[str, str | int]:
        """The last progress the parse reported, for the terminal write to carry."""
        if self.latest is None:
            return {}
        done, total = self.latest
        return {"done": done, "total": total}

    def _arm(self) -> None:
        if self._closed or (self._timer is not None and not self._timer.done()):
            return
        delay = max(0.0, self._last_write + self._interval_s - time.monotonic())
        self._timer = asyncio.get_running_loop().create_task(self._later(delay))

    async def _later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._timer_writing = True
        try:
            await self._flush()
        finally:
            self._timer_writing = False
        if self._pending is not None and self._failure is None and not self._closed:
            self._timer = None
            self._arm()

    async def _flush(self) -> None:
        async with self._lock:
            if self._failure is not None:
                return
            pending, self._pending = self._pending, None
            ready = self.ready()
            if pending is None and self._announced and ready == self._written_ready:
                return
            done, total, stage = pending or (*(self.latest or (0, 0)), "")
            try:
                result = await self._store.progress(
                    self._job_id,
                    self._fence,
                    done=done,
                    total=total,
                    stage=stage,
                    announce=not self._announced,
                    ready=ready,
                )
            except DocparseError as err:
                if err.code != grpc.StatusCode.UNAVAILABLE:
                    self._failure = err
                elif self._pending is None:
                    self._pending = pending  # best effort: a later write carries it
                return
            finally:
                self._last_write = time.monotonic()
            if result.status in ("FENCED", "TERMINAL", "NOT_FOUND"):
                self._failure = LostOwnership(f"progress refused: {result.status}", result.status)
                return
            self._announced = True
            self._written_ready = ready
            if result.drafts:
                self.drafts_wanted()
