"""The parse subprocess: `python -m parser_svc.parse_child TYPE INPUT OUTPUT CPU_S MEMORY_MB`.

Runs one document under the resource limits its parent set, writes the serialized
ReadingPackage to OUTPUT and reports on stdout, one JSON object per line:
  {"event": "progress", "done": 3, "total": 10, "stage": "text"}
  {"event": "done", "pages": 10, "chars": 12345}
  {"event": "failed", "reason": "CORRUPT_DOCUMENT", "message": "..."}
Exit code 0 after "done" or "failed"; anything else is a crash.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

from parser_svc.parsers import ParseFailure
from parser_svc.sandbox import apply_limits

PR_SET_PDEATHSIG = 1


def _emit(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


_PAGE_DELAY_S = int(os.environ.get("DOCPARSE_PARSE_PAGE_DELAY_MS", "0")) / 1000


def _progress(done: int, total: int, stage: str) -> None:
    _emit(event="progress", done=done, total=total, stage=stage)
    if _PAGE_DELAY_S and done:
        time.sleep(_PAGE_DELAY_S)


def _die_with_parent() -> None:
    """The parse must not outlive its worker (a killed worker's job is retried elsewhere)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:
        os._exit(1)


def run(content_type: str, input_path: Path, output_path: Path) -> None:
    data = input_path.read_bytes()
    marker = os.environ.get("DOCPARSE_FAULT_SEGV_MARKER", "")
    if marker and marker.encode() in data:
        os.kill(os.getpid(), signal.SIGSEGV)  # fault injection for crash-path tests
    if content_type != "pdf":
        raise ParseFailure(
            "UNSUPPORTED_FORMAT", f"no parser for {content_type!r} documents in this version"
        )
    from parser_svc.parsers.pdf import parse_pdf

    package = parse_pdf(data, _progress)
    output_path.write_bytes(package.SerializeToString(deterministic=True))
    chars = sum(len(page.text) for page in package.pages)
    _emit(event="done", pages=len(package.pages), chars=chars)


def main() -> None:
    _die_with_parent()
    content_type, input_path, output_path, cpu_s, memory_mb = sys.argv[1:6]
    apply_limits(int(cpu_s), int(memory_mb))
    try:
        run(content_type, Path(input_path), Path(output_path))
    except ParseFailure as failure:
        _emit(event="failed", reason=failure.reason, message=failure.message)
    except MemoryError:
        _emit(
            event="failed", reason="DOCUMENT_TOO_LARGE", message="parse exceeded its memory limit"
        )


if __name__ == "__main__":
    main()
