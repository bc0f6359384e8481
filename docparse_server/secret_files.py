"""Permissions of the files that hold secrets (API keys, webhook secrets), checked at start.

Fails closed: a file that another local user could write (group or others may write it, or it
belongs to another user who is not root) would let that user add a key or a secret, so the
server refuses to start, naming the file and its mode. A file that others may read is let
through with a warning (a leak, not a takeover). A Kubernetes Secret mounted with
`defaultMode: 0400` (or 0440 with `fsGroup`) passes; its default 0644 passes with the warning.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse_server.errors import refusal_to_start


def check_secret_file(path: Path, variable: str, reason: ErrorReason, service: str) -> None:
    """Raises `reason` (FAILED_PRECONDITION) when `path` is writable by group or others, or
    owned by another non-root user; logs a warning when others may read it. A file that
    cannot be stat'ed is left to the reader that follows (it says why)."""
    try:
        info = path.stat()
    except OSError:
        return
    mode = stat.S_IMODE(info.st_mode)
    problem = ""
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = "group or others may write it"
    elif info.st_uid not in (0, os.geteuid()):
        problem = f"it belongs to uid {info.st_uid}, neither this process's user nor root"
    if problem:
        raise _unsafe(path, variable, reason, mode, problem)
    if mode & stat.S_IROTH:
        logging.getLogger(service).warning(
            "%s %s has mode %04o: any local user may read it (chmod 600, or defaultMode 0400 "
            "on a Kubernetes Secret)",
            variable, path, mode,
            extra={"event": "startup.secret_file_readable", "file": str(path),
                   "mode": f"{mode:04o}"},
        )  # fmt: skip


def _unsafe(
    path: Path, variable: str, reason: ErrorReason, mode: int, problem: str
) -> DocparseError:
    return refusal_to_start(
        reason,
        f"{variable} {path} has mode {mode:04o} and {problem}: refusing to start "
        f"(chmod 600 it, owned by the server's user)",
        {"file": str(path), "mode": f"{mode:04o}"},
    )
