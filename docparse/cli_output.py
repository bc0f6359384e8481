"""What the `docparse` commands share: their exit codes, how they print jobs and batches, and
the errors they raise for local files (INVALID_ARGUMENT, naming the path)."""

from __future__ import annotations

from pathlib import Path

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2
from docparse.waiting import state_name

EXIT_OK, EXIT_JOB_FAILED, EXIT_ERROR, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
# The reader of our output went away (`| head`): quiet, as a tool killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141


def json_text(message: Message) -> str:
    return json_format.MessageToJson(message, indent=None, preserving_proto_field_name=True)


def print_job(job: job_pb2.Job, as_json: bool) -> None:
    if as_json:
        print(json_text(job))
        return
    extra = f" {job.error.reason}: {job.error.message}" if job.error.reason else ""
    print(f"{job.job_id} {state_name(job.state)} v{job.version} "
          f"{job.progress.done}/{job.progress.total}{extra}")  # fmt: skip


def summary(jobs: list[job_pb2.Job]) -> None:
    print(f"\n{'file':<32} {'job id':<36} {'state':<10} {'pages':>5} {'chars':>8}  reason")
    for job in jobs:
        print(
            f"{job.file_name[:32]:<32} {job.job_id:<36} {state_name(job.state):<10} "
            f"{job.result.page_count:>5} {job.result.char_count:>8}  {job.error.reason}"
        )


def exit_for(jobs: list[job_pb2.Job]) -> int:
    return EXIT_OK if all(j.state == job_pb2.STATE_SUCCEEDED for j in jobs) else EXIT_JOB_FAILED


def local_error(reason: ErrorReason, message: str, path: Path | str) -> DocparseError:
    """A CLI argument that does not work: INVALID_ARGUMENT, metadata `path`."""
    return DocparseError(grpc.StatusCode.INVALID_ARGUMENT, reason, message, {"path": str(path)})


def files(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            found.append(path)
        else:
            raise local_error(
                ErrorReason.FILE_NOT_FOUND, f"{name}: no such file or directory", name
            )
    if not found:
        raise local_error(ErrorReason.NO_FILES, f"no files in {' '.join(paths)}", " ".join(paths))
    return found


def read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise local_error(
            ErrorReason.FILE_UNREADABLE, f"{path}: {err.strerror or err}", path
        ) from err


def check_readable(path: Path) -> None:
    try:
        with path.open("rb"):
            pass
    except OSError as err:
        raise local_error(
            ErrorReason.FILE_UNREADABLE, f"{path}: {err.strerror or err}", path
        ) from err


def write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as err:
        raise local_error(
            ErrorReason.OUTPUT_UNWRITABLE, f"{path}: {err.strerror or err}", path
        ) from err


def error_line(err: DocparseError) -> str:
    return f"error: {err.code.name} {err.reason or 'NO_REASON'}: {err.message}"
