/* page_box(ctx, page) -> (x0, y0, x1, y1, rotation) or None
 * A PDF page's rectangle as pymupdf's page.rect gives it (fz_bound_page: the crop box, rotated)
 * and its /Rotate as page.rotation gives it (inherited, normalised to 0, 90, 180 or 270), in
 * one call (page_box.c). */
#ifndef DOCPARSE_PAGE_BOX_H
#define DOCPARSE_PAGE_BOX_H
#include <Python.h>

PyObject *page_box(PyObject *self, PyObject *args);

#endif
