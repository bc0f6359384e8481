"""Scratch rooms: the directory under the system's temporary directory that holds one worker
process's job scratch directories, and the sweep of the rooms killed workers left.

A worker makes its room on its first job: `docparse-children-<random>` (0711: its children
cross it, nobody else lists it), holding a lock file the worker keeps open with an exclusive
flock for its whole life. The kernel drops that lock when the process dies, however it dies
(SIGKILL, the OOM killer, a node's restart of the container), so a room whose lock can be
taken is a dead worker's. `sweep_rooms`, run when a worker starts, removes those rooms and all
they hold: the scratch of the parses that worker had running (a document's pages drawn for
OCR, draft parts, antiword's files). A live worker's room on the same host (another replica, a
second stack) keeps its lock and stays. A room is swept only when it is a real directory owned
by this user (not a link a neighbour planted), and its contents are removed without following
links (shutil.rmtree's fd-based walk).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

ROOM_PREFIX = "docparse-children-"
LOCK_NAME = ".owner.lock"


class ScratchRoom:
    """This process's room, made (and locked) when first asked for, removed at a clean exit."""

    def __init__(self) -> None:
        self._path: Path | None = None
        self._lock: int | None = None

    def path(self) -> Path:
        if self._path is None:
            room = Path(tempfile.mkdtemp(prefix=ROOM_PREFIX))
            room.chmod(0o711)  # crossed by the children, listed by nobody but its owner
            lock = os.open(room / LOCK_NAME, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held until this process ends
            atexit.register(_remove_own, room, lock)
            self._path, self._lock = room, lock
        return self._path


def _remove_own(room: Path, lock: int) -> None:
    """At a clean exit: the room goes when only its lock is left (a job still running in a
    thread keeps it; the next worker's sweep takes it then)."""
    with contextlib.suppress(OSError):
        (room / LOCK_NAME).unlink()
        room.rmdir()
    with contextlib.suppress(OSError):
        os.close(lock)


def sweep_rooms(parent: Path | None = None) -> int:
    """Removes the rooms under `parent` (the temporary directory) whose worker is dead; the
    number removed."""
    parent = Path(parent or tempfile.gettempdir())
    removed = 0
    for room in sorted(parent.glob(ROOM_PREFIX + "*")):
        try:
            if _sweep(room):
                removed += 1
        except OSError as err:
            log.warning("scratch room %s not swept: %s", room, err)
    if removed:
        event = {"event": "scratch.swept"}
        log.info("swept %d scratch rooms of dead workers", removed, extra=event)
    return removed


def _sweep(room: Path) -> bool:
    info = room.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        return False  # a link, a file, or another user's: not ours to remove
    try:
        lock = os.open(room / LOCK_NAME, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False  # being made (its lock comes next), or not a room of ours
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its worker is alive
        shutil.rmtree(room)
        return True
    finally:
        os.close(lock)
