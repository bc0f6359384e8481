"""What files a parse process may open: Landlock (Linux 5.13+), by the process on itself.

The uid drop (privileges.py) closes other jobs' files and the service's secrets to a parse
child only where the server runs as root. Where it cannot (a Kubernetes pod as uid 10001
without capabilities), every child keeps the server's uid and could open whatever the server
may: other jobs' uploads, results and password files in the blob store, the keys and
webhook-secrets files. Landlock closes them whatever the uid: once the child has opened its
document it restricts itself, for good and for every process it forks (page siblings,
antiword), to
- reading and executing beneath what a parse reads: the Python installation (sys.prefix,
  base_prefix, exec_prefix, every sys.path entry and the directory of every package already
  imported, such as an editable install's), /usr, /lib, /lib64, /etc/fonts, /etc/ld.so.cache,
  /etc/localtime, /etc/mime.types (openpyxl reads it as it loads), /proc,
  /sys/devices/system/cpu, tesseract's models, the antiword program; reading and writing
  /dev/null, reading /dev/urandom;
- everything beneath its scratch directory (package, page drafts, assets, TMPDIR, HOME).
Nothing else: not the blob store, the keys or webhook-secrets files, other jobs' scratch
directories, /tmp. Nor, without CAP_SYS_PTRACE, ptrace access to processes outside its
domain: the server's /proc/PID/environ, mem and fd under the same uid. From ABI 4 TCP bind
and connect are refused (beside the seccomp filter, no_network.py); from ABI 6 signals and
abstract unix sockets reach only its own domain.

A kernel without Landlock (or with it disabled) runs the child as before: `available()` is 0,
and the worker says so once at start (`announce`).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

# System call numbers: the same on every architecture (the unified table, from Linux 5.1).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# LANDLOCK_ACCESS_FS_* (linux/landlock.h).
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_FS = (1 << 13) - 1  # execute .. make_sym
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
# What may be granted on a file (not a directory) beneath which nothing lies.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_ONLY = EXECUTE | READ_FILE | READ_DIR
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

# Read (and execute) beneath these when they exist, beside the Python installation.
SYSTEM_READ = (
    "/usr",
    "/lib",
    "/lib64",
    "/etc/fonts",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/mime.types",
    "/proc",
    "/sys/devices/system/cpu",
    "/dev/urandom",
)
# Read and written (subprocess.DEVNULL, the page siblings' stdin).
SYSTEM_WRITE = ("/dev/null",)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in linux/landlock.h
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, loaded once (a CDLL costs ~50 us: a rule per path would add up)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _syscall(number: int, *args: object) -> int:
    result = int(_libc().syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def available() -> int:
    """The Landlock ABI version this kernel offers; 0 where there is none (not Linux, an old
    kernel, Landlock not enabled at boot)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(
            _SYS_CREATE_RULESET, ctypes.c_void_p(0), ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )  # fmt: skip
    except OSError as err:
        if err.errno in (errno.ENOSYS, errno.EOPNOTSUPP):
            return 0
        raise


def handled_fs(abi: int) -> int:
    """Every filesystem right the kernel's ABI knows: all of them are refused but where a
    rule grants them."""
    rights = _ABI1_FS
    rights |= REFER if abi >= 2 else 0
    rights |= TRUNCATE if abi >= 3 else 0
    rights |= IOCTL_DEV if abi >= 5 else 0
    return rights


def _ruleset(abi: int) -> int:
    attr = _RulesetAttr(
        handled_access_fs=handled_fs(abi),
        handled_access_net=(_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
        scoped=(_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0,
    )
    return _syscall(
        _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
        ctypes.c_uint32(0),
    )  # fmt: skip


def _allow(ruleset: int, path: str, rights: int) -> None:
    """Grants `rights` beneath `path` (what of them applies to a file, when it is one); a path
    that does not exist is skipped."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        _syscall(
            _SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(rule), ctypes.c_uint32(0),
        )  # fmt: skip
    finally:
        os.close(fd)


def restrict(read: Iterable[str], write: Iterable[str]) -> int:
    """Restricts this process (and what it forks from now on) to reading and executing beneath
    `read` and to everything beneath `write`, with no_new_privs; the ABI used, or 0 (nothing
    changed) where the kernel has no Landlock. Landlock restricts the calling thread only:
    call it before any thread starts."""
    abi = available()
    if not abi:
        return 0
    handled = handled_fs(abi)
    ruleset = _ruleset(abi)
    try:
        for path in read:
            _allow(ruleset, path, READ_ONLY & handled)
        for path in write:
            _allow(ruleset, path, handled)
        if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return abi


def python_paths() -> list[str]:
    """Where this interpreter reads its modules: its prefixes, the sys.path entries (a
    /proc/self/fd/N gate of privileges.reach_modules as well), and the directory of each
    package already imported, which an editable install's finder serves from outside
    sys.path. A plain top-level module names its file, not its directory."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix]
    paths += [entry for entry in sys.path if os.path.isabs(entry)]
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue
        search = getattr(module, "__path__", None)
        if search is not None:
            paths += [str(entry) for entry in search if os.path.isabs(str(entry))]
        elif isinstance(getattr(module, "__file__", None), str):
            paths.append(str(module.__file__))
    return list(dict.fromkeys(paths))


def _outermost(paths: Iterable[str]) -> list[str]:
    """`paths` resolved, without those beneath another one (one rule covers them), the ones
    that do not exist dropped. A /proc/self/fd gate (privileges.reach_modules) is kept as it
    is: its real path may lie where the child's uid cannot go."""
    gates, real = [], set()
    for path in paths:
        if path.startswith("/proc/self/"):
            gates.append(path)
        elif os.path.exists(path):
            real.add(os.path.realpath(path))
    kept: list[str] = []
    for path in sorted(real):  # a directory sorts before what lies beneath it
        if not any(path.startswith(top.rstrip("/") + "/") for top in kept):
            kept.append(path)
    return list(dict.fromkeys([*kept, *gates]))


@functools.cache
def parse_reads() -> tuple[str, ...]:
    """What every parse reads beside its own extras: the Python installation and the system
    paths, as few rules as cover them. Computed once per process: the fork server calls it
    as it starts (after reach_modules), so its children only add the rules."""
    return tuple(_outermost([*python_paths(), *SYSTEM_READ]))


def confine(scratch: Path, extra_read: Iterable[str] = ()) -> int:
    """Restricts this parse process to what a parse reads (module docstring, and
    `extra_read`: tesseract's models, the antiword program) and to its scratch directory;
    the ABI used, or 0 where the kernel has none."""
    read = [*parse_reads(), *extra_read]
    return restrict(read, [str(scratch), *SYSTEM_WRITE])


class _Said:
    done = False


def announce(enabled: bool) -> None:
    """Says once per process whether parse children will be confined (the worker, at start)."""
    if _Said.done:
        return
    _Said.done = True
    if not enabled:
        log.warning("parse children are not confined by Landlock: child_landlock is off")
        return
    abi = available()
    if abi:
        log.info("parse children confine their files with Landlock (ABI %d)", abi)
    else:
        log.warning("this kernel offers no Landlock: parse children open files as their uid allows")
