"""Live progress for the terminal.

On a terminal (tqdm): an overall bar with an ETA, one bar per file that is queued or running
below it, and a plain line, printed above the bars, for each file as it ends. The bars never
take more rows than the terminal has (files beyond that wait for a row; the overall bar counts
them), and ended files scroll up like any output, so any number of files renders cleanly.
Elsewhere (a pipe, a log, CI): one plain line per change, nothing redrawn.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import threading
from typing import Any, TextIO
from weakref import WeakSet

from tqdm import tqdm

from docparse.v1 import job_pb2
from docparse.waiting import TERMINAL, state_name

BAR_WIDTH = 24
NAME_WIDTH = 28
# Rows kept free besides the file bars: the overall bar and the cursor's line.
RESERVED_ROWS = 2
# A live row: the name, the bar, the row's detail (pages, stage, state), the time left.
ROW_FORMAT = f"{{desc}} [{{bar:{BAR_WIDTH}}}] {{detail}} eta {{remaining}}"


def render(name: str, job: job_pb2.Job) -> str:
    """One file's state as a plain line (logs, pipes, and the line a finished file leaves)."""
    done, total = job.progress.done, job.progress.total
    filled = int(BAR_WIDTH * done / total) if total else 0
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    extra = f" {job.error.reason}" if job.error.reason else ""
    return (
        f"{name[:NAME_WIDTH]:<{NAME_WIDTH}} [{bar}] {done:>4}/{total:<4} "
        f"{job.progress.stage:<8} {state_name(job.state)}{extra}"
    )


def _fraction(job: job_pb2.Job) -> float:
    if job.state in TERMINAL:
        return 1.0
    total = job.progress.total
    return min(job.progress.done / total, 1.0) if total else 0.0


class _Row(tqdm):  # type: ignore[type-arg]  # counts pages or files, never iterates
    """One live row at a fixed `position` below the cursor's line (0: that line). Drawn only
    when told (no refresh interval, no monitor thread), with a thread lock of its own (tqdm's
    default also makes a multiprocessing one)."""

    monitor_interval = 0
    _instances: WeakSet[tqdm[Any]] = WeakSet()
    _lock = threading.RLock()

    def __init__(self, name: str, total: float | None, out: TextIO, position: int) -> None:
        self.detail = ""
        size = _terminal_size(out)
        super().__init__(
            desc=f"{name[:NAME_WIDTH]:<{NAME_WIDTH}}",
            total=total,
            file=out,
            position=position,
            leave=position == 0,
            ncols=size.columns - 1,  # never the last column: no wrap, whatever the terminal does
            nrows=size.lines,
            ascii="-#",
            bar_format=ROW_FORMAT,
            mininterval=0,
            miniters=1,
        )

    @property
    def format_dict(self) -> dict[str, Any]:
        return {**super().format_dict, "detail": self.detail}

    def show(self, done: float, total: float | None, detail: str) -> None:
        """Redraws the row with `done` of `total` (None: not known yet); the time left comes
        from how fast `done` has grown."""
        self.total, self.detail = total, detail
        if done > self.n:
            self.update(done - self.n)
        else:
            self.n = done
            self.refresh()


def _terminal_size(out: TextIO) -> os.terminal_size:
    try:
        return os.get_terminal_size(out.fileno())
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size()


class AboveTheBars(logging.StreamHandler[TextIO]):
    """A log handler (the CLI's `--verbose` retries) whose lines print above any live bars,
    which are redrawn below them, instead of through them."""

    def emit(self, record: logging.LogRecord) -> None:
        with _Row.external_write_mode(file=self.stream):
            super().emit(record)


class ProgressBoard:
    """Shows the progress of `names` (files, in order); `update(i, job)` with each new record
    of file i, from any thread. `close()` (also at exit, and by itself once every file ended)
    leaves the terminal with the last state on screen; the board is also a context manager
    that closes it."""

    def __init__(self, names: list[str], out: TextIO = sys.stdout, quiet: bool = False) -> None:
        self.names = names
        self.quiet = quiet
        self.out = out
        self.tty = out.isatty()
        self.lines = ["" for _ in names]
        self.jobs: list[job_pb2.Job | None] = [None for _ in names]
        # tqdm's lock: drawing a row, and a log line printed above the rows, never interleave.
        self._lock = _Row._lock
        self._overall: _Row | None = None
        self._shown: dict[int, _Row] = {}  # file index -> its row, in the order of the rows
        self._closed = False
        if self.tty and not quiet:
            atexit.register(self.close)

    def __enter__(self) -> ProgressBoard:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- plain output ----------------------------------------------------------------------

    def update(self, index: int, job: job_pb2.Job) -> None:
        with self._lock:
            line = render(self.names[index], job)
            if line == self.lines[index] or self._closed:
                return
            self.lines[index] = line
            self.jobs[index] = job
            if self.quiet:
                return
            if not self.tty:
                print(line, file=self.out, flush=True)
                return
            self._draw(index, job)

    # --- the terminal ----------------------------------------------------------------------

    def _draw(self, index: int, job: job_pb2.Job) -> None:
        if self._overall is None:
            self._overall = _Row("overall", len(self.names), self.out, position=0)
        if job.state in TERMINAL:
            self._end(index)
        elif index in self._shown:
            self._file_row(index, job)
        self._fill()
        seen = [j for j in self.jobs if j is not None]
        ended = sum(1 for j in seen if j.state in TERMINAL)
        waiting = len(self.names) - ended - len(self._shown)
        detail = f"{ended}/{len(self.names)} files ended" + (
            f", {waiting} more waiting" if waiting else ""
        )
        self._overall.show(sum(_fraction(j) for j in seen), len(self.names), detail)
        if ended == len(self.names):
            self._stop()

    def _end(self, index: int) -> None:
        """File `index` ended: its row goes, its plain line prints above the rows, and the rows
        below it move up one."""
        with _Row.external_write_mode(file=self.out):  # every row cleared, redrawn at the end
            row = self._shown.pop(index, None)
            if row is not None:
                row.close()
            self.out.write(self.lines[index] + "\n")
            for position, shown in enumerate(self._shown.values(), start=1):
                shown.pos = -position  # tqdm's mark of a fixed position

    def _rows(self) -> int:
        """How many file rows fit under the terminal's height."""
        return max(1, _terminal_size(self.out).lines - RESERVED_ROWS)

    def _fill(self) -> None:
        """Gives free rows to the first files (in order) that are active and have none."""
        for index, job in enumerate(self.jobs):
            if len(self._shown) >= self._rows():
                return
            if job is not None and job.state not in TERMINAL and index not in self._shown:
                self._file_row(index, job)

    def _file_row(self, index: int, job: job_pb2.Job) -> None:
        done, total = job.progress.done, job.progress.total
        if index not in self._shown:
            position = len(self._shown) + 1
            self._shown[index] = _Row(self.names[index], total or None, self.out, position)
        detail = f"{done:>4}/{total:<4} {job.progress.stage:<8} {state_name(job.state)}"
        self._shown[index].show(done, total or None, detail)

    def _stop(self) -> None:
        """Leaves every row on screen as it is, top to bottom, the cursor under them."""
        rows = [self._overall, *self._shown.values()] if self._overall else []
        for row in rows:
            row.leave = True  # tqdm redraws a row it leaves on the cursor's line, then a newline
            row.close()
        self._overall = None
        self._shown.clear()
        self._closed = True

    def close(self) -> None:
        with self._lock:
            self._stop()
