"""OCR of rendered pages with RapidOCR (PP-OCRv4 models for Chinese and English, shipped inside
the rapidocr-onnxruntime wheel: nothing is downloaded at run time). Loaded on first use only,
so documents that need no OCR never pay for it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from parser_svc.parsers import ParseFailure

_engine: Any = None


@dataclass(frozen=True)
class OcrLine:
    text: str
    # Corners in the pixel space of the image given to `recognise`.
    x0: float
    y0: float
    x1: float
    y1: float
    confidence: float


def _get_engine(threads: int) -> Any:
    global _engine
    if _engine is None:
        logging.getLogger("RapidOCR").setLevel(logging.WARNING)
        try:
            from rapidocr_onnxruntime import RapidOCR  # type: ignore[import-untyped]
        except ImportError as err:  # pragma: no cover - a broken install
            raise ParseFailure(
                "UNSUPPORTED_FORMAT",
                f"this page needs OCR but the OCR engine (rapidocr-onnxruntime) is unavailable: "
                f"{err}",
            ) from err
        _no_spinning()
        kwargs: dict[str, Any] = {}
        if threads > 0:
            for part in ("det", "cls", "rec"):
                kwargs[f"{part}_intra_op_num_threads"] = threads
        _engine = RapidOCR(**kwargs)
    return _engine


def _no_spinning() -> None:
    """onnxruntime's worker threads spin while idle by default: with two parse children doing
    OCR on two cores they steal each other's CPU (a page took 5-10x longer). Turn it off."""
    from rapidocr_onnxruntime.utils import infer_engine  # type: ignore[import-untyped]

    make = infer_engine.OrtInferSession._init_sess_opts

    def init_sess_opts(config: dict[str, Any]) -> Any:
        options = make(config)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        return options

    infer_engine.OrtInferSession._init_sess_opts = staticmethod(init_sess_opts)


def recognise(image: Any, threads: int = 0) -> list[OcrLine]:
    """Text lines found in `image` (a HxWx3 uint8 RGB numpy array), top to bottom."""
    result, _elapsed = _get_engine(threads)(image)
    lines = []
    for box, text, score in result or []:
        xs = [float(p[0]) for p in box]
        ys = [float(p[1]) for p in box]
        if str(text).strip():
            lines.append(
                OcrLine(str(text).strip(), min(xs), min(ys), max(xs), max(ys), float(score))
            )
    return lines
