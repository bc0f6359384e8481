/*
 * A page's rectangle and rotation without pymupdf's wrappers: page.rect and page.rotation are
 * ~11 us each in Python (a Page and a Rect made, several binding calls), a tenth of what the
 * parse spends on a short text page outside mupdf's own run. The values are the ones pymupdf
 * computes: fz_bound_page's rectangle (pymupdf's Page.bound), and the page object's inherited
 * /Rotate normalised as pymupdf's JM_norm_rotation does (a value that is not a multiple of 90
 * counts as 0).
 *
 * None when the rectangle is infinite (pymupdf then falls back to the crop box and warns) or
 * mupdf raised: the caller asks pymupdf, which answers or raises as it always has.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mupdf/fitz.h>
#include <mupdf/pdf.h>

#include "page_box.h"

static int normalised(int rotate)
{
    while (rotate < 0)
        rotate += 360;
    while (rotate >= 360)
        rotate -= 360;
    return rotate % 90 ? 0 : rotate;
}

PyObject *page_box(PyObject *self, PyObject *args)
{
    unsigned long long ctx_ptr, page_ptr;
    if (!PyArg_ParseTuple(args, "KK", &ctx_ptr, &page_ptr))
        return NULL;
    fz_context *ctx = (fz_context *)(uintptr_t)ctx_ptr;
    fz_page *page = (fz_page *)(uintptr_t)page_ptr;
    if (!ctx || !page) {
        PyErr_SetString(PyExc_ValueError, "null pointer");
        return NULL;
    }
    fz_rect rect = fz_empty_rect;
    int rotate = 0;
    int failed = 0;
    fz_try(ctx) {
        rect = fz_bound_page(ctx, page);
        pdf_page *pdf = pdf_page_from_fz_page(ctx, page);
        if (pdf)
            rotate = pdf_to_int(ctx, pdf_dict_get_inheritable(ctx, pdf->obj, PDF_NAME(Rotate)));
    }
    fz_catch(ctx) {
        fz_ignore_error(ctx);
        failed = 1;
    }
    if (failed || fz_is_infinite_rect(rect))
        Py_RETURN_NONE;
    return Py_BuildValue("(ddddi)", (double)rect.x0, (double)rect.y0, (double)rect.x1,
                         (double)rect.y1, normalised(rotate));
}
