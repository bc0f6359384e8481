"""Which image xref each image a PDF page shows is, decoding each image once per document.

`page.get_image_info(hashes=True, xrefs=True)` decodes every image the page shows to hash its
pixels, and every image in the page's resources to hash those, then names a shown image by the
xref whose hash is the same (of two alike, the later one in the page's image list). On a
document that shows its images page after page that is a decode per image per page.

Here the answer is the same, from fewer decodes: mupdf keeps one `fz_image` per image xref in
its store while it is in use (`pdf_load_image` returns the cached one), so an image the run of
the page showed and the image `pdf_load_image` gives for an xref of the page's list are the
same object when they are the same image, and their hashes are then the same by construction
(the same image decoded the same way, as `pymupdf.Pixmap(doc, xref)` decodes it). A shown image
that is no xref's object (an inline image, one in a form's resources, one the store dropped) is
decoded and hashed as pymupdf does. The hashes of xrefs are kept for the whole document, also
where the page's run made no image page (no native module): pymupdf's own scan then hashes the
shown images, and they are named from the same list.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

import pymupdf
from pymupdf import mupdf

from parser_svc.parsers.pdf_pass import image_info

# pymupdf's own "whole image" arguments to fz_get_pixmap_from_image (see Pixmap(doc, xref)).
_INFINITE = (pymupdf.FZ_MIN_INF_RECT,) * 2 + (pymupdf.FZ_MAX_INF_RECT,) * 2
_IMAGE_SUBTYPES = (
    mupdf.PDF_ENUM_NAME_Image,
    mupdf.PDF_ENUM_NAME_Alpha,
    mupdf.PDF_ENUM_NAME_Luminosity,
)


def image_digest(image: Any) -> bytes:
    """MD5 of the image decoded whole, as Pixmap(doc, xref).digest and extractIMGINFO hash."""
    pixmap, _w, _h = mupdf.fz_get_pixmap_from_image(
        image, mupdf.FzIrect(*_INFINITE), mupdf.FzMatrix(image.w(), 0, 0, image.h(), 0, 0)
    )
    return bytes(mupdf.fz_md5_pixmap2(pixmap))


def _xref_image(pdf: Any, xref: int) -> Any:
    """The xref's image as Pixmap(doc, xref) loads it, with the same errors."""
    if not 1 <= xref < mupdf.pdf_xref_len(pdf):
        raise ValueError(pymupdf.MSG_BAD_XREF)
    ref = mupdf.pdf_new_indirect(pdf, xref, 0)
    subtype = mupdf.pdf_dict_get(ref, mupdf.PDF_ENUM_NAME_Subtype)
    if not any(mupdf.pdf_name_eq(subtype, name) for name in _IMAGE_SUBTYPES):
        raise ValueError(pymupdf.MSG_IS_NO_IMAGE)
    return mupdf.pdf_load_image(pdf, ref)


class _Listed(NamedTuple):
    """The page's image list (`page.get_images()`) as the shown images are named by it."""

    xrefs: list[int]  # in list order
    images: dict[int, Any]  # xref -> its image (None: not loadable now, hashed before)
    xref_at: dict[int, int]  # fz_image address -> its xref (while held in `images`)
    # Decoded byte count -> the listed xrefs whose pixels may be that many bytes (`_lengths`),
    # and the xrefs of unknown size (not loadable now): a shown image is compared only with
    # those, each page's list measured once, not once per shown image.
    by_length: dict[int, set[int]]
    unsized: set[int]


def _listed(pdf: Any, listed: list[Any], digests: dict[int, bytes | None]) -> _Listed:
    """Each listed xref's image, loaded (not decoded): the first load of an xref raises what
    Pixmap(doc, xref) would; a later failure falls back to the hash kept from before."""
    known = _Listed([], {}, {}, {}, set())
    for item in listed:
        xref = item[0]
        known.xrefs.append(xref)
        if xref in known.images:
            continue
        image = None
        if xref not in digests:
            image = _xref_image(pdf, xref)
            digests[xref] = None  # loadable; hashed only if a tie has to be told
        else:
            with contextlib.suppress(Exception):
                image = _xref_image(pdf, xref)
        known.images[xref] = image
        if image is None:
            known.unsized.add(xref)
            continue
        known.xref_at[image.m_internal_value()] = xref
        for length in _lengths(image):
            known.by_length.setdefault(length, set()).add(xref)
    return known


def _lengths(image: Any) -> set[int]:
    """Every byte count the image's decoded pixels may have: two images can hash alike only if
    these meet (the hash is of the samples alone; n covers any component count and alpha)."""
    area = image.w() * image.h()
    return {area * n for n in range(1, max(8, image.n() + 2))}


def _digest_of(pdf: Any, xref: int, known: _Listed, digests: dict[int, bytes | None]) -> bytes:
    digest = digests.get(xref)
    if digest is None:
        image = known.images.get(xref)
        digest = digests[xref] = image_digest(
            image if image is not None else _xref_image(pdf, xref)
        )
    return digest


def _name(
    pdf: Any, image: Any, xref: int | None, known: _Listed, digests: dict[int, bytes | None]
) -> int:
    """The xref get_image_info(xrefs=True) names for a shown image (`xref`: the listed xref
    whose object it is, if any): the last listed xref whose decoded pixels hash the same.
    Only the listed images whose pixels could be as many bytes are decoded, and the shown
    one when one of them could be alike: images of other sizes never are."""
    alike = set(known.unsized)  # no size known: it may be alike
    for length in _lengths(image):
        alike.update(known.by_length.get(length, ()))
    alike.discard(xref)
    if not alike:
        return xref or 0
    digest = _digest_of(pdf, xref, known, digests) if xref is not None else image_digest(image)
    named = 0
    for other in known.xrefs:
        if other == xref or (other in alike and _digest_of(pdf, other, known, digests) == digest):
            named = other
    return named


def named_images(
    doc: pymupdf.Document,
    page: pymupdf.Page,
    listed: list[Any],
    image_page: Any,
    digests: dict[int, bytes | None],
) -> list[dict[str, Any]]:
    """What `page.get_image_info(xrefs=True)` answers, without "number" and "digest": the
    shown images, each with the xref whose decoded pixels have the same hash (0 for none; of
    two alike, the later one in `listed`, which is `page.get_images()`). From `image_page` (a
    text page holding only the page's image blocks, in drawing order) when the page's run made
    one, else from pymupdf's own scan of the page. `digests` holds, for the whole document, the
    image xrefs met so far and the hashes of those decoded; it grows."""
    pdf = mupdf.pdf_document_from_fz_document(doc.this)
    if image_page is None:  # pymupdf's scan: every shown image hashed, so every listed one
        shown = image_info(page, None)
        known = _listed(pdf, listed, digests)
        xref_of = {_digest_of(pdf, xref, known, digests): xref for xref in known.xrefs}
        return [
            {
                **{k: v for k, v in info.items() if k != "digest"},
                "xref": xref_of.get(info["digest"], 0),
            }
            for info in shown
        ]
    known = _listed(pdf, listed, digests)
    found = []
    for block in image_page.this:
        if block.m_internal.type != mupdf.FZ_STEXT_BLOCK_IMAGE:
            continue
        image = block.i_image()
        size = 0
        buffer = mupdf.fz_compressed_image_buffer(image)
        if buffer.m_internal:
            size = buffer.fz_compressed_buffer_size()
        if size == 0:
            size = image.w() * image.h() * image.n()
        colorspace = mupdf.FzColorspace(mupdf.ll_fz_keep_colorspace(image.m_internal.colorspace))
        found.append(
            {
                "bbox": pymupdf.JM_py_from_rect(block.m_internal.bbox),
                "transform": pymupdf.JM_py_from_matrix(block.i_transform()),
                "width": image.w(),
                "height": image.h(),
                "colorspace": mupdf.fz_colorspace_n(colorspace),
                "cs-name": mupdf.fz_colorspace_name(colorspace),
                "xres": image.xres(),
                "yres": image.yres(),
                "bpc": image.bpc(),
                "size": size,
                "has-mask": bool(image.mask().m_internal),
                "xref": _name(
                    pdf, image, known.xref_at.get(image.m_internal_value()), known, digests
                ),
            }
        )
    return found
