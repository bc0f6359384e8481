"""Live progress for the terminal.

On a terminal (rich): an overall bar with an ETA, one bar per file that is queued or running
below it, and a plain line, printed above the bars, for each file as it ends. The bars never
take more rows than the terminal has (files beyond that wait for a row; the overall bar counts
them), and ended files scroll up like any output, so any number of files renders cleanly.
Elsewhere (a pipe, a log, CI): one plain line per change, nothing redrawn.
"""

from __future__ import annotations

import atexit
import sys
import threading
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from docparse.v1 import job_pb2
from docparse.waiting import TERMINAL, state_name

BAR_WIDTH = 24
NAME_WIDTH = 28
# Rows kept free besides the file bars: the overall bar and the cursor's line.
RESERVED_ROWS = 2


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


class ProgressBoard:
    """Shows the progress of `names` (files, in order); `update(i, job)` with each new record
    of file i, from any thread. `close()` (also at exit, and by itself once every file ended)
    leaves the terminal as it found it, with the last state on screen."""

    def __init__(
        self,
        names: list[str],
        out: TextIO = sys.stdout,
        quiet: bool = False,
        console: Console | None = None,
    ) -> None:
        self.names = names
        self.quiet = quiet
        self.out = out
        self.tty = out.isatty() if console is None else console.is_terminal
        self.lines = ["" for _ in names]
        self.jobs: list[job_pb2.Job | None] = [None for _ in names]
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._shown: dict[int, TaskID] = {}
        self._overall: TaskID | None = None
        self._closed = False
        if self.tty and not quiet:
            self._console = console or Console(file=out)
            atexit.register(self.close)

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

    def _start(self) -> Progress:
        progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(bar_width=BAR_WIDTH),
            TextColumn("{task.fields[detail]}", markup=False),
            TimeRemainingColumn(),
            console=self._console,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        progress.start()
        self._overall = progress.add_task(
            f"{'overall':<{NAME_WIDTH}}", total=len(self.names), detail=""
        )
        self._progress = progress
        return progress

    def _rows(self) -> int:
        """How many file bars fit under the terminal's height."""
        return max(1, self._console.size.height - RESERVED_ROWS)

    def _draw(self, index: int, job: job_pb2.Job) -> None:
        progress = self._progress or self._start()
        if job.state in TERMINAL:
            if index in self._shown:
                progress.remove_task(self._shown.pop(index))
            progress.console.print(self.lines[index], markup=False, highlight=False)
        elif index in self._shown:
            self._file_bar(progress, index, job)
        self._fill(progress)
        seen = [j for j in self.jobs if j is not None]
        ended = sum(1 for j in seen if j.state in TERMINAL)
        waiting = len(self.names) - ended - len(self._shown)
        detail = f"{ended}/{len(self.names)} files ended" + (
            f", {waiting} more waiting" if waiting else ""
        )
        assert self._overall is not None
        progress.update(
            self._overall, completed=sum(_fraction(j) for j in seen), detail=detail, refresh=True
        )
        if ended == len(self.names):
            self._stop()

    def _fill(self, progress: Progress) -> None:
        """Gives free rows to the first files (in order) that are active and have none."""
        for index, job in enumerate(self.jobs):
            if len(self._shown) >= self._rows():
                return
            if job is not None and job.state not in TERMINAL and index not in self._shown:
                self._file_bar(progress, index, job)

    def _file_bar(self, progress: Progress, index: int, job: job_pb2.Job) -> None:
        done, total = job.progress.done, job.progress.total
        detail = f"{done:>4}/{total:<4} {job.progress.stage:<8} {state_name(job.state)}"
        if index not in self._shown:
            name = self.names[index][:NAME_WIDTH]
            self._shown[index] = progress.add_task(
                f"{name:<{NAME_WIDTH}}", total=total or None, detail=detail
            )
        progress.update(self._shown[index], total=total or None, completed=done, detail=detail)

    def _stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self._closed = True

    def close(self) -> None:
        with self._lock:
            self._stop()
