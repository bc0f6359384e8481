"""Live progress lines for the terminal: one line per job, redrawn in place on a TTY and
printed as a new line on each change otherwise (logs, CI)."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from docparse.v1 import job_pb2
from docparse.waiting import state_name

BAR_WIDTH = 24


def render(name: str, job: job_pb2.Job) -> str:
    done, total = job.progress.done, job.progress.total
    filled = int(BAR_WIDTH * done / total) if total else 0
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    extra = f" {job.error.reason}" if job.error.reason else ""
    return (
        f"{name[:28]:<28} [{bar}] {done:>4}/{total:<4} {job.progress.stage:<8} "
        f"{state_name(job.state)}{extra}"
    )


class ProgressBoard:
    def __init__(self, names: list[str], out: TextIO = sys.stdout, quiet: bool = False) -> None:
        self.names = names
        self.quiet = quiet
        self.lines = [f"{n[:28]:<28} [{'-' * BAR_WIDTH}]    0/0    waiting" for n in names]
        self.out = out
        self.tty = out.isatty()
        self._lock = threading.Lock()
        self._drawn = False

    def update(self, index: int, job: job_pb2.Job) -> None:
        with self._lock:
            line = render(self.names[index], job)
            if line == self.lines[index]:
                return
            self.lines[index] = line
            if self.quiet:
                return
            if not self.tty:
                print(line, file=self.out, flush=True)
                return
            if self._drawn:
                self.out.write(f"\x1b[{len(self.lines)}F")
            for text in self.lines:
                self.out.write("\x1b[2K" + text + "\n")
            self.out.flush()
            self._drawn = True
