"""OCR of rendered pages.

Engines were chosen by measurement (bench/bench_ocr.py, table in bench/README.md): tesseract 5
(LSTM models from the Debian tesseract-ocr-* language packs, driven in-process through the
tesserocr binding, one thread) read every script of the generated ground truth with the lowest
error rates and at the highest pages/s, so it reads every page. RapidOCR (PP-OCRv4 Chinese and
English models shipped in its wheel) stays as the fallback where tesseract or its language data
is not installed.

Languages: a job may name BCP-47 language hints (`languages`); without them the page's script is
detected. A page is first read with the language the previous page of the same document used
(Latin languages for the first page); a low mean confidence means another script, which
tesseract's script detection (OSD) then names, and the page is read again with that script's
languages. Engines are loaded once per process and kept (a warm parse child keeps them).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from parser_svc.parsers import ParseFailure

_engine: Any = None

# BCP-47 primary language (or language-script) → tesseract model name.
BCP47_TO_TESSERACT: dict[str, str] = {
    "en": "eng",
    "de": "deu",
    "fr": "fra",
    "es": "spa",
    "it": "ita",
    "pt": "por",
    "nl": "nld",
    "pl": "pol",
    "ru": "rus",
    "uk": "ukr",
    "zh-hans": "chi_sim",
    "zh-hant": "chi_tra",
    "ja": "jpn",
    "ko": "kor",
    "ar": "ara",
}
# Regions written in Traditional characters when a `zh` tag names no script.
_TRADITIONAL_REGIONS = frozenset({"tw", "hk", "mo"})

# Script named by tesseract's OSD → the models that read it when no hint was given.
SCRIPT_MODELS: dict[str, tuple[str, ...]] = {
    "Latin": ("eng", "deu", "fra", "spa"),
    "Cyrillic": ("rus", "ukr", "eng"),
    "Han": ("chi_sim",),
    "Japanese": ("jpn",),
    "Katakana": ("jpn",),
    "Hiragana": ("jpn",),
    "Hangul": ("kor",),
    "Arabic": ("ara",),
}
# A page read with a mean word confidence below this is checked for another script.
MIN_CONFIDENCE = 70

_TESSDATA_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
)


@dataclass(frozen=True)
class OcrLine:
    text: str
    # Corners in the pixel space of the image given to `recognise`.
    x0: float
    y0: float
    x1: float
    y1: float
    confidence: float


@cache
def tessdata_dir() -> Path | None:
    """The folder of tesseract's language models (TESSDATA_PREFIX wins), or None."""
    candidates = [os.environ.get("TESSDATA_PREFIX", ""), *_TESSDATA_DIRS]
    for folder in candidates:
        if folder and (Path(folder) / "eng.traineddata").is_file():
            return Path(folder)
    return None


@cache
def installed_models() -> frozenset[str]:
    folder = tessdata_dir()
    if folder is None:
        return frozenset()
    return frozenset(p.name.removesuffix(".traineddata") for p in folder.glob("*.traineddata"))


def installed_languages() -> list[str]:
    """The BCP-47 tags a job may name, sorted."""
    models = installed_models()
    return sorted(tag for tag, model in BCP47_TO_TESSERACT.items() if model in models)


def model_for(tag: str) -> str | None:
    """The tesseract model for a BCP-47 tag (`de-AT`, `zh-Hant-TW`, `ZH_tw`), or None."""
    parts = tag.strip().replace("_", "-").lower().split("-")
    if not parts or not parts[0]:
        return None
    if parts[0] == "zh":
        rest = parts[1:]
        if "hant" in rest or any(p in _TRADITIONAL_REGIONS for p in rest):
            return BCP47_TO_TESSERACT["zh-hant"]
        return BCP47_TO_TESSERACT["zh-hans"]
    return BCP47_TO_TESSERACT.get(parts[0])


def check_languages(tags: list[str]) -> list[str]:
    """The hints as given if every one is installed; otherwise ValueError naming the installed
    ones (the API answers INVALID_ARGUMENT with that text)."""
    models = installed_models()
    bad = [tag for tag in tags if (model_for(tag) or "") not in models]
    if bad:
        installed = ", ".join(installed_languages()) or "none"
        raise ValueError(
            f"OCR language{'s' if len(bad) > 1 else ''} {', '.join(repr(t) for t in bad)} "
            f"{'are' if len(bad) > 1 else 'is'} not installed; installed: {installed}"
        )
    return list(tags)


class PageReader:
    """Reads the pages of one document: remembers the models the last page needed."""

    def __init__(self, languages: list[str] | tuple[str, ...] = (), threads: int = 0) -> None:
        models = [m for m in (model_for(t) for t in languages) if m]
        self.hinted = tuple(dict.fromkeys(models))
        self.threads = threads
        self.last: tuple[str, ...] = ()

    def read(self, image: Any) -> list[OcrLine]:
        """Text lines found in `image` (HxW grey or HxWx3 RGB uint8 numpy array)."""
        if not installed_models():
            return _rapidocr(image, self.threads)
        if self.hinted:
            lines, _confidence = _tesseract(image, self.hinted)
            return lines
        return _other_scripts(image, self._read(image), self.last)

    def _read(self, image: Any) -> list[OcrLine]:
        first = self.last or _available(SCRIPT_MODELS["Latin"])
        lines, confidence = _tesseract(image, first)
        if confidence >= MIN_CONFIDENCE or not lines:
            self.last = first
            return lines
        script = detect_script(image)
        models = _available(SCRIPT_MODELS.get(script, ()))
        if not models or models == first:
            return lines
        again, again_confidence = _tesseract(image, models)
        if again_confidence > confidence:
            self.last = models
            return again
        return lines


# A line read with less confidence than this may be in another script than the page's.
LINE_MIN_CONFIDENCE = 0.7
# Lines of a page tried in other scripts at most (noise and drawings also read badly).
MAX_LINES_RETRIED = 8


def _other_scripts(image: Any, lines: list[OcrLine], used: tuple[str, ...]) -> list[OcrLine]:
    """Lines the page's models read badly, read again by each other installed script's models
    (a Chinese line on an English page); the most confident reading wins."""
    weak = [i for i, line in enumerate(lines) if line.confidence < LINE_MIN_CONFIDENCE]
    if not weak or len(weak) > MAX_LINES_RETRIED:
        return lines
    others = {
        models
        for models in (_available(m) for m in SCRIPT_MODELS.values())
        if models and models != used and set(models) <= installed_models()
    }
    out = list(lines)
    height, width = image.shape[:2]
    for i in weak:
        line = lines[i]
        pad = max(4, int((line.y1 - line.y0) * 0.3))
        y0, y1 = max(0, int(line.y0) - pad), min(height, int(line.y1) + pad)
        x0, x1 = max(0, int(line.x0) - pad), min(width, int(line.x1) + pad)
        crop = image[y0:y1, x0:x1]
        best = line
        for models in sorted(others):
            text, confidence = _tesseract_line(crop, models)
            if text and confidence > best.confidence + 0.1:
                best = OcrLine(text, line.x0, line.y0, line.x1, line.y1, confidence)
        out[i] = best
    return out


def recognise(image: Any, threads: int = 0, languages: tuple[str, ...] = ()) -> list[OcrLine]:
    """Text lines found in `image`, top to bottom (one page, no memory of earlier pages)."""
    return PageReader(languages, threads).read(image)


def _available(models: tuple[str, ...]) -> tuple[str, ...]:
    installed = installed_models()
    return tuple(m for m in models if m in installed) or (("eng",) if "eng" in installed else ())


_apis: dict[str, Any] = {}


def _api(lang: str) -> Any:
    api = _apis.get(lang)
    if api is None:
        import tesserocr  # type: ignore[import-untyped]

        if lang == "osd":
            api = tesserocr.PyTessBaseAPI(
                path=str(tessdata_dir()),
                lang="osd",
                psm=tesserocr.PSM.OSD_ONLY,
                oem=tesserocr.OEM.TESSERACT_ONLY,
            )
        else:
            api = tesserocr.PyTessBaseAPI(
                path=str(tessdata_dir()), lang=lang, psm=tesserocr.PSM.AUTO
            )
        _apis[lang] = api
    return api


def _set_image(api: Any, image: Any) -> None:
    import numpy as np

    pixels = np.ascontiguousarray(image)
    height, width = pixels.shape[:2]
    depth = 1 if pixels.ndim == 2 else pixels.shape[2]
    api.SetImageBytes(pixels.tobytes(), width, height, depth, width * depth)


def detect_script(image: Any) -> str:
    """The script tesseract's OSD sees on the page ("Latin", "Cyrillic", "Han", ...), or ""."""
    if "osd" not in installed_models():
        return ""
    api = _api("osd")
    _set_image(api, image)
    try:
        found = api.DetectOrientationScript()
    except RuntimeError:
        return ""
    return str(found.get("script_name") or "") if found else ""


def _loaded(models: tuple[str, ...]) -> str:
    """The name of a loaded engine that reads `models`: the exact one, or one loaded with more
    models (a Latin set already loaded reads a `de` hint at once instead of loading deu, ~0.2 s;
    it is what a preloading fork server would hand its children)."""
    wanted = "+".join(models)
    if wanted in _apis:
        return wanted
    for name in _apis:
        if name != "osd" and set(models) <= set(name.split("+")):
            return name
    return wanted


def _tesseract(
    image: Any, models: tuple[str, ...], exact: bool = False
) -> tuple[list[OcrLine], float]:
    """Lines and mean confidence; `exact`: with exactly these models (the benchmark's raw
    engine), not a loaded superset."""
    import tesserocr

    api = _api("+".join(models) if exact else _loaded(models))
    _set_image(api, image)
    api.Recognize()
    # Line texts from the page text (the iterator's per-line text is in visual order for
    # right-to-left scripts), boxes and confidences from the line iterator: same lines, same
    # order. Should they ever differ, the page is one block.
    texts = [t.strip() for t in (api.GetUTF8Text() or "").splitlines() if t.strip()]
    boxes: list[tuple[tuple[int, int, int, int], float]] = []
    level = tesserocr.RIL.TEXTLINE
    iterator = api.GetIterator()
    if iterator is not None:
        for item in tesserocr.iterate_level(iterator, level):
            box = item.BoundingBox(level)
            if box and (item.GetUTF8Text(level) or "").strip():
                boxes.append((box, item.Confidence(level) / 100))
    confidence = float(api.MeanTextConf())
    if len(boxes) == len(texts):
        lines = [
            OcrLine(text, x0, y0, x1, y1, conf)
            for text, ((x0, y0, x1, y1), conf) in zip(texts, boxes, strict=True)
        ]
    elif texts:
        xs0, ys0, xs1, ys1 = zip(*(b for b, _c in boxes), strict=True) if boxes else ((0,),) * 4
        lines = [
            OcrLine("\n".join(texts), min(xs0), min(ys0), max(xs1), max(ys1), confidence / 100)
        ]
    else:
        lines = []
    return lines, confidence


def _tesseract_line(image: Any, models: tuple[str, ...]) -> tuple[str, float]:
    import tesserocr

    api = _api("+".join(models))
    api.SetPageSegMode(tesserocr.PSM.SINGLE_LINE)
    try:
        _set_image(api, image)
        text = " ".join((api.GetUTF8Text() or "").split())
        return text, float(api.MeanTextConf()) / 100
    finally:
        api.SetPageSegMode(tesserocr.PSM.AUTO)


def warm_up(models: tuple[str, ...] = ("eng+deu+fra+spa",)) -> None:
    """Loads the Latin models (the common case) ahead of the first page."""
    if installed_models():
        for lang in models:
            if all(m in installed_models() for m in lang.split("+")):
                _api(lang)


# ---- RapidOCR: the fallback where tesseract is not installed --------------------------------


def _rapidocr(image: Any, threads: int) -> list[OcrLine]:
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
                "UNSUPPORTED_FORMAT",
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


def rapidocr_lines(image: Any, threads: int = 0) -> list[OcrLine]:
    """RapidOCR on its own (the benchmark compares it with tesseract)."""
    return _rapidocr(image, threads)
