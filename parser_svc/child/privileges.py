"""Who a parse process runs as, and the one directory it may write.

A parse runs mupdf, tesseract, antiword and the Python parsers on a tenant's bytes. Beside the
scrubbed environment and the network filter (no_network.py), a server that runs as root drops
each parse child to an unprivileged uid and gid (Settings.child_uid / child_gid, 65534 by
default) once the child has opened its document, so that code run by a hostile document
cannot open another job's upload, result, password file or page parts, nor the key and
webhook-secret files: the blob store writes its files owner-only (0600, work/blobs.py).

- `drop_privileges` (the child, on itself): setgroups([]), then the gid, then the uid, real,
  effective and saved; after it the process cannot regain root. The kernel then makes the
  process non-dumpable (/proc/sys/fs/suid_dumpable 0): another child of the same uid cannot
  ptrace it or read its /proc/PID/{cwd,fd,environ,mem}. A change of credentials also clears
  the parent-death signal, which the caller arms again.
- `ChildScratch` (the worker, per job): the job's scratch directory, the only place its child
  writes (package, page drafts, assets, temporary files), owned by the child's uid, mode 0700.
  Every dropped child shares that uid, so a child must not find another's directory: they are
  made in a room (one per server process) owned by root with mode 0711, which a child may
  cross but not list, each under a name with 128 random bits; the child is started in its
  directory and its command line names its output relative to it (sandbox.run_parse), so
  neither `ps` nor /proc shows the name.

Where the server does not run as root (a Kubernetes pod with a non-root uid), no process may
change its uid: children keep the server's, scratch directories are private to it (0700, in
the same room), and the server says so once at start (`ChildScratch`). Either way a worker
killed mid-parse leaves its room behind, which the next worker to start on the host removes
(scratch_rooms.py).
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import tempfile
from pathlib import Path

from parser_svc.child.scratch_rooms import ScratchRoom, sweep_rooms

log = logging.getLogger(__name__)


def can_drop() -> bool:
    """Whether this process may change a child's uid: it runs as root."""
    return hasattr(os, "setresuid") and os.geteuid() == 0


def drop_privileges(uid: int, gid: int) -> bool:
    """Makes this process `uid`:`gid` with no supplementary group, for good; False (nothing
    changed) when `uid` is 0 (not asked) or this process is not root. Call before any thread
    starts and after opening what only root may read."""
    if uid <= 0 or not can_drop():
        return False
    reach_modules(uid, gid)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    return True


_reached = False


def reach_modules(uid: int = -1, gid: int = -1) -> None:
    """Python's own modules may lie under a directory the child's uid cannot cross (pyenv
    under /root, 0700). For each such directory, a path-only descriptor (opened as root) to
    the directory below it: through /proc/self/fd/N a process reaches what lies under that
    directory (read as its own permissions say), nothing beside it, and that path is its own
    in every process that inherits the descriptor. sys.path and the search paths of the
    packages already imported (a lazy `import encodings.cp1252`) are pointed through it.
    Once per process and those it forks: the fork server calls it as it starts (uid -1:
    what anyone but the owner may cross), so its children pay nothing for it."""
    global _reached
    if _reached:
        return
    _reached = True
    gates: dict[str, str] = {}
    for entry in sys.path:
        if not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        gate = _gate(entry, uid, gid)
        if gate and gate not in gates:
            gates[gate] = f"/proc/self/fd/{os.open(gate, os.O_PATH | os.O_DIRECTORY)}"
    if gates:
        _import_through(gates)


def _crossable(folder: str, uid: int, gid: int) -> bool:
    mode = os.stat(folder)
    if mode.st_uid == uid:
        return bool(mode.st_mode & 0o100)
    if mode.st_gid == gid:
        return bool(mode.st_mode & 0o010)
    return bool(mode.st_mode & 0o001)


def _gate(path: str, uid: int, gid: int) -> str:
    """The highest directory above `path` (or `path`) that `uid` cannot reach because a
    directory above it is closed to it ("" when it can reach `path`)."""
    parts = Path(path).parts
    for depth in range(1, len(parts)):
        if not _crossable(os.path.join(*parts[:depth]), uid, gid):
            return os.path.join(*parts[: depth + 1])
    return ""


def _import_through(gates: dict[str, str]) -> None:
    prefixes = tuple(gates)

    def through(entry: object) -> object:
        if isinstance(entry, str) and entry.startswith(prefixes):
            for gate, fd_path in gates.items():
                if entry == gate or entry.startswith(gate + os.sep):
                    return fd_path + entry[len(gate) :]
        return entry

    sys.path[:] = [str(through(entry)) for entry in sys.path]
    for module in list(sys.modules.values()):
        search = getattr(module, "__dict__", {}).get("__path__")
        paths = getattr(search, "_path", search)  # a namespace package's _NamespacePath
        if isinstance(paths, list) and any(through(entry) != entry for entry in paths):
            paths[:] = [through(entry) for entry in paths]


def use_scratch(directory: Path) -> None:
    """Temporary files (tempfile, and the programs the parsers run: antiword) and HOME go to
    the job's scratch directory: the one place the dropped child may write, deleted with the
    job."""
    os.environ["TMPDIR"] = os.environ["HOME"] = str(directory)
    tempfile.tempdir = str(directory)


class ChildScratch:
    """Makes each job's scratch directory for a child that drops to `uid`:`gid` (as root), or
    a private temporary directory as before (not root, or `uid` 0)."""

    _said = False
    _swept = False

    def __init__(self, uid: int, gid: int) -> None:
        self.owner = (uid, gid) if uid > 0 and can_drop() else None
        self._room = ScratchRoom()
        if not ChildScratch._swept:
            ChildScratch._swept = True
            sweep_rooms()  # what workers killed on this host left
        if not ChildScratch._said:
            ChildScratch._said = True
            if self.owner is not None:
                log.info("parse children drop to uid %d gid %d", uid, gid)
            elif uid <= 0:
                log.warning("parse children keep this server's uid: child_uid is 0")
            else:
                log.warning(
                    "parse children run as this server's uid %d: only a server running as "
                    "root can start them as another (child_uid %d)",
                    os.geteuid(),
                    uid,
                )

    def drop_to(self) -> dict[str, int]:
        """The ParseOptions fields that tell a child whose directory this made whom to become."""
        uid, gid = self.owner or (0, 0)
        return {"child_uid": uid, "child_gid": gid}

    def room(self) -> Path:
        """This process's scratch room (scratch_rooms.py: a killed worker's is swept by the
        next one to start)."""
        return self._room.path()

    def make(self) -> tempfile.TemporaryDirectory[str]:
        """A job's scratch directory in the room: a random name, 0700, the child's own."""
        scratch = tempfile.TemporaryDirectory(prefix=secrets.token_hex(16), dir=self.room())
        if self.owner is not None:
            os.chown(scratch.name, *self.owner)
        return scratch
