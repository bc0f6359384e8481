/*
 * One interpretation of a PDF page for both its structured text and its straight rules.
 *
 * The reading package needs a page's text (an fz_stext_page) and, for ruled-table detection,
 * its vector line art. pymupdf answers them with two runs of the page's content stream
 * (page.get_textpage() and page.get_cdrawings()), and the second run costs as much as the
 * first: on text-heavy pages most of a run is glyph work that line art does not use.
 *
 * text_and_rules() runs the page once through mupdf's own stext device, whose fill_path and
 * stroke_path entries are wrapped: each path is walked here (then handed on to the stext
 * device's own entry, if it has one), so the text page is exactly what the stext device
 * alone builds. The walk reproduces the items pymupdf's get_cdrawings() reports for the same
 * path (non-extended mode: clip paths are not drawings), reduced to what table detection
 * reads: every item counts toward the page's item total, the "l" and "re" items are returned.
 * In particular: mupdf decomposes a rect into move/line/line/line/close, which becomes one
 * "re" when the three lines are axis-aligned; four consecutive lines of a stroked path that
 * close on their start become one "qu" (not returned); a closepath after a move adds the
 * closing line when the path is open; a stroke of exactly the items of the fill just before
 * it is merged into that fill ("fs") and not counted twice.
 *
 * fill_image, fill_image_mask and fill_shade are wrapped too, only to count the images the
 * page draws (pymupdf's image list shows shadings as images; a page that draws none of the
 * three needs no image scan).
 *
 * Pointers come from the mupdf Python bindings (the thread's fz_context, the fz_page and an
 * empty fz_stext_page), and everything runs under the GIL on the calling thread, as every
 * other pymupdf call of the parse does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <mupdf/fitz.h>

#ifndef DOCPARSE_MUPDF_VERSION
#error "build with -DDOCPARSE_MUPDF_VERSION=\"x.y.z\" (parser_svc/native/build.py)"
#endif

typedef struct {
    char kind;  /* 'l', 'r' (re), 'q' (qu), 'c' */
    float p[8]; /* l: ax ay bx by; re: x0 y0 x1 y1 orientation; qu: 4 corners; c: 4 points */
} item_t;

typedef struct {
    item_t *items;
    size_t len, cap;
} item_buf;

typedef struct {
    fz_device *dev;     /* the stext device whose entries were wrapped */
    void (*inner_fill)(fz_context *, fz_device *, const fz_path *, int, fz_matrix,
                       fz_colorspace *, const float *, float, fz_color_params);
    void (*inner_stroke)(fz_context *, fz_device *, const fz_path *, const fz_stroke_state *,
                         fz_matrix, fz_colorspace *, const float *, float, fz_color_params);
    void (*inner_image)(fz_context *, fz_device *, fz_image *, fz_matrix, float,
                        fz_color_params);
    void (*inner_image_mask)(fz_context *, fz_device *, fz_image *, fz_matrix, fz_colorspace *,
                             const float *, float, fz_color_params);
    void (*inner_shade)(fz_context *, fz_device *, fz_shade *, fz_matrix, float,
                        fz_color_params);
    Py_ssize_t images; /* images drawn: fill_image, fill_image_mask and fill_shade calls (a
                          text page that keeps images lists a shading as an image) */
    /* the path being walked */
    fz_matrix ctm;
    int stroking;
    fz_point first, last;
    int havemove, linecount;
    item_buf path;
    /* the previous drawing, for the fill-then-stroke merge */
    item_buf prev;
    int prev_is_fill, have_prev;
    /* what the page returns */
    PyObject *out;      /* list of tuples */
    Py_ssize_t count;   /* items of all kinds, as get_cdrawings would list them */
    int failed;         /* a Python allocation failed: the result is discarded */
} collector;

static _Thread_local collector *current;

static int push(item_buf *buf, item_t item)
{
    if (buf->len == buf->cap) {
        size_t cap = buf->cap ? buf->cap * 2 : 64;
        item_t *grown = realloc(buf->items, cap * sizeof(item_t));
        if (!grown)
            return 0;
        buf->items = grown;
        buf->cap = cap;
    }
    buf->items[buf->len++] = item;
    return 1;
}

static void add(collector *col, item_t item)
{
    if (!push(&col->path, item))
        col->failed = 1;
}

static void check_quad(collector *col)
{
    item_t *it = col->path.items + col->path.len - 4;
    /* the four lines are a polyline; a quad when the last one ends where the first began */
    if (it[3].p[2] != it[0].p[0] || it[3].p[3] != it[0].p[1])
        return;
    col->linecount = 0;
    item_t quad = {'q', {it[0].p[0], it[0].p[1], it[1].p[0], it[1].p[1],
                         it[2].p[0], it[2].p[1], it[3].p[0], it[3].p[1]}};
    it[0] = quad;
    col->path.len -= 3;
}

static int check_rect(collector *col)
{
    col->linecount = 0;
    item_t *it = col->path.items + col->path.len - 3;
    float llx = it[0].p[0], lly = it[0].p[1], lrx = it[0].p[2], lry = it[0].p[3];
    float urx = it[2].p[0], ury = it[2].p[1], ulx = it[2].p[2], uly = it[2].p[3];
    if (lly != lry || llx != ulx || ury != uly || urx != lrx)
        return 0;
    col->last = fz_make_point(llx, lly);
    /* p[4]: the orientation pymupdf keeps with the rect (+1 drawn anti-clockwise), part of
       the items a fill and a stroke must share to be merged */
    item_t re = {'r', {llx, lly, urx, ury, -1, 0, 0, 0}};
    if (uly < lry) {
        item_t up = {'r', {ulx, uly, lrx, lry, 1, 0, 0, 0}};
        re = up;
    }
    it[0] = re;
    col->path.len -= 2;
    return 1;
}

static void walk_moveto(fz_context *ctx, void *arg, float x, float y)
{
    collector *col = arg;
    col->last = fz_transform_point(fz_make_point(x, y), col->ctm);
    col->first = col->last;
    col->havemove = 1;
    col->linecount = 0;
}

static void walk_lineto(fz_context *ctx, void *arg, float x, float y)
{
    collector *col = arg;
    fz_point p = fz_transform_point(fz_make_point(x, y), col->ctm);
    item_t line = {'l', {col->last.x, col->last.y, p.x, p.y, 0, 0, 0, 0}};
    add(col, line);
    col->last = p;
    col->linecount += 1;
    if (col->linecount == 4 && col->stroking && !col->failed)
        check_quad(col);
}

static void walk_curveto(fz_context *ctx, void *arg, float x1, float y1, float x2, float y2,
                         float x3, float y3)
{
    collector *col = arg;
    col->linecount = 0;
    fz_point p1 = fz_transform_point(fz_make_point(x1, y1), col->ctm);
    fz_point p2 = fz_transform_point(fz_make_point(x2, y2), col->ctm);
    fz_point p3 = fz_transform_point(fz_make_point(x3, y3), col->ctm);
    item_t curve = {'c', {col->last.x, col->last.y, p1.x, p1.y, p2.x, p2.y, p3.x, p3.y}};
    add(col, curve);
    col->last = p3;
}

static void walk_closepath(fz_context *ctx, void *arg)
{
    collector *col = arg;
    if (col->linecount == 3 && !col->failed && check_rect(col))
        return;
    col->linecount = 0;
    if (col->havemove) {
        if (col->first.x != col->last.x || col->first.y != col->last.y) {
            item_t line = {'l', {col->last.x, col->last.y, col->first.x, col->first.y,
                                 0, 0, 0, 0}};
            add(col, line);
            col->last = col->first;
        }
        col->havemove = 0;
    }
}

static const fz_path_walker walker = {
    walk_moveto, walk_lineto, walk_curveto, walk_closepath, NULL, NULL, NULL, NULL,
};

static int same_items(const item_buf *x, const item_buf *y)
{
    if (x->len != y->len)
        return 0;
    for (size_t i = 0; i < x->len; i++) {
        const item_t *p = x->items + i, *q = y->items + i;
        if (p->kind != q->kind)
            return 0;
        for (int k = 0; k < 8; k++)
            if (p->p[k] != q->p[k]) /* as Python compares the floats: -0.0 == 0.0, NaN != NaN */
                return 0;
    }
    return 1;
}

static void emit(collector *col, int is_fill)
{
    if (col->failed || col->path.len == 0)
        return;
    if (!is_fill && col->have_prev && col->prev_is_fill && same_items(&col->prev, &col->path)) {
        col->prev_is_fill = 0; /* merged into the fill: "fs", its items already counted */
        return;
    }
    for (size_t i = 0; i < col->path.len; i++) {
        item_t *it = col->path.items + i;
        col->count += 1;
        PyObject *tuple = NULL;
        if (it->kind == 'l')
            tuple = Py_BuildValue("(sdddd)", "l", (double)it->p[0], (double)it->p[1],
                                  (double)it->p[2], (double)it->p[3]);
        else if (it->kind == 'r')
            tuple = Py_BuildValue("(sdddd)", "re", (double)it->p[0], (double)it->p[1],
                                  (double)it->p[2], (double)it->p[3]);
        else
            continue;
        if (!tuple || PyList_Append(col->out, tuple) < 0) {
            Py_XDECREF(tuple);
            col->failed = 1;
            return;
        }
        Py_DECREF(tuple);
    }
    /* keep this drawing as the previous one (swap the buffers, no copy) */
    item_buf spare = col->prev;
    col->prev = col->path;
    col->path = spare;
    col->prev_is_fill = is_fill;
    col->have_prev = 1;
}

static void walk(fz_context *ctx, collector *col, const fz_path *path, fz_matrix ctm,
                 int stroking)
{
    col->ctm = ctm;
    col->stroking = stroking;
    col->path.len = 0;
    col->linecount = 0;
    col->havemove = 0;
    col->last = fz_make_point(0, 0);
    col->first = fz_make_point(0, 0);
    fz_walk_path(ctx, path, &walker, col);
}

/* Walks and records a path drawn on our device; the collector, whose inner entries the caller
   then calls (only our device has these entries, and only while its run is current). */
static collector *record(fz_context *ctx, fz_device *dev, const fz_path *path, fz_matrix ctm,
                         int stroking)
{
    collector *col = current;
    if (!col || col->dev != dev)
        return NULL;
    walk(ctx, col, path, ctm, stroking);
    emit(col, !stroking);
    return col;
}

static void fill_path(fz_context *ctx, fz_device *dev, const fz_path *path, int even_odd,
                      fz_matrix ctm, fz_colorspace *cs, const float *color, float alpha,
                      fz_color_params params)
{
    collector *col = record(ctx, dev, path, ctm, 0);
    if (col && col->inner_fill)
        col->inner_fill(ctx, dev, path, even_odd, ctm, cs, color, alpha, params);
}

static void stroke_path(fz_context *ctx, fz_device *dev, const fz_path *path,
                        const fz_stroke_state *stroke, fz_matrix ctm, fz_colorspace *cs,
                        const float *color, float alpha, fz_color_params params)
{
    collector *col = record(ctx, dev, path, ctm, 1);
    if (col && col->inner_stroke)
        col->inner_stroke(ctx, dev, path, stroke, ctm, cs, color, alpha, params);
}

/* Counts an image drawn on our device; the collector, as record() gives it. */
static collector *count_image(fz_device *dev)
{
    collector *col = current;
    if (!col || col->dev != dev)
        return NULL;
    col->images += 1;
    return col;
}

static void fill_image(fz_context *ctx, fz_device *dev, fz_image *image, fz_matrix ctm,
                       float alpha, fz_color_params params)
{
    collector *col = count_image(dev);
    if (col && col->inner_image)
        col->inner_image(ctx, dev, image, ctm, alpha, params);
}

static void fill_image_mask(fz_context *ctx, fz_device *dev, fz_image *image, fz_matrix ctm,
                            fz_colorspace *cs, const float *color, float alpha,
                            fz_color_params params)
{
    collector *col = count_image(dev);
    if (col && col->inner_image_mask)
        col->inner_image_mask(ctx, dev, image, ctm, cs, color, alpha, params);
}

static void fill_shade(fz_context *ctx, fz_device *dev, fz_shade *shade, fz_matrix ctm,
                       float alpha, fz_color_params params)
{
    collector *col = count_image(dev);
    if (col && col->inner_shade)
        col->inner_shade(ctx, dev, shade, ctm, alpha, params);
}

/* text_and_rules(ctx, page, stext_page, flags) -> (rules, items, images)
 * Fills the empty stext_page from one run of the page with the given stext flags; returns
 * the page's "l" and "re" items as ("l", ax, ay, bx, by) / ("re", x0, y0, x1, y1), the
 * number of items of every kind and the number of images drawn. RuntimeError with mupdf's
 * message when the run fails. */
static PyObject *text_and_rules(PyObject *self, PyObject *args)
{
    unsigned long long ctx_ptr, page_ptr, stext_ptr;
    int flags;
    if (!PyArg_ParseTuple(args, "KKKi", &ctx_ptr, &page_ptr, &stext_ptr, &flags))
        return NULL;
    fz_context *ctx = (fz_context *)(uintptr_t)ctx_ptr;
    fz_page *page = (fz_page *)(uintptr_t)page_ptr;
    fz_stext_page *stext = (fz_stext_page *)(uintptr_t)stext_ptr;
    if (!ctx || !page || !stext) {
        PyErr_SetString(PyExc_ValueError, "null pointer");
        return NULL;
    }
    collector col;
    memset(&col, 0, sizeof col);
    col.out = PyList_New(0);
    if (!col.out)
        return NULL;
    fz_device *volatile dev = NULL;
    collector *volatile saved = current;
    char message[256] = "";
    fz_try(ctx) {
        fz_stext_options options;
        memset(&options, 0, sizeof options);
        options.flags = flags;
        dev = fz_new_stext_device(ctx, stext, &options);
        col.dev = dev;
        col.inner_fill = dev->fill_path;
        col.inner_stroke = dev->stroke_path;
        col.inner_image = dev->fill_image;
        col.inner_image_mask = dev->fill_image_mask;
        col.inner_shade = dev->fill_shade;
        dev->fill_path = fill_path;
        dev->stroke_path = stroke_path;
        dev->fill_image = fill_image;
        dev->fill_image_mask = fill_image_mask;
        dev->fill_shade = fill_shade;
        current = &col;
        fz_run_page(ctx, page, dev, fz_identity, NULL);
        fz_close_device(ctx, dev);
    }
    fz_always(ctx) {
        current = saved;
        fz_drop_device(ctx, dev);
    }
    fz_catch(ctx) {
        snprintf(message, sizeof message, "%s", fz_caught_message(ctx));
    }
    free(col.path.items);
    free(col.prev.items);
    if (message[0]) {
        Py_DECREF(col.out);
        PyErr_SetString(PyExc_RuntimeError, message);
        return NULL;
    }
    if (col.failed) {
        Py_DECREF(col.out);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return NULL;
    }
    return Py_BuildValue("(Nnn)", col.out, col.count, col.images);
}

static PyMethodDef methods[] = {
    {"text_and_rules", text_and_rules, METH_VARARGS,
     "text_and_rules(ctx, page, stext_page, flags) -> (rules, items, images)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pdf_pass", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__pdf_pass(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddStringConstant(m, "MUPDF_VERSION", DOCPARSE_MUPDF_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
