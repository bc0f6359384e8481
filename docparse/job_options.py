"""The SDK's spelling of SubmitJob's per-job parse options: `images` and `ocr_mode` by name
("none", "referenced", "all"; "auto", "force", "off") or as the proto enum's value, as
docparse.operations' submit and parse take them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from docparse.v1 import job_pb2

# A mode by name ("" = the server's default) or as the proto enum's value.
Mode: TypeAlias = str | int

IMAGE_MODES = {
    "none": job_pb2.IMAGE_MODE_NONE,
    "referenced": job_pb2.IMAGE_MODE_REFERENCED,
    "all": job_pb2.IMAGE_MODE_ALL,
}
OCR_MODES = {
    "auto": job_pb2.OCR_MODE_AUTO,
    "force": job_pb2.OCR_MODE_FORCE,
    "off": job_pb2.OCR_MODE_OFF,
}


def _mode(value: Mode, name: str, modes: Mapping[str, int]) -> int:
    if isinstance(value, int):
        return value
    if not value:
        return 0
    if value.lower() not in modes:
        raise ValueError(f"{name} must be one of {', '.join(modes)}, not {value!r}")
    return modes[value.lower()]


def image_mode(value: Mode) -> job_pb2.ImageMode.ValueType:
    return job_pb2.ImageMode.ValueType(_mode(value, "images", IMAGE_MODES))


def ocr_mode(value: Mode) -> job_pb2.OcrMode.ValueType:
    return job_pb2.OcrMode.ValueType(_mode(value, "ocr_mode", OCR_MODES))
