"""POST /v1/jobs's per-job parse options (`pages`, `images`, `ocr_mode`, `ocr_dpi`), from the
URL or a form field, as SubmitJobRequest fields. The strings are checked here only as far as
HTTP spells them (a mode's name, a number); the replica checks the rest (a page list's syntax,
the DPI's range) and its answer travels back as is."""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from docparse.job_options import IMAGE_MODES, OCR_MODES
from docparse.reasons import ErrorReason
from docparse_server.errors import error
from gateway.http.errors import echo, parse_uint


def _mode(raw: str, name: str, modes: Mapping[str, int]) -> int:
    if not raw:
        return 0
    if raw.lower() not in modes:
        raise error(
            ErrorReason.MALFORMED_REQUEST,
            f"{name} must be one of {', '.join(modes)}: {echo(raw)}",
            {"parameter": name},
        )
    return modes[raw.lower()]


def job_options(request: web.Request, fields: dict[str, str]) -> dict[str, object]:
    """The SubmitJobRequest fields the URL or the form set (a field absent: the default)."""

    def get(name: str) -> str:
        raw = request.query.get(name, fields.get(name, ""))
        return raw.encode("utf-8", "replace").decode("utf-8").strip()

    dpi = get("ocr_dpi")
    return {
        "pages": get("pages"),
        "images": _mode(get("images"), "images", IMAGE_MODES),
        "ocr_mode": _mode(get("ocr_mode"), "ocr_mode", OCR_MODES),
        "ocr_dpi": parse_uint(dpi, "ocr_dpi", ErrorReason.INVALID_OCR_DPI, 10_000) if dpi else 0,
    }
