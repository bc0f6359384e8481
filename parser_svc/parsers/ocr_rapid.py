"""RapidOCR (PP-OCRv4 Chinese and English models shipped in its wheel): the fallback where
tesseract or its language data is not installed (ocr.py says why tesseract reads every page
where it is), and a candidate in bench/bench_ocr.py."""

from __future__ import annotations

import logging
from typing import Any

from docparse.reasons import ErrorReason
from parser_svc.parsers import ParseFailure
from parser_svc.parsers.ocr_line import OcrLine

_engine: Any = None


def rapidocr_lines(image: Any, threads: int = 0) -> list[OcrLine]:
    """Text lines of `image` (HxW grey or HxWx3 RGB uint8), top to bottom."""
    import numpy as np

    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    bgr = np.ascontiguousarray(image[:, :, ::-1])
    result, _elapsed = _get_engine(threads)(bgr)
    lines = []
    for box, text, score in result or []:
        xs = [float(p[0]) for p in box]
        ys = [float(p[1]) for p in box]
        if str(text).strip():
            lines.append(
                OcrLine(str(text).strip(), min(xs), min(ys), max(xs), max(ys), float(score))
            )
    return lines


def _get_engine(threads: int) -> Any:
    global _engine
    if _engine is None:
        logging.getLogger("RapidOCR").setLevel(logging.WARNING)
        try:
            from rapidocr_onnxruntime import RapidOCR  # type: ignore[import-untyped]
        except ImportError as err:  # pragma: no cover - a broken install
            raise ParseFailure(
                ErrorReason.UNSUPPORTED_FORMAT,
                f"this page needs OCR but no OCR engine is installed (tesseract-ocr with "
                f"language packs, or rapidocr-onnxruntime): {err}",
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
