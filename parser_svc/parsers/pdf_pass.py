"""A PDF page's text page and its rules for table detection, from one run of the page.

With the native module (parser_svc/parsers/native, compiled at setup for the installed mupdf)
the page is interpreted once: mupdf's stext device builds the text page while the page's paths are
walked for the "l" and "re" items `page.get_cdrawings()` would list. Without it (no compiler,
another mupdf), the text page comes from `page.get_textpage()` and the rules from
`page.get_cdrawings()` when asked for: two runs, same output
(tests/parser_svc/parsers/test_pdf_pass.py).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from types import ModuleType
from typing import Any, NamedTuple

import pymupdf
from pymupdf import mupdf

# ("l", ax, ay, bx, by) or ("re", x0, y0, x1, y1), the ones that can be table rules; and how many
# items of every kind the page's drawings have (curves and quads count toward table
# detection's cut-off).
Rule = tuple[str, float, float, float, float]
Rules = tuple[list[Rule], int]

# What can be a table rule (parsers/pdf_tables.py): a line or rectangle at least RULE_MIN_LENGTH
# long and at most RULE_THIN_LINE (a line) or RULE_THIN_RECT (a rectangle) across, or a
# rectangle at least RULE_MIN_LENGTH both ways (a cell's box).
RULE_MIN_LENGTH = 8.0
RULE_THIN_LINE = 1.0
RULE_THIN_RECT = 3.0
# The native module's call signature this file uses (its API constant).
NATIVE_API = 4

log = logging.getLogger(__name__)


def _load() -> ModuleType | None:
    try:
        from parser_svc.parsers.native import _pdf_pass  # type: ignore[attr-defined]
    except ImportError:
        return None
    if getattr(_pdf_pass, "API", 1) != NATIVE_API:
        log.warning(
            "parser_svc.parsers.native is older than this parser (API %s, not %s): PDF pages are "
            "read twice until `python -m parser_svc.parsers.native.build` rebuilds it",
            getattr(_pdf_pass, "API", 1),
            NATIVE_API,
        )
        return None
    if pymupdf.mupdf_version != _pdf_pass.MUPDF_VERSION:
        log.warning(
            "parser_svc.parsers.native was built for mupdf %s, pymupdf has %s: PDF pages are read "
            "twice until `python -m parser_svc.parsers.native.build` rebuilds it",
            _pdf_pass.MUPDF_VERSION,
            pymupdf.mupdf_version,
        )
        return None
    module: ModuleType = _pdf_pass
    return module


_native = _load()


def native_module() -> ModuleType | None:
    """The native module, when it is loaded and fits this mupdf."""
    return _native


def native() -> bool:
    """Whether pages are read once (the native module is loaded and fits this mupdf)."""
    return _native is not None


class PageRun(NamedTuple):
    textpage: Any  # a pymupdf.TextPage, as page.get_textpage() makes it
    rules: Rules | None  # None: not read in this run (`rules_of(page.get_cdrawings())`)
    images: int | None  # images the page draws; None: not counted
    image_page: Any  # None, or a TextPage with the images page.get_image_info() reads


class PageBox(NamedTuple):
    width: float  # page.rect.width
    height: float  # page.rect.height
    rotation: int  # page.rotation


def page_box(page: pymupdf.Page) -> PageBox:
    """The page's size and rotation as `page.rect` and `page.rotation` give them: from the native
    module in one call (those two properties cost ~11 us each in pymupdf's Python), from pymupdf
    where it has no answer (an infinite rectangle, an error: pymupdf's own fallback and
    exception)."""
    found = None
    if _native is not None:
        context = int(mupdf.internal_context_get().this)
        found = _native.page_box(context, _fz_page(page).m_internal_value())
    if found is None:
        rect = page.rect
        return PageBox(rect.width, rect.height, page.rotation)
    x0, y0, x1, y1, rotation = found
    return PageBox(max(0, x1 - x0), max(0, y1 - y0), rotation)


def text_and_rules(page: pymupdf.Page, rotation: int | None = None) -> PageRun:
    """The page's text page and, read in the same run, its rules, how many images it draws
    and a text page of those images: what the native module gives, or only the text page
    without it."""
    # A character's box is the quad mupdf computes from the font's metrics, never pymupdf's
    # "corrected" one (stretched to the font size where ascender minus descender is below 1 em:
    # TeX fonts, many embedded subsets). The switch is process-wide: pymupdf corrects by
    # default, importing pymupdf4llm (which a plain `import pymupdf` does in pymupdf 2) stops
    # it, and the parse child skips that import (parsers/__init__.py); so the same document's
    # boxes depended on what the process had imported first. Set for every page, they do not.
    # It is also the cheaper path (bench/README.md).
    pymupdf.TOOLS.unset_quad_corrections(True)
    if _native is None:
        return PageRun(page.get_textpage(), None, None, None)
    fz_page = _fz_page(page)
    if rotation is None:  # `page.rotation`, unless the caller has it (page_box)
        rotation = page.rotation
    if rotation:  # as get_textpage and get_cdrawings do: the unrotated page
        page.set_rotation(0)
    try:
        bounds = mupdf.fz_bound_page(fz_page)
        stext, images_stext = mupdf.FzStextPage(bounds), mupdf.FzStextPage(bounds)
        context = int(mupdf.internal_context_get().this)
        rules, items, images, complete = _native.text_and_rules(
            context,
            fz_page.m_internal_value(),
            stext.m_internal_value(),
            0,
            images_stext.m_internal_value(),
            (RULE_MIN_LENGTH, RULE_THIN_LINE, RULE_THIN_RECT),
        )
    finally:
        if rotation:
            page.set_rotation(rotation)
    return PageRun(
        _text_page(stext, page),
        (rules, items),
        images,
        _text_page(images_stext, page) if images and complete else None,
    )


def _fz_page(page: pymupdf.Page) -> Any:
    return page.this if isinstance(page.this, mupdf.FzPage) else mupdf.FzPage(page.this)


def _text_page(stext: Any, page: pymupdf.Page) -> Any:
    textpage = pymupdf.TextPage(stext)
    textpage.parent = weakref.proxy(page)  # as page.get_textpage() links it
    return textpage


def image_info(page: pymupdf.Page, image_page: Any) -> list[dict[str, Any]]:
    """`page.get_image_info(hashes=True)` without "number" (the image's block index among the
    text blocks, which the run's image text page does not hold): from that page when there is
    one (what get_image_info does, without its own run of the page), else from pymupdf."""
    if image_page is None:
        found: list[dict[str, Any]] = page.get_image_info(hashes=True)
    else:
        found = image_page.extractIMGINFO(hashes=True)
    return [{k: v for k, v in info.items() if k != "number"} for info in found]


def is_rule_candidate(rule: Rule) -> bool:
    """Whether an "l" or "re" item can be a table rule (the native module's is_rule_candidate
    is the same test)."""
    kind, ax, ay, bx, by = rule
    dx, dy = abs(ax - bx), abs(ay - by)
    thin = RULE_THIN_LINE if kind == "l" else RULE_THIN_RECT
    if (dy <= thin and dx >= RULE_MIN_LENGTH) or (dx <= thin and dy >= RULE_MIN_LENGTH):
        return True
    return kind == "re" and dx >= RULE_MIN_LENGTH and dy >= RULE_MIN_LENGTH


def rules_of(drawings: Iterable[dict[str, Any]]) -> Rules:
    """The same from `page.get_cdrawings()`'s drawings (the two-run path)."""
    rules: list[Rule] = []
    items = 0
    for drawing in drawings:
        for item in drawing.get("items", ()):
            items += 1
            rule: Rule
            if item[0] == "l":
                (ax, ay), (bx, by) = item[1], item[2]
                rule = ("l", ax, ay, bx, by)
            elif item[0] == "re":
                x0, y0, x1, y1 = item[1]
                rule = ("re", x0, y0, x1, y1)
            else:
                continue
            if is_rule_candidate(rule):
                rules.append(rule)
    return rules, items
