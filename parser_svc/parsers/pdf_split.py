"""A long PDF read by more than one process, when the worker has cores to spare.

The parse child cuts the pages into contiguous ranges, reads the first itself and forks one
sibling per other range *after the document is open* (the sibling inherits the open document
copy-on-write: no second read, no second repair). A sibling reads its range exactly as the
child would (`read_range`: the same per-page code with its own caches) and sends back a
`Part`: its pages, the assets it stored, its warnings and counters. The child adds each part
in page order, so the package is the one a single process makes.

Where a part cannot be added as a single process would have made it, the child reads that
range itself instead (the same answer, only later): when an asset limit was reached on either
side or would be by the union, when mupdf warned while the sibling read (a damaged document:
the repair warning counts every line), or when the sibling failed on something other than the
document (an unexpected error). A ParseFailure or MemoryError in a sibling fails the parse as
it would have in the child; a sibling killed by a signal (a crash in C, its CPU limit) raises
`SiblingCrashed`, which the child turns into the same signal on itself, so the worker reports
it as it reports the child's own (PARSER_CRASHED, TIMEOUT).

Why forking here is safe: the child is single-threaded but for the memory watch (it reads
/proc and sleeps; the sibling never writes to stdout, where that thread could hold a lock),
mupdf has no threads, and the fork happens before any OCR thread exists. The sibling dies with
the child (PDEATHSIG), so a job killed for its wall-clock limit or cancelled leaves nothing
behind; it has the child's CPU and memory limits as a process of its own.

Progress: a sibling reports its pages done on its pipe; the child adds them to its own count
whenever it reports, so the job's progress counts every process's pages, never goes back and
never passes the total.
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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pymupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseFailure, ProgressFn, SiblingCrashed

# The thread that says when a sibling's address space passes 75 % of its limit.
MEMORY_WATCH = "sibling-memory-watch"
# kind (P progress, M memory high, R result, F failure, E error), length
_HEADER = struct.Struct("!cI")


@dataclass
class Part:
    """What reading one range gives besides its pages and assets (`package`)."""

    failed_pages: int = 0
    image_pages: int = 0
    ocr_pages: int = 0
    garbage_pages: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # xref -> (asset id or "", mime type): the images it tried, and the ones it warned about.
    extracted: dict[int, tuple[str, str]] = field(default_factory=dict)
    warned_xrefs: list[int] = field(default_factory=list)
    dropped_assets: int = 0
    mupdf_warnings: str = ""
    package: rp.ReadingPackage = field(default_factory=rp.ReadingPackage)


# How many processes read the pages of the document this process parsed last (accepted parts:
# a range read again by the child does not count): the parse child reports it in its "done"
# event, the worker in docparse_parse_processes_total.
last_processes = 1


def ranges(total: int, processes: int, min_pages: int) -> list[range]:
    """`total` pages cut into up to `processes` contiguous ranges of at least `min_pages`
    pages each (one range: no split)."""
    if processes <= 1 or min_pages <= 0:
        return [range(total)]
    count = max(1, min(processes, total // min_pages))
    bounds = [total * i // count for i in range(count + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(count)]


class Sibling:
    """A forked process reading one range; the child reads its progress and its part."""

    def __init__(self, pid: int, fd: int, pages: range) -> None:
        self.pid = pid
        self.pages = pages
        self.done = 0
        self.memory_high_mb = 0  # the sibling passed 75 % of its memory limit at this size
        self._file = os.fdopen(fd, "rb", buffering=0)
        self._buffer = bytearray()
        self._message: tuple[bytes, bytes] | None = None

    def poll(self) -> None:
        """Reads whatever progress has arrived, without waiting."""
        while self._message is None and select.select([self._file], [], [], 0)[0]:
            if not self._read_some():
                break

    def _read_some(self) -> bool:
        chunk = self._file.read(1 << 16)
        if not chunk:
            return False
        self._buffer += chunk  # amortized: a part of some MB arrives in 64 KB reads
        while len(self._buffer) >= _HEADER.size:
            kind, length = _HEADER.unpack_from(self._buffer)
            if len(self._buffer) < _HEADER.size + length:
                break
            body = bytes(self._buffer[_HEADER.size : _HEADER.size + length])
            del self._buffer[: _HEADER.size + length]
            if kind == b"P":
                self.done = max(self.done, int(body))
            elif kind == b"M":
                self.memory_high_mb = int(body)
            else:
                self._message = (kind, body)
        return True

    def finish(self, on_progress: Callable[[], None]) -> tuple[bytes, bytes] | None:
        """Waits for the sibling's end: its last message (None: it sent none) after relaying
        its progress; raises SiblingCrashed when a signal killed it."""
        with self._file:
            while self._message is None and self._read_some():
                on_progress()
        _, status = os.waitpid(self.pid, 0)
        if os.WIFSIGNALED(status):
            raise SiblingCrashed(os.WTERMSIG(status), self.memory_high_mb)
        return self._message

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        self._file.close()


def fork_sibling(pages: range, read_range: Callable[[range, ProgressFn], Part]) -> Sibling:
    """Forks a process that reads `pages` with `read_range` and sends back its Part."""
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns of fork with threads (see module doc)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        os.close(write_fd)
        return Sibling(pid, read_fd, pages)
    os.close(read_fd)
    _sibling_main(write_fd, pages, read_range)
    raise AssertionError("unreachable")  # _sibling_main never returns


def _sibling_main(fd: int, pages: range, read_range: Callable[[range, ProgressFn], Part]) -> None:
    code = 0
    try:
        from parser_svc.child.parse_child import MEMORY_HIGH_FRACTION, die_with_parent, vm_size_kb

        die_with_parent()
        # The child's stdin and stdout are its socket to the worker, which reads events until
        # every holder has closed it: the sibling lets go of it at once (stderr, the worker's
        # log, stays for a traceback).
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        pymupdf.TOOLS.mupdf_warnings(reset=True)  # the open's warnings are the child's
        lock = threading.Lock()

        def send(kind: bytes, *pieces: bytes) -> None:
            """One message of `pieces`, written as they are (a part is not copied whole)."""
            with lock:
                header = _HEADER.pack(kind, sum(len(piece) for piece in pieces))
                for piece in (header, *pieces):
                    view = memoryview(piece)
                    while view:
                        view = view[os.write(fd, view) :]

        def watch_memory(limit: int) -> None:
            """As the child's own watch: says when the address space passes 75 % of the
            limit, so a crash in C that follows is told as the memory it was."""
            while vm_size_kb() * 1024 <= limit * MEMORY_HIGH_FRACTION:
                time.sleep(0.02)
            send(b"M", str(vm_size_kb() // 1024).encode())

        limit, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if limit != resource.RLIM_INFINITY:
            threading.Thread(
                target=watch_memory, args=(limit,), name=MEMORY_WATCH, daemon=True
            ).start()

        def progress(done: int, total: int, stage: str) -> None:
            send(b"P", str(done).encode())

        try:
            part = read_range(pages, progress)
            part.mupdf_warnings = pymupdf.TOOLS.mupdf_warnings().strip()
            meta = asdict(part)
            del meta["package"]
            package = part.package.SerializeToString()
            head = json.dumps(meta).encode()
            send(b"R", struct.pack("!I", len(head)), head, package)
        except ParseFailure as failure:
            send(b"F", json.dumps([failure.reason, failure.message]).encode())
        except MemoryError:
            send(b"F", json.dumps(["", "memory"]).encode())
        except Exception:
            traceback.print_exc()  # to the worker's log: the child reads the range again
            send(b"E", traceback.format_exc().encode(errors="replace"))
    except BaseException:
        code = 1
    finally:
        os._exit(code)


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
        raise ParseFailure(reason, text)
    return None
