"""A PDF page's fonts and images as pymupdf lists them, scanned once per /Resources object.

`page.get_fonts()` and `page.get_images()` walk the page's resources (recursing into form
XObjects) on every call. Pages that share one indirect /Resources object (most documents give
every page the same one) have the same lists, so a document keeps each list by that object's
xref. Only while mupdf has warned nothing in this document: a scan may warn (circular
resources), and the package's repair warning counts mupdf's warnings, which a skipped scan
would not repeat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pymupdf
from pymupdf import mupdf


def resources_xref(page: Any) -> int:
    """The xref of the page's /Resources (inherited from the page tree, as pymupdf's scan
    finds it), or 0 when it is a direct dictionary, missing, or cannot be read (only a cache
    key: without one the page is scanned as before)."""
    try:
        this = page.this
        pdf_page = this if isinstance(this, mupdf.PdfPage) else mupdf.pdf_page_from_fz_page(this)
        resources = mupdf.pdf_dict_get_inheritable(pdf_page.obj(), mupdf.PDF_ENUM_NAME_Resources)
        if not resources.m_internal or not mupdf.pdf_is_indirect(resources):
            return 0
        return int(mupdf.pdf_to_num(resources))
    except Exception:
        return 0


def _mupdf_quiet() -> bool:
    """No mupdf warning since the parse reset them (pdf.parse_pdf). Then none is pending as a
    repeat either: a repeat is counted only after a first warning reached the store."""
    store = getattr(pymupdf, "JM_mupdf_warnings_store", None)
    return isinstance(store, list) and not store


@dataclass
class ResourceScans:
    """One document's scans, by resources xref."""

    fonts_by: dict[int, list[Any]] = field(default_factory=dict)
    images_by: dict[int, list[Any]] = field(default_factory=dict)

    def fonts(self, page: pymupdf.Page) -> list[Any]:
        """`page.get_fonts(full=True)`."""
        return _scan(self.fonts_by, page, lambda: page.get_fonts(full=True))

    def images(self, page: pymupdf.Page) -> list[Any]:
        """`page.get_images()`."""
        return _scan(self.images_by, page, page.get_images)


def _scan(cache: dict[int, list[Any]], page: pymupdf.Page, scan: Callable[[], Any]) -> list[Any]:
    key = resources_xref(page)
    if key in cache:
        return cache[key]
    found: list[Any] = list(scan())
    if key and _mupdf_quiet():
        cache[key] = found
    return found
