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

Spares: a request {"ready": true} (no descriptor) has the zygote fork the next job's child
now, unless one waits, and answer {"spare": N}. The spare parses a one-line PDF of its own and
waits on a socket of its own; the next job's request is handed to it (its pid is that job's
answer) instead of a fork. The worker asks once it has been idle for a moment with no job
waiting (work/free_cores.py), so that the copies a fresh fork's first parse makes of the zygote's
memory, and the fork, happen while nobody waits for them.
A spare is the worker's child too (the worker reaps one that ends unused), dies with the worker
and exits when the zygote does. It has read no document: what it parsed is made here.
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


def _run_child(control: socket.socket | None, job_fd: int, request: dict[str, Any]) -> None:
    """In the forked child: becomes the job's parse child and never returns."""
    code = 1
    try:
        if control is not None:
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


class _Spare:
    """A child forked ahead of its job (`_fork_spare`), waiting on its own socket for the
    request the worker sent here."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid, self.sock = pid, sock

    def take(self, message: bytes, job_fd: int) -> bool:
        """Hands it the request; False when it is gone (it died while waiting)."""
        try:
            socket.send_fds(self.sock, [message], [job_fd])
            return True
        except OSError:
            return False
        finally:
            self.sock.close()


def _fork_spare(control: socket.socket, worker: int) -> _Spare | None:
    """The next job's child, forked now (the worker asks when it is idle): it
    parses a document of its own while no job waits for it, so the pages a parse writes are
    already its own when its job comes (the first parse in a fresh fork copies ~1,000 pages of
    the fork server's memory: 5-8 ms of a one-page job's wall time, bench/README.md), and the
    fork itself is behind it too."""
    if _threads() != 1:
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = _clone_parent()
    except OSError:
        ours.close()
        theirs.close()
        return None
    if pid == 0:
        ours.close()
        _wait_for_job(control, theirs, worker)
    theirs.close()
    return _Spare(pid, ours)


def _wait_for_job(control: socket.socket, sock: socket.socket, worker: int) -> None:
    """In a spare: warms up, waits for its request and becomes that job's parse child; exits
    when the fork server is gone (its socket closes) and dies with the worker. Never
    returns."""
    try:
        control.close()
        _set_cmdline([sys.executable, "-m", "parser_svc.child.parse_child", "(spare)"])
        die_with_parent(worker)
        _warm_spare()
        message, fds, _flags, _addr = socket.recv_fds(sock, 65536, 1)
        sock.close()
        if not message or len(fds) != 1:
            os._exit(0)  # the fork server stopped: no job comes
        request = json.loads(message)
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    _run_child(None, fds[0], request)


def serve(control: socket.socket, worker: int) -> None:
    spare: _Spare | None = None
    while True:
        message, fds, _flags, _addr = socket.recv_fds(control, 65536, 1)
        if not message:
            return  # the worker closed its end: it is stopping (a spare's socket closes too)
        reply: dict[str, object]
        try:
            request = json.loads(message)
            if len(fds) != (0 if request.get("ready") else 1):
                raise ValueError(f"unexpected file descriptors: {len(fds)}")
            if _threads() != 1:
                raise RuntimeError(f"the fork server runs {_threads()} threads; it must run one")
            if request.get("ready"):
                spare = spare or _fork_spare(control, worker)
                reply = {"spare": spare.pid if spare is not None else 0}
            else:
                taken, spare = spare, None
                if taken is not None and taken.take(message, fds[0]):
                    pid = taken.pid
                else:
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


def warm_up(ocr_scripts: tuple[str, ...] | None = None) -> None:
    """mupdf's lazy set-up (font library, built-in fonts, caches) happens once, here, on a
    PDF made here, instead of in every child: about 7 ms of CPU less per one-page job. It is
    no job's document, so nothing of a user's document is in what the children inherit."""
    from parser_svc.parsers import pdf

    pdf.warm_up(ocr_scripts).SerializeToString()


_SPARE_PDF = b""  # what a spare parses while it waits (_spare_document)


def _spare_document() -> bytes:
    """A one-line text PDF: a spare's parse of it writes to the pages a text page's parse
    writes (a fresh fork's one-page job then copies ~20 pages instead of ~1,000), for ~2 ms
    of CPU; the fork server's warm-up document (ruled lines, a table) costs twice that and
    spares no more of a text job's copies."""
    import pymupdf  # here: a child's memory limit counts from before the parsers' imports

    doc = pymupdf.open()  # type: ignore[no-untyped-call]
    doc.new_page().insert_text((72, 72), "Spare.", fontsize=11)
    data = bytes(doc.tobytes())  # type: ignore[no-untyped-call]
    doc.close()  # type: ignore[no-untyped-call]
    return data


def _warm_spare() -> None:
    from parser_svc.parsers import ParseOptions, pdf

    pdf.parse_pdf(_SPARE_PDF, lambda *_: None, ParseOptions.defaults()).SerializeToString()


def main() -> None:
    global _START_KB, _SPARE_PDF
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
    from parser_svc.parsers import ocr

    warm_up(ocr.preload_scripts(sys.argv[4]))  # the worker's `ocr_preload`
    _SPARE_PDF = _spare_document()
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
    serve(control, parent)


if __name__ == "__main__":
    main()
