"""An exclusive lock on a directory, held by one process while it uses the directory.

`docparse up` locks its data directory and the embedded Redis its own, so two stacks (or two
redis-servers) never write the same AOF, logs or blobs. The lock is `flock` on a file in the
directory: the kernel drops it when the holder exits, however it exits, so a crashed stack
never leaves a stale lock behind. The file says who holds it, for the refusal message.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path
from typing import IO

import grpc

from docparse.errors import DocparseError
from docparse.ports import process_command
from docparse.reasons import ErrorReason


def file_holders(path: Path) -> list[int]:
    """Pids of the processes that have `path` open (readable in /proc: this user's)."""
    target = str(path.resolve())
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (proc / "fd").iterdir()):
                found.append(int(proc.name))
        except OSError:
            continue
    return sorted(found)


class DirLock:
    def __init__(self, directory: Path, what: str, name: str = ".lock") -> None:
        self.directory = directory
        self.what = what  # "stack data directory", "embedded Redis directory"
        self.path = directory / name
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def fds(self) -> tuple[int, ...]:
        """The lock's file descriptor, for `pass_fds`: a child that inherits it keeps the
        directory locked as long as it lives, even if this process is killed."""
        return () if self._file is None else (self._file.fileno(),)

    def acquire(self) -> None:
        """Takes the lock, or raises FAILED_PRECONDITION DIR_IN_USE naming the holder."""
        if self._file is not None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            holders = file_holders(self.path)
            if holders and not any(holder.startswith(f"pid {pid} ") for pid in holders):
                # the process that took it is gone; what it started still runs
                named = ", ".join(f"pid {pid} ({process_command(pid)})" for pid in holders)
                holder = f"{named}, left running by {holder}"
            raise DocparseError(
                grpc.StatusCode.FAILED_PRECONDITION,
                ErrorReason.DIR_IN_USE,
                f"the {self.what} {self.directory} is in use by {holder}; stop that one or "
                "choose another directory",
                {"directory": str(self.directory), "holder": holder},
            ) from None
        handle.seek(0)
        handle.truncate()
        command = process_command(os.getpid()) or " ".join(sys.argv)
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        handle.write(f"pid {os.getpid()} ({command}) since {started}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is None:
            return
        self._file.seek(0)
        self._file.truncate()
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()
        self._file = None

    def is_locked_by_other(self) -> bool:
        """Whether some process (not this object) holds the lock now."""
        if not self.path.exists():
            return False
        with self.path.open("a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False
