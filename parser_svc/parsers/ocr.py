"""OCR of rendered pages.

Engines were chosen by measurement (bench/bench_ocr.py, table in bench/README.md): tesseract 5
(LSTM models from the Debian tesseract-ocr-* language packs, driven in-process through the
tesserocr binding, one thread) read every script of the generated ground truth with the lowest
error rates and at the highest pages/s, so it reads every page. RapidOCR (PP-OCRv4 Chinese and
English models shipped in its wheel) stays as the fallback where tesseract or its language data
is not installed.

Languages: a job may name BCP-47 language hints (`languages`); without them the script is found
once per document, on its first page read, cheaply (ocr_script.py: one script's model after the
other reads a piece of one text line, 20-150 ms, where tesseract's OSD on the page costs more
than reading it), and the page is read once, with that script's models. Later pages start with
the models the last page needed; a low mean confidence means another script: the cheap guess
again, then OSD on the whole page, and the page is read again. Engines are loaded once per
process and kept; the fork server loads every script's (warm_up), its children share them.
"""

from __future__ import annotations

import os
import threading
from functools import cache
from pathlib import Path
from typing import Any

from parser_svc.parsers.ocr_line import OcrLine
from parser_svc.parsers.ocr_script import guess_script

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

# Script named by tesseract's OSD → the models that read it when no hint was given. In the order
# guess_models tries them (the cheaper to rule out first; Latin first: the Chinese and Japanese
# models read Latin text confidently).
SCRIPT_MODELS: dict[str, tuple[str, ...]] = {
    "Latin": ("eng", "deu", "fra", "spa"),
    "Cyrillic": ("rus", "ukr", "eng"),
    "Arabic": ("ara",),
    "Han": ("chi_sim",),
    "Japanese": ("jpn",),
    "Katakana": ("jpn",),
    "Hiragana": ("jpn",),
    "Hangul": ("kor",),
}
# A page read with a mean word confidence below this is checked for another script.
MIN_CONFIDENCE = 70

_TESSDATA_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
)


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
            from parser_svc.parsers.ocr_rapid import rapidocr_lines

            return rapidocr_lines(image, self.threads)
        if self.hinted:
            lines, _confidence = _tesseract(image, self.hinted)
            return lines
        return _other_scripts(image, self._read(image), self.last)

    def _read(self, image: Any) -> list[OcrLine]:
        latin = _available(SCRIPT_MODELS["Latin"])
        # The document's script is found once (ocr_script.py), on its first page; later pages
        # start with the models the last page needed.
        guessed = not self.last
        first = self.last or guess_models(image) or latin
        lines, confidence = _tesseract(image, first)
        if first != latin and lines and _latin_share(lines) > 0.5:
            # A Latin page after a page of another script: that script's models (which carry
            # English too) read it confidently but put look-alike letters into accented words
            # ("ргодиссібп" for "producción"). Latin models read it as well as they can.
            again, again_confidence = _tesseract(image, latin)
            if again_confidence >= confidence:
                first, lines, confidence = latin, again, again_confidence
        if confidence >= MIN_CONFIDENCE or not lines:
            self.last = first
            return lines
        # Read badly: another script than the one tried. The cheap guess first (unless this
        # page's models came from it), then OSD on the whole page.
        models = () if guessed else guess_models(image)
        if not models or models == first:
            script = detect_script(image)
            models = _available(SCRIPT_MODELS[script]) if script in SCRIPT_MODELS else ()
        if not models or models == first:
            return lines
        again, again_confidence = _tesseract(image, models)
        if again_confidence > confidence:
            self.last = models
            return again
        return lines


def guess_models(image: Any) -> tuple[str, ...]:
    """The models of the script a piece of the page's middle line reads best in (Latin first;
    ocr_script.py), or () when none reads it confidently."""
    installed = installed_models()
    sets: dict[str, tuple[str, ...]] = {}  # script -> its installed models
    candidates: dict[tuple[str, ...], str] = {}  # models to try -> script, in order
    for script, models in SCRIPT_MODELS.items():
        found = tuple(m for m in models if m in installed)
        if found and found[0] == models[0] and found not in sets.values():
            sets[script] = found
            candidates.setdefault(found[:1], script)  # a line is read with the first alone
    tried = [(s, m) for m, s in candidates.items()]
    script = guess_script(image, tried, _tesseract_line, sets)
    return sets.get(script, ())


def _latin_share(lines: list[OcrLine]) -> float:
    """The share of the letters read that are Latin (ASCII to Latin Extended-B, U+024F)."""
    letters = [c for line in lines for c in line.text if c.isalpha()]
    return sum(c <= "\u024f" for c in letters) / len(letters) if letters else 0.0


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


def _available(models: tuple[str, ...]) -> tuple[str, ...]:
    installed = installed_models()
    return tuple(m for m in models if m in installed) or (("eng",) if "eng" in installed else ())


# Loaded tesseract engines by slot, then by model names ("eng+deu+fra+spa", "osd"). An engine
# reads one image at a time, so each thread that reads pages at the same time as another uses
# its own slot (`use_slot`; pdf_ocr.py). Slot 0 holds what `warm_up` loaded: the fork server's
# children share those pages copy-on-write.
_engines: dict[int, dict[str, Any]] = {0: {}}
_slot = threading.local()


def use_slot(slot: int) -> None:
    """This thread reads with the engines of `slot` from now on (threads start on slot 0)."""
    _slot.number = slot


def _slot_apis() -> dict[str, Any]:
    return _engines.setdefault(getattr(_slot, "number", 0), {})


def _api(lang: str) -> Any:
    apis = _slot_apis()
    api = apis.get(lang)
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
        apis[lang] = api
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
    apis = _slot_apis()
    if wanted in apis:
        return wanted
    for name in apis:
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


def preload_scripts(spec: str) -> tuple[str, ...]:
    """The scripts whose models the fork server loads before its first child, as the setting
    `ocr_preload` names them: "all" (every script of SCRIPT_MODELS), "none", or some of them
    separated by commas, in any case ("latin,cyrillic"). ValueError names an unknown one."""
    text = spec.strip().lower()
    if text == "all":
        return tuple(SCRIPT_MODELS)
    if text in ("none", ""):
        return ()
    known = {script.lower(): script for script in SCRIPT_MODELS}
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in known:
            raise ValueError(
                f"no script {name!r} to preload OCR models for: use all, none or some of "
                + ", ".join(s.lower() for s in SCRIPT_MODELS)
            )
    return tuple(dict.fromkeys(known[name] for name in names))


def warm_up(scripts: tuple[str, ...] | None = None) -> None:
    """Loads engines ahead of the first page: by default each script's models (SCRIPT_MODELS:
    the script of an unhinted page is found by reading a piece of a line with each, and the
    page is then read with one of them), as sets and one by one; ~2 s and ~215 MB once, in the
    fork server, shared copy-on-write by its children, instead of 0.1-0.7 s in every job that
    needs them. `scripts` (preload_scripts) limits it to those scripts' models."""
    installed = installed_models()
    if not installed:
        return
    chosen = SCRIPT_MODELS.values() if scripts is None else [SCRIPT_MODELS[s] for s in scripts]
    sets = [tuple(m for m in models if m in installed) for models in chosen]
    # Each set, and each of its models alone: guess_models reads a line with a set's first
    # model, a hinted job reads with its languages' models only.
    for lang in dict.fromkeys(name for s in sets if s for name in ("+".join(s), *s)):
        _api(lang)
