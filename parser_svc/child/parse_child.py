"""The parse subprocess: `python -m parser_svc.child.parse_child TYPE INPUT OUTPUT CPU_S MEMORY_MB`.

Reads its options (ParseOptions as one JSON object: password, page limits, where to put
assets, test hooks) from stdin, so no secret is ever on a command line and no setting comes from
the environment; CPU_S and MEMORY_MB are process limits, which it sets on itself before it reads
the document. Runs that one document, writes the serialized ReadingPackage to OUTPUT (and images
to the assets directory) and reports on stdout, one JSON object per line:
  {"event": "progress", "done": 3, "total": 10, "stage": "text"}
  {"event": "page", "number": 3, "part": "<base64>"}   (a PDF page's draft: child/draft_pages.py)
  {"event": "done", "pages": 10, "chars": 12345, "processes": 1, "held": "1-10"}
  {"event": "failed", "reason": "CORRUPT_DOCUMENT", "message": "..."}
Exit code 0 after "done" or "failed"; 141 when the worker closed stdout (it stopped listening:
the job was cancelled or timed out); anything else is a crash.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import BinaryIO

from docparse import page_ranges
from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc import PARSER_VERSION
from parser_svc.child import landlock
from parser_svc.child.confinement import (
    MEMORY_HIGH_FRACTION,
    apply_limits,
    die_with_parent,
    start_small_thread,
    vm_size_kb,
)
from parser_svc.child.draft_pages import writing_drafts
from parser_svc.child.page_siblings import SiblingCrashed, fork_sibling
from parser_svc.child.privileges import drop_privileges, use_scratch
from parser_svc.parsers import (
    ParseFailure,
    ParseOptions,
    ProgressFn,
    describe_error,
    is_out_of_memory,
    ocr,
    pdf_split,
)
from parser_svc.parsers.doc import antiword_path
from parser_svc.parsers.formats import parse_kind

# The exit status of a child whose worker stopped listening (128 + SIGPIPE, as a shell shows a
# process killed by a broken pipe).
WORKER_GONE_EXIT = 141


# Lines come from the parse, the memory watch and the drafts' thread (draft_pages.py): whole.
_emitting = threading.Lock()


def _emit(**event: object) -> None:
    try:
        with _emitting:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()
    except (BrokenPipeError, ConnectionResetError):
        # The worker closed our end: it has given up on this job (cancelled, timed out, or it is
        # stopping) and reads nothing more. Leave at once and quietly: no traceback in the
        # worker's log for an ordinary cancel, and no parsing for nobody.
        os._exit(WORKER_GONE_EXIT)


# Each progress event becomes a state-store write and an event to every watcher. Pages that
# take longer than this are reported one by one; faster ones are coalesced (a 100-page text PDF
# parses in well under a second), and the first, the last and every stage change always go out.
PROGRESS_INTERVAL_S = 0.05
_last_progress = (-1.0, "")


def _progress(done: int, total: int, stage: str) -> None:
    global _last_progress
    now = time.monotonic()
    last_time, last_stage = _last_progress
    if done == 0 or done >= total or stage != last_stage or now - last_time >= PROGRESS_INTERVAL_S:
        _emit(event="progress", done=done, total=total, stage=stage)
        _last_progress = (now, stage)


def _paced(page_delay_ms: int) -> ProgressFn:
    """`_progress`, pausing `page_delay_ms` after each page (a testing and demo aid)."""
    if not page_delay_ms:
        return _progress

    def progress(done: int, total: int, stage: str) -> None:
        _progress(done, total, stage)
        if done:
            time.sleep(page_delay_ms / 1000)

    return progress


def count_chars(package: rp.ReadingPackage) -> int:
    """Characters of text in a package: page and slide text, notes, cell values, and the
    attachments' packages."""
    chars = sum(len(page.text) for page in package.pages)
    chars += sum(count_chars(a.package) for a in package.attachments if a.HasField("package"))
    chars += sum(len(slide.text) + len(slide.notes) for slide in package.slides)
    for sheet in package.sheets:
        for row in sheet.rows:
            for cell in row.cells:
                kind = cell.WhichOneof("value")
                if kind == "string_value":
                    chars += len(cell.string_value)
                elif kind == "number_value":
                    chars += len(f"{cell.number_value:g}")
                elif kind == "datetime_value":
                    chars += len(cell.datetime_value)
                elif kind is not None:
                    chars += 5
    return chars


def units(package: rp.ReadingPackage) -> int:
    """Pages, sheets or slides."""
    return len(package.pages) or len(package.sheets) or len(package.slides)


def parse(
    content_type: str, data: bytes, progress: ProgressFn, options: ParseOptions
) -> rp.ReadingPackage:
    """The reading package of `data`, whose type `detect_type` found."""
    if content_type == "pdf":  # a long PDF's page ranges may be read by sibling processes
        from parser_svc.parsers.pdf import parse_pdf

        return parse_pdf(data, progress, options, fork_sibling)
    return parse_kind(content_type, data, progress, options)


def run(content_type: str, document: BinaryIO, output_path: Path, options: ParseOptions) -> None:
    with document:
        data = document.read()
    marker = options.fault_segv_marker
    if marker and marker.encode() in data:
        os.kill(os.getpid(), signal.SIGSEGV)  # fault injection for crash-path tests
    marker = options.fault_corrupt_marker
    if marker and marker.encode() in data:
        _corrupt_globals()  # fault injection for isolation tests
    drafts = writing_drafts(output_path.parent, _emit) if content_type == "pdf" else None
    with drafts or contextlib.nullcontext():
        package = parse(content_type, data, _paced(options.page_delay_ms), options)
    package.parser_version = f"docparse {PARSER_VERSION}"
    output_path.write_bytes(package.SerializeToString(deterministic=True))
    processes = pdf_split.last_processes if content_type == "pdf" else 1
    held = page_ranges.of_pages(page.number for page in package.pages)
    _emit(
        event="done",
        pages=units(package),
        chars=count_chars(package),
        processes=processes,
        held=held,
    )


_LEAKED: list[bytes] = []


def _corrupt_globals() -> None:
    """What a buggy parser or library might do to the process it runs in: keep 64 MB it never
    frees, and replace a function every later PDF parse would call. A later job must see
    neither (tests/parser_svc/child/test_warm_workers.py)."""
    from parser_svc.parsers import pdf_pages

    _LEAKED.append(b"x" * (64 * 1024 * 1024))
    setattr(pdf_pages, "page_text", lambda blocks: "CORRUPTED BY AN EARLIER JOB")  # noqa: B010


def _read_options() -> ParseOptions:
    """Options arrive as one JSON object on stdin (the password among them: never on argv),
    everything the worker's settings say about the parse: the child reads no environment."""
    raw = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    return ParseOptions.from_json(json.loads(raw) if raw.strip() else {})


M_ARENA_MAX = -8  # mallopt parameter (malloc.h)


def _watch_memory(limit_mb: int) -> None:
    """Says once, on stdout, when the address space passes 75% of the limit: if the child then
    dies in C code on a failed allocation, the worker knows it was memory (DOCUMENT_TOO_LARGE),
    not a parser bug (PARSER_CRASHED)."""

    def watch() -> None:
        threshold_kb = limit_mb * 1024 * MEMORY_HIGH_FRACTION
        while True:
            try:
                vm_kb = vm_size_kb()
            except (OSError, ValueError):
                return
            if not vm_kb:
                return
            if vm_kb > threshold_kb:
                _emit(event="memory_high", vm_mb=vm_kb // 1024, limit_mb=limit_mb)
                return
            time.sleep(0.02)

    if sys.platform.startswith("linux"):
        # glibc gives each new thread a malloc arena that reserves 64 MB of address space,
        # and RLIMIT_AS counts reservations: share at most two arenas, and a small stack.
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, 2)
        start_small_thread(watch, "memory-watch")


def _open_and_drop(
    input_path: str, output_path: str, options: ParseOptions, parent: int | None
) -> BinaryIO:
    """The document, opened as the server's uid (root may read the owner-only upload); then
    this process becomes the uid the worker named, if any (child/privileges.py), and confines
    the files it may open (child/landlock.py)."""
    document = open(input_path, "rb")  # noqa: SIM115 (read and closed by `run`)
    scratch = Path(output_path).absolute().parent
    if drop_privileges(options.child_uid, options.child_gid):
        die_with_parent(parent)  # a change of uid cleared the parent-death signal
        use_scratch(scratch)
    if options.landlock:
        _confine(scratch, options)
    return document


def _confine(scratch: Path, options: ParseOptions) -> None:
    """From here on (this process, its page siblings, antiword) files are opened only where a
    parse reads, and written only in the job's scratch directory (child/landlock.py). Before
    any thread starts: Landlock restricts the calling thread and what it creates."""
    extra = [str(ocr.tessdata_dir() or ""), antiword_path(options.antiword) or ""]
    if landlock.confine(scratch, [path for path in extra if path]):
        use_scratch(scratch)  # TMPDIR and HOME: the one place it may write


def main(argv: list[str] | None = None, parent: int | None = None, start_kb: int = 0) -> None:
    """`argv` is TYPE INPUT OUTPUT CPU_S MEMORY_MB (default: the command line). `start_kb`,
    for a child forked from the fork server (parser_svc.child.zygote): the address space a spawned
    child has when it applies its limits (measured by the fork server at the same point). The
    memory limit then counts what a spawned child's would: everything beyond that start-up,
    except what the fork server preloaded on top of it (pymupdf, the parsers, shared by all)."""
    die_with_parent(parent)
    # numpy (pulled in by openpyxl, OCR) sizes OpenBLAS buffers per core: ~60 MB of address
    # space per thread against the memory limit, for no BLAS work. One thread is plenty.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    content_type, input_path, output_path, cpu_s, limit_mb = (argv or sys.argv[1:])[:5]
    options = _read_options()
    document = _open_and_drop(input_path, output_path, options, parent)
    preloaded_mb = max(0, vm_size_kb() - start_kb) // 1024 if start_kb else 0
    memory_mb = int(limit_mb) + preloaded_mb
    apply_limits(int(cpu_s), memory_mb)
    _watch_memory(memory_mb)
    try:
        run(content_type, document, Path(output_path), options)
    except SiblingCrashed as crash:
        # A process reading part of this document died of a signal: this child dies of the
        # same, so the worker reports it as it would have this child's (page_siblings.py),
        # memory first if the sibling had said it was near its limit.
        if crash.memory_high_mb:
            _emit(event="memory_high", vm_mb=crash.memory_high_mb, limit_mb=memory_mb)
        signal.signal(crash.signum, signal.SIG_DFL)
        os.kill(os.getpid(), crash.signum)
    except ParseFailure as failure:
        _emit(event="failed", reason=failure.reason, message=failure.message)
    except MemoryError:
        _emit(
            event="failed",
            reason=ErrorReason.DOCUMENT_TOO_LARGE,
            message=f"the parse exceeded its memory limit ({limit_mb} MB)",
        )
    except RecursionError:
        _emit(
            event="failed",
            reason=ErrorReason.CORRUPT_DOCUMENT,
            message="the document nests too deeply",
        )
    except Exception as err:
        # A library choking on the document: deterministic for this input, so not a crash to
        # retry. The traceback goes to the worker's log (stderr); the password is never in it.
        traceback.print_exc()
        text = describe_error(err)
        if is_out_of_memory(err):
            _emit(
                event="failed",
                reason=ErrorReason.DOCUMENT_TOO_LARGE,
                message=f"the parse exceeded its memory limit ({limit_mb} MB): {text}",
            )
        else:
            _emit(
                event="failed",
                reason=ErrorReason.CORRUPT_DOCUMENT,
                message=f"the {content_type} parser cannot read this document: {text}",
            )


if __name__ == "__main__":
    main()
