"""Processes that read page ranges of a long PDF beside the parse child ("siblings"): the
`ForkRange` the parse child hands the PDF parser (parser_svc/parsers/pdf_split.py says what a
range, a part and a re-read are).

`fork_sibling` forks once the document is open; the sibling claims chunks (the lowest left,
whenever it is free: parsers/pdf_chunks.py), reads each with the parser's `read_range` and
sends a Part back on a pipe for each, numbered, with its progress and each page's draft part on
the way (the child relays the drafts whenever it polls: draft_pages.py). A sibling killed
by a signal (a crash in C, its CPU limit) raises `SiblingCrashed`, which the parse child turns
into the same signal on itself, so the worker reports it as it reports the child's own
(PARSER_CRASHED, TIMEOUT).

Why forking here is safe: the child is single-threaded but for the memory watch (it reads
/proc and sleeps; the sibling never writes to stdout, where that thread could hold a lock),
mupdf has no threads, and the fork happens before any OCR thread exists. The sibling dies with
the child (PDEATHSIG), so a job killed for its wall-clock limit or cancelled leaves nothing
behind; it has the child's CPU and memory limits as a process of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import struct
import threading
import time
import traceback
import warnings
from dataclasses import asdict
from typing import Any

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child import draft_pages
from parser_svc.child.confinement import MEMORY_HIGH_FRACTION, die_with_parent, vm_size_kb
from parser_svc.parsers import ParseFailure
from parser_svc.parsers.pdf_split import Claims, Part, ReadRange


class SiblingCrashed(Exception):
    """A process that read part of the document was killed by `signum`: the
    parse child dies of the same signal, so the worker reports it as the child's own crash."""

    def __init__(self, signum: int, memory_high_mb: int = 0) -> None:
        super().__init__(f"a page-range sibling was killed by signal {signum}")
        self.signum = signum
        # > 0: it had passed 75 % of its memory limit (at this many MB) before it died.
        self.memory_high_mb = memory_high_mb


# The thread that says when a sibling's address space passes 75 % of its limit.
MEMORY_WATCH = "sibling-memory-watch"


# kind (P progress, D a page's draft part, M memory high; answers, each after its chunk's
# number: R result, F failure, E error), length
_HEADER = struct.Struct("!cI")
_NUMBER = struct.Struct("!I")


class Sibling:
    """A forked process reading the chunks it claims; the child reads its progress, drafts
    and answers."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.done = 0
        self.memory_high_mb = 0  # the sibling passed 75 % of its memory limit at this size
        self._file = os.fdopen(fd, "rb", buffering=0)
        self._buffer = bytearray()
        self._answers: dict[int, tuple[bytes, bytes]] = {}  # chunk -> (kind, body)
        self._ended = False  # its end of the pipe is closed: nothing more comes
        self._reaped = False

    @property
    def ended(self) -> bool:
        return self._ended

    def fileno(self) -> int:
        return self._file.fileno()

    def poll(self) -> None:
        """Reads whatever has arrived, without waiting."""
        while not self._ended and select.select([self._file], [], [], 0)[0]:
            self.read_some()

    def answered(self, chunk: int) -> bool:
        return chunk in self._answers

    def take(self, chunk: int) -> Part | None:
        """Its answer for `chunk`: the Part, or None when the child must read the chunk (an
        unexpected error); raises the document's own failure."""
        return outcome(self._answers.pop(chunk))

    def read_some(self) -> None:
        chunk = self._file.read(1 << 16)
        if not chunk:
            self._ended = True
            return
        self._buffer += chunk  # amortized: a part of some MB arrives in 64 KB reads
        while len(self._buffer) >= _HEADER.size:
            kind, length = _HEADER.unpack_from(self._buffer)
            if len(self._buffer) < _HEADER.size + length:
                break
            body = bytes(self._buffer[_HEADER.size : _HEADER.size + length])
            del self._buffer[: _HEADER.size + length]
            if kind == b"P":
                self.done = max(self.done, int(body))
            elif kind == b"D":
                if draft_pages.relay is not None:
                    draft_pages.relay(struct.unpack_from("!I", body)[0], body[4:])
            elif kind == b"M":
                self.memory_high_mb = int(body)
            else:
                self._answers[_NUMBER.unpack_from(body)[0]] = (kind, body[_NUMBER.size :])

    def finish(self) -> None:
        """Waits for the sibling's end: raises SiblingCrashed when a signal killed it."""
        while not self._ended:
            self.read_some()
        if self._reaped:
            return
        with self._file:
            _, status = os.waitpid(self.pid, 0)
        self._reaped = True
        if os.WIFSIGNALED(status):
            raise SiblingCrashed(os.WTERMSIG(status), self.memory_high_mb)

    def kill(self) -> None:
        if not self._reaped:  # a reaped pid may be another process's by now
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            self._reaped = True
        self._file.close()


def fork_sibling(claims: Claims, chunks: list[range], read_range: ReadRange) -> Sibling:
    """Forks a process that claims chunks (of `chunks`) from `claims` until none is left, reads
    each with `read_range` and sends back a Part for each."""
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns of fork with threads (see module doc)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        os.close(write_fd)
        return Sibling(pid, read_fd)
    os.close(read_fd)
    _sibling_main(write_fd, claims, chunks, read_range)
    raise AssertionError("unreachable")  # _sibling_main never returns


def _sibling_main(fd: int, claims: Claims, chunks: list[range], read_range: ReadRange) -> None:
    code = 0
    try:
        die_with_parent()
        # The child's stdin and stdout are its socket to the worker, which reads events until
        # every holder has closed it: the sibling lets go of it at once (stderr, the worker's
        # log, stays for a traceback).
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        send = _Sender(fd)
        limit, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if limit != resource.RLIM_INFINITY:
            threading.Thread(
                target=_watch_memory, args=(limit, send), name=MEMORY_WATCH, daemon=True
            ).start()
        draft_pages.sibling_drafts(lambda number, part: send(b"D", struct.pack("!I", number), part))
        _read_and_send(claims, chunks, read_range, send)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


class _Sender:
    """Messages to the child on the sibling's pipe, one at a time (the memory watch sends
    from its own thread)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()

    def __call__(self, kind: bytes, *pieces: bytes) -> None:
        """One message of `pieces`, written as they are (a part is not copied whole)."""
        with self.lock:
            header = _HEADER.pack(kind, sum(len(piece) for piece in pieces))
            for piece in (header, *pieces):
                view = memoryview(piece)
                while view:
                    view = view[os.write(self.fd, view) :]


def _watch_memory(limit: int, send: _Sender) -> None:
    """As the child's own watch: says when the address space passes 75 % of the limit, so a
    crash in C that follows is told as the memory it was."""
    while vm_size_kb() * 1024 <= limit * MEMORY_HIGH_FRACTION:
        time.sleep(0.02)
    send(b"M", str(vm_size_kb() // 1024).encode())


def _read_and_send(
    claims: Claims, chunks: list[range], read_range: ReadRange, send: _Sender
) -> None:
    """Reads the chunks it claims and sends a Part for each, or why there is none (and stops
    claiming: the child reads that chunk, and the others claim the rest)."""
    before = 0  # pages of the chunks already read

    def progress(done: int, total: int, stage: str) -> None:
        send(b"P", str(before + done).encode())

    while (number := claims.next()) is not None:
        pages, tag = chunks[number], _NUMBER.pack(number)
        try:
            part = read_range(pages, progress)
            meta = asdict(part)
            del meta["package"]
            package = part.package.SerializeToString()
            head = json.dumps(meta).encode()
            send(b"R", tag, struct.pack("!I", len(head)), head, package)
        except ParseFailure as failure:
            send(b"F", tag, json.dumps([failure.reason, failure.message]).encode())
            return
        except MemoryError:
            send(b"F", tag, json.dumps(["", "memory"]).encode())
            return
        except Exception:
            traceback.print_exc()  # to the worker's log: the child reads the chunk again
            send(b"E", tag, traceback.format_exc().encode(errors="replace"))
            return
        before += len(pages)


def decode_part(body: bytes) -> Part:
    (head_length,) = struct.unpack_from("!I", body)
    meta: dict[str, Any] = json.loads(body[4 : 4 + head_length])
    package = rp.ReadingPackage.FromString(body[4 + head_length :])
    return Part(
        failed_pages=meta["failed_pages"],
        image_pages=meta["image_pages"],
        ocr_pages=meta["ocr_pages"],
        garbage_pages=[(n, why) for n, why in meta["garbage_pages"]],
        warnings=meta["warnings"],
        extracted={int(k): (v[0], v[1]) for k, v in meta["extracted"].items()},
        warned_xrefs=meta["warned_xrefs"],
        dropped_assets=meta["dropped_assets"],
        mupdf_warnings=meta["mupdf_warnings"],
        package=package,
        looks={int(k): [(float(s), bool(b)) for s, b in v] for k, v in meta["looks"].items()},
    )


def outcome(message: tuple[bytes, bytes] | None) -> Part | None:
    """The sibling's Part; None when the range must be read again by the child (an
    unexpected error, or no answer); raises the document's own failure."""
    if message is None:
        return None
    kind, body = message
    if kind == b"R":
        return decode_part(body)
    if kind == b"F":
        reason, text = json.loads(body)
        if not reason:
            raise MemoryError(text)
        raise ParseFailure(ErrorReason(reason), text)
    return None
