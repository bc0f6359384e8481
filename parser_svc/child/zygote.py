"""The fork server ("zygote"): parse children without interpreter start-up.

A fresh `python -m parser_svc.child.parse_child` costs about 0.3 s of CPU before it reads a byte of
the document (the interpreter, pymupdf, the parsers, protobuf). The worker instead starts this
process once: `python -m parser_svc.child.zygote`, a fresh interpreter (fork + exec, like any
subprocess) that imports all of that, freezes it out of the collector's view, and then only
forks: one child per job, each a copy of the warm process, a few milliseconds apart.

Each child is still what the per-job child was: its own process with its own CPU, memory and
wall-clock limits, PDEATHSIG, the memory-high signal and its options (the password) on a pipe
from the worker; it exits when its job ends, so nothing of a document outlives the job, and a
crash, a leak or a corrupted global touches only that job.

The children are the *worker's* children, not the zygote's: the zygote forks with
clone(CLONE_PARENT), so the kernel makes the worker their parent. The worker waits for them
itself (a pidfd, then waitpid: the exit status or the signal, as with any child), they die
with the worker (PDEATHSIG names the worker), and a zygote that dies takes no running parse
with it: the worker starts a new one for the next job.

Protocol (one SOCK_SEQPACKET socket pair, one request at a time): the worker sends a JSON
request {"argv": [...], "parent": pid, "cwd": path or null} (cwd: the directory the child
starts in) with one file descriptor attached, one end of a fresh socket pair that becomes the
child's stdin and stdout (the worker writes the options to it and reads the child's events
from it, exactly as from a spawned child's pipes); the zygote answers
{"pid": N} or {"error": "..."}. The worker's side of it is parser_svc.child.fork_server.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import io
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any

from parser_svc.child import huge_pages, landlock, parse_child, privileges
from parser_svc.child.confinement import die_with_parent, vm_size_kb
from parser_svc.child.fork_server import SYS_CLONE
from parser_svc.child.no_network import deny_network

CLONE_PARENT = 0x00008000
MODULES = (
    "parser_svc.child.parse_child",
    "parser_svc.parsers.detect",
    "parser_svc.parsers.pdf",
    "parser_svc.parsers.docx",
    "parser_svc.parsers.xlsx",
    "parser_svc.parsers.pptx",
    "parser_svc.parsers.xls",
    "parser_svc.parsers.doc",
    "parser_svc.parsers.office",
    "parser_svc.parsers.formats",
    "parser_svc.parsers.image",
    "parser_svc.parsers.html_page",
    "parser_svc.parsers.markdown_doc",
    "parser_svc.parsers.plain_text",
    "parser_svc.parsers.delimited",
    "parser_svc.parsers.epub",
    "parser_svc.parsers.rtf",
    "parser_svc.parsers.odf_text",
    "parser_svc.parsers.odf_sheet",
    "parser_svc.parsers.odf_slides",
    "parser_svc.parsers.eml",
    "parser_svc.parsers.msg",
)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _clone_parent() -> int:
    """fork(), except that the child's parent is our parent (the worker).

    Forking is safe here, and only here: this process was exec'd fresh, runs no thread (checked
    before every fork: `_threads() == 1`), no event loop, no gRPC, and holds no lock another
    thread could own. The server process, which runs grpc's threads, never forks: it starts
    this one with fork + exec (subprocess), as it started every parse child before.

    The raw syscall skips glibc's fork() wrapper, so CPython's own fork hooks are called around
    it exactly as os.fork() calls them (the import lock, the GIL, os.register_at_fork hooks:
    `random` reseeds, `threading` resets). PyDLL keeps the GIL held across the call, as os.fork
    does. glibc's cached thread id stays the zygote's in the child; glibc only uses it for
    mutex ownership (consistent within one process) and its raise()/pthread_kill on itself
    asks the kernel for the real id (which is what lets a child raise signals at itself).
    """
    libc = ctypes.PyDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = syscall(
        ctypes.c_long(SYS_CLONE),
        ctypes.c_ulong(CLONE_PARENT | signal.SIGCHLD),
        ctypes.c_void_p(0),
        ctypes.c_void_p(0),
        ctypes.c_void_p(0),
        ctypes.c_ulong(0),
    )
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()
        return 0
    errno = ctypes.get_errno()
    ctypes.pythonapi.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(errno, f"clone(CLONE_PARENT) failed: {os.strerror(errno)}")
    return int(pid)


def _set_cmdline(argv: list[str]) -> None:
    """Writes `argv` over this process's original argument strings (what ps and
    /proc/PID/cmdline show), truncated to the room they had."""
    with open("/proc/self/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48 and 49)
    room = end - start
    data = b"\0".join(arg.encode() for arg in argv)[: room - 1]
    ctypes.memmove(start, data.ljust(room, b"\0"), room)


_START_KB = 0


def _run_child(control: socket.socket, job_fd: int, request: dict[str, Any]) -> None:
    """In the forked child: becomes the job's parse child and never returns."""
    code = 1
    try:
        control.close()
        argv, parent = [str(a) for a in request["argv"]], int(request["parent"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        os.dup2(job_fd, 0)
        os.dup2(job_fd, 1)
        os.close(job_fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        _set_cmdline([sys.executable, "-m", "parser_svc.child.parse_child", *argv])
        from parser_svc.parsers import pdf

        pdf.keep_documents_until_exit()  # this process ends with os._exit below
        parse_child.main(argv, parent=parent, start_kb=_START_KB)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def serve(control: socket.socket) -> None:
    while True:
        message, fds, _flags, _addr = socket.recv_fds(control, 65536, 1)
        if not message:
            return  # the worker closed its end: it is stopping
        reply: dict[str, object]
        try:
            request = json.loads(message)
            if len(fds) != 1:
                raise ValueError(f"expected one file descriptor, got {len(fds)}")
            if _threads() != 1:
                raise RuntimeError(f"the fork server runs {_threads()} threads; it must run one")
            pid = _clone_parent()
            if pid == 0:
                _run_child(control, fds[0], request)
            reply = {"pid": pid}
        except Exception as err:
            reply = {"error": f"{type(err).__name__}: {err}"}
        finally:
            for fd in fds:
                os.close(fd)
        control.send(json.dumps(reply).encode())


def warm_up() -> None:
    """mupdf's lazy set-up (font library, built-in fonts, caches) happens once, here, on a
    PDF made here, instead of in every child: about 7 ms of CPU less per one-page job. It is
    no job's document, so nothing of a user's document is in what the children inherit."""
    from parser_svc.parsers import pdf

    pdf.warm_up().SerializeToString()


def main() -> None:
    global _START_KB
    control_fd, parent = int(sys.argv[1]), int(sys.argv[2])
    die_with_parent(parent)
    # What a spawned child has mapped when it applies its limits: parse_child imported, no
    # parser yet. A forked child's memory limit is counted from there, like a spawned one's.
    _START_KB = vm_size_kb()
    # As in a spawned child: numpy (OCR, imported by a child only when it needs it) would size
    # OpenBLAS buffers per core against the memory limit.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    for module in MODULES:
        importlib.import_module(module)
    warm_up()
    if privileges.can_drop():
        privileges.reach_modules()  # once here rather than in each child that drops
    landlock.parse_reads()  # what each child's Landlock rules name, worked out once here
    # What the imports allocated is shared copy-on-write with every child: keep the collector
    # from touching it (a collection writes to every object header it walks, which would copy
    # the pages into each child).
    gc.collect()
    gc.freeze()
    deny_network()  # before the first document: its children inherit the filter
    if sys.argv[3] == "huge":
        huge_pages.collapse()  # a fork and an exit copy 2 MB page entries, not 4 KB ones
    control = socket.socket(fileno=control_fd)
    serve(control)


if __name__ == "__main__":
    main()
