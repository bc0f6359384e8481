"""A SubmitJob's per-job parse options (pages, images, ocr_mode, ocr_dpi): checked at submit,
kept in the job record (the names ParseOptions uses, parser_svc/state/records.py echoes them),
and part of the job's identity: the same bytes with other options are another job, and a
request_id reused with other options is REQUEST_ID_REUSED (submit.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.errors import error
from parser_svc.parsers import (
    IMAGES_REFERENCED,
    MAX_JOB_OCR_DPI,
    MIN_JOB_OCR_DPI,
    OCR_AUTO,
    page_ranges,
    pdf_page_count,
)
from parser_svc.state.caller_scope import current_caller
from parser_svc.state.records import IMAGE_MODES, OCR_MODES

# Formats whose package has pages a selection can name.
PAGED_FORMATS = frozenset({"pdf"})


@dataclass(frozen=True)
class JobOptions:
    """The checked options, normalised: two spellings of one request are one identity."""

    pages: str = ""
    images: str = IMAGES_REFERENCED
    ocr_mode: str = OCR_AUTO
    ocr_dpi: int = 0  # 0: the deployment's

    def fields(self) -> dict[str, str]:
        """The record fields (only what differs from the defaults)."""
        found = {
            "pages": self.pages,
            "images": self.images,
            "ocr_mode": self.ocr_mode,
            "ocr_dpi": str(self.ocr_dpi) if self.ocr_dpi else "",
        }
        return {name: value for name, value in found.items() if value}

    def identity(self) -> str:
        """What the options add to the dedupe identity and the request fingerprint: "" for
        the defaults (identities made before these options existed stay the same)."""
        if self == JobOptions():
            return ""
        return f"\0p={self.pages}\0i={self.images}\0o={self.ocr_mode}\0d={self.ocr_dpi}"

    def describe(self) -> str:
        return (
            f"pages {self.pages or 'all'!r}, images {self.images}, ocr_mode {self.ocr_mode}, "
            f"ocr_dpi {self.ocr_dpi or 'default'}"
        )


def of_job(job: job_pb2.Job) -> JobOptions:
    """The options a job was created with (its record's echo)."""
    images = {mode: name for name, mode in IMAGE_MODES.items()}.get(job.images)
    ocr_mode = {mode: name for name, mode in OCR_MODES.items()}.get(job.ocr_mode)
    return JobOptions(job.pages, images or IMAGES_REFERENCED, ocr_mode or OCR_AUTO, job.ocr_dpi)


def check_options(
    request: parser_service_pb2.SubmitJobRequest, content_type: str, deployment_dpi: int
) -> JobOptions:
    """The request's options, checked (INVALID_ARGUMENT with a reason; a page past the end
    where the count is read at submit: check_page_count) and normalised."""
    try:
        pages = page_ranges.normalised(request.pages)
    except page_ranges.PageRangeError as err:
        raise error(ErrorReason.INVALID_PAGE_RANGE, str(err)) from err
    if pages and content_type not in PAGED_FORMATS:
        raise error(
            ErrorReason.PAGE_RANGE_NOT_SUPPORTED,
            f"pages selects pages of a PDF; this upload is {content_type}: send it without pages",
        )
    images = {mode: name for name, mode in IMAGE_MODES.items()}.get(request.images)
    ocr_mode = {mode: name for name, mode in OCR_MODES.items()}.get(request.ocr_mode)
    dpi = request.ocr_dpi
    if dpi and not MIN_JOB_OCR_DPI <= dpi <= MAX_JOB_OCR_DPI:
        raise error(
            ErrorReason.INVALID_OCR_DPI,
            f"ocr_dpi is {dpi}; it must be {MIN_JOB_OCR_DPI} to {MAX_JOB_OCR_DPI} (0: the "
            f"deployment's, {deployment_dpi})",
        )
    options = JobOptions(
        pages=pages,
        images=images or IMAGES_REFERENCED,
        ocr_mode=ocr_mode or OCR_AUTO,
        ocr_dpi=0 if dpi == deployment_dpi else dpi,
    )
    check_page_count(options, request.content)
    return options


def check_page_count(options: JobOptions, content: bytes) -> None:
    """PAGE_RANGE_PAST_END (INVALID_ARGUMENT, the message and `page_count` naming the
    document's pages) when the selection names a page past the last of a PDF whose page count
    is read without opening it (parsers/pdf_page_count.py: an undamaged PDF, a few ms at most);
    for one it cannot read that way, the parse checks and the job ends FAILED with the same
    reason."""
    if not options.pages:
        return
    count = pdf_page_count.page_count(content)
    if count is None:
        return
    beyond = page_ranges.past_end(page_ranges.parse(options.pages), count)
    if beyond:
        raise error(
            ErrorReason.PAGE_RANGE_PAST_END,
            page_ranges.past_end_message(options.pages, beyond, count),
            {"page_count": str(count), "pages": options.pages},
        )


def page_cap(deployment_max_pages: int) -> int:
    """The caller's key's `max_pages` when it is below the deployment's: its jobs' records keep
    it (`max_pages`), the worker's parse is held to it and it is part of their identity; 0
    otherwise."""
    caller = current_caller.get()
    cap = caller.limits.max_pages if caller else 0
    return cap if 0 < cap < deployment_max_pages else 0
