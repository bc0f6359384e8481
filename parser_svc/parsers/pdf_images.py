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

    xref_of: dict[bytes, int]  # hash -> the last xref of the list with it
    xref_at: dict[int, int]  # fz_image address -> its xref (when asked for)
    held: list[Any]  # those images: while held, no other image can take their addresses


def _listed(pdf: Any, listed: list[Any], digests: dict[int, bytes], addresses: bool) -> _Listed:
    known = _Listed({}, {}, [])
    for item in listed:
        xref = item[0]
        digest = digests.get(xref)
        image = None
        if digest is None:
            image = _xref_image(pdf, xref)
            digest = digests[xref] = image_digest(image)
        elif addresses:
            with contextlib.suppress(Exception):  # hashed before, not loadable now: by hash
                image = _xref_image(pdf, xref)
        if addresses and image is not None:
            known.held.append(image)
            known.xref_at[image.m_internal_value()] = xref
        known.xref_of[digest] = xref
    return known


def named_images(
    doc: pymupdf.Document,
    page: pymupdf.Page,
    listed: list[Any],
    image_page: Any,
    digests: dict[int, bytes],
) -> list[dict[str, Any]]:
    """What `page.get_image_info(hashes=True, xrefs=True)` answers, without "number": the shown
    images, each with the xref whose decoded pixels have the same hash (0 for none; of two
    alike, the later one in `listed`, which is `page.get_images()`). From `image_page` (a text
    page holding only the page's image blocks, in drawing order) when the page's run made one,
    else from pymupdf's own scan of the page. `digests` maps image xrefs to their hashes for
    the whole document; it grows."""
    pdf = mupdf.pdf_document_from_fz_document(doc.this)
    if image_page is None:  # pymupdf's scan: every shown image hashed
        shown = image_info(page, None)
        xref_of = _listed(pdf, listed, digests, addresses=False).xref_of
        return [{**info, "xref": xref_of.get(info["digest"], 0)} for info in shown]
    known = _listed(pdf, listed, digests, addresses=True)
    found = []
    for block in image_page.this:
        if block.m_internal.type != mupdf.FZ_STEXT_BLOCK_IMAGE:
            continue
        image = block.i_image()
        size = 0
        buffer = mupdf.fz_compressed_image_buffer(image)
        if buffer.m_internal:
            size = buffer.fz_compressed_buffer_size()
        xref = known.xref_at.get(image.m_internal_value())
        digest = digests[xref] if xref is not None else image_digest(image)
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
                "digest": digest,
                "has-mask": bool(image.mask().m_internal),
                "xref": known.xref_of.get(digest, 0),
            }
        )
    return found
