"""Conversion between the Redis job record (a flat string hash) and the `docparse.v1.Job`
message. The same function reads a snapshot (HGETALL) and a published event (JSON)."""

from __future__ import annotations

from collections.abc import Mapping

from docparse.v1 import job_pb2
from parser_svc.parsers import (
    IMAGES_ALL,
    IMAGES_NONE,
    IMAGES_REFERENCED,
    OCR_AUTO,
    OCR_FORCE,
    OCR_OFF,
)

TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})

_STATES = {
    "QUEUED": job_pb2.STATE_QUEUED,
    "RUNNING": job_pb2.STATE_RUNNING,
    "SUCCEEDED": job_pb2.STATE_SUCCEEDED,
    "FAILED": job_pb2.STATE_FAILED,
    "CANCELLED": job_pb2.STATE_CANCELLED,
}
_STORAGE = {
    "inline": job_pb2.RESULT_STORAGE_INLINE,
    "blob": job_pb2.RESULT_STORAGE_BLOB,
}


# The job's options as the record keeps them (ParseOptions' names) and as a Job says them.
IMAGE_MODES = {
    IMAGES_NONE: job_pb2.IMAGE_MODE_NONE,
    IMAGES_REFERENCED: job_pb2.IMAGE_MODE_REFERENCED,
    IMAGES_ALL: job_pb2.IMAGE_MODE_ALL,
}
OCR_MODES = {
    OCR_AUTO: job_pb2.OCR_MODE_AUTO,
    OCR_FORCE: job_pb2.OCR_MODE_FORCE,
    OCR_OFF: job_pb2.OCR_MODE_OFF,
}


def parse_overrides(job: job_pb2.Job) -> dict[str, object]:
    """What the job asked of its parse, as ParseOptions fields (the worker's overrides)."""
    overrides: dict[str, object] = {"languages": list(job.languages), "pages": job.pages}
    images = {mode: name for name, mode in IMAGE_MODES.items()}.get(job.images)
    ocr_mode = {mode: name for name, mode in OCR_MODES.items()}.get(job.ocr_mode)
    if images:
        overrides["images"] = images
    if ocr_mode:
        overrides["ocr_mode"] = ocr_mode
    if job.ocr_dpi:
        overrides["ocr_dpi"] = job.ocr_dpi
    if job.max_pages:
        overrides["max_pages"] = job.max_pages
    return overrides


def decode_hash(raw: Mapping[bytes, bytes]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in raw.items()}


def is_terminal(job: job_pb2.Job) -> bool:
    return job.state in (
        job_pb2.STATE_SUCCEEDED,
        job_pb2.STATE_FAILED,
        job_pb2.STATE_CANCELLED,
    )


def record_to_job(rec: Mapping[str, str]) -> job_pb2.Job:
    def num(name: str) -> int:
        return int(rec.get(name) or 0)

    job = job_pb2.Job(
        job_id=rec.get("job_id", ""),
        state=_STATES.get(rec.get("state", ""), job_pb2.STATE_UNSPECIFIED),
        version=num("version"),
        progress=job_pb2.Progress(
            done=num("done"),
            total=num("total"),
            stage=rec.get("stage", ""),
            ready_pages=rec.get("ready", ""),
        ),
        attempt=num("attempt"),
        batch_id=rec.get("batch_id", ""),
        file_name=rec.get("file_name", ""),
        content_sha256=rec.get("content_sha256", ""),
        content_type=rec.get("content_type", ""),
        size_bytes=num("size_bytes"),
        languages=[tag for tag in rec.get("languages", "").split(",") if tag],
        pages=rec.get("pages", ""),
        images=IMAGE_MODES.get(rec.get("images", ""), job_pb2.IMAGE_MODE_UNSPECIFIED),
        ocr_mode=OCR_MODES.get(rec.get("ocr_mode", ""), job_pb2.OCR_MODE_UNSPECIFIED),
        ocr_dpi=num("ocr_dpi"),
        max_pages=num("max_pages"),
    )
    job.create_time.FromMilliseconds(num("create_ms"))
    job.update_time.FromMilliseconds(num("update_ms"))
    job.expire_time.FromMilliseconds(num("expire_ms"))
    if rec.get("err_reason"):
        job.error.reason = rec["err_reason"]
        job.error.message = rec.get("err_message", "")
    if rec.get("res_sha256"):
        job.result.CopyFrom(
            job_pb2.ResultRef(
                size_bytes=num("res_size"),
                sha256=rec["res_sha256"],
                storage=_STORAGE.get(
                    rec.get("res_storage", ""), job_pb2.RESULT_STORAGE_UNSPECIFIED
                ),
                blob_key=rec.get("res_blob_key", ""),
                content_type=rec.get("res_content_type", ""),
                page_count=num("res_pages"),
                char_count=num("res_chars"),
            )
        )
    return job
