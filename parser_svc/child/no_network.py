"""What a parse process may not reach: the network, and the service's secrets.

A parse process runs mupdf, tesseract, antiword and the Python parsers on a tenant's bytes: one
memory bug in any of them runs the attacker's code with this process's rights. So it gets
- `child_environment()`: the environment it is started with (the fork server and spawned
  children), an allowlist: no internal token, Redis URL, key or webhook-secret file paths,
  nothing `DOCPARSE_*`. The parse reads its options from stdin, never from the environment.
- `deny_network()`: no_new_privs and a seccomp filter under which socket(2) for the internet
  families (IPv4, IPv6, packet) fails with EACCES: no connection to Redis, to the metadata
  service or anywhere else. Unix sockets (the fork server's control channel) stay.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

# What a parse process may see of its parent's environment.
_KEPT = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TESSDATA_PREFIX",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "VIRTUAL_ENV",
        "LD_LIBRARY_PATH",
        "OMP_NUM_THREADS",
        "OMP_THREAD_LIMIT",
        "OPENBLAS_NUM_THREADS",
        "MALLOC_ARENA_MAX",
    }
)


def child_environment(source: dict[str, str] | None = None) -> dict[str, str]:
    """The allowlisted part of `source` (default: this process's environment), locale
    variables (LC_*) included."""
    env = dict(os.environ if source is None else source)
    return {k: v for k, v in env.items() if k in _KEPT or k.startswith("LC_")}


PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_EACCES = 0x00050000 | 13  # SECCOMP_RET_ERRNO | EACCES
_LD_ABS_W, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
# audit arch and socket(2)'s number, by machine
_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}
_DENIED_FAMILIES = (2, 10, 17)  # AF_INET, AF_INET6, AF_PACKET


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _filter(arch: int, socket_nr: int) -> bytes:
    """seccomp_data: nr at 0, arch at 4, args[0] (low word, little-endian) at 16."""
    ins = [
        (_LD_ABS_W, 0, 0, 4),
        (_JEQ_K, 0, 3 + len(_DENIED_FAMILIES), arch),  # another ABI: allow
        (_LD_ABS_W, 0, 0, 0),
        (_JEQ_K, 0, 1 + len(_DENIED_FAMILIES), socket_nr),
        (_LD_ABS_W, 0, 0, 16),
    ]
    for i, family in enumerate(_DENIED_FAMILIES):
        ins.append((_JEQ_K, len(_DENIED_FAMILIES) - i, 0, family))
    ins += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_EACCES)]
    return b"".join(struct.pack("<HBBI", *i) for i in ins)


def deny_network() -> bool:
    """Applies no_new_privs and the filter to this process and what it forks; False where the
    platform has no seccomp filter we know how to write (the parse still runs)."""
    machine = _ARCHES.get(platform.machine())
    if not sys.platform.startswith("linux") or machine is None or sys.byteorder != "little":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    program = _filter(*machine)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    return bool(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0)
