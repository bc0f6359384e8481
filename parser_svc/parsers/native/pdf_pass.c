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
 * reads: every item counts toward the page's item total, the "l" and "re" items that can be
 * table rules are returned (on the corpus, one item in eight: most are short or small).
 * In particular: mupdf decomposes a rect into move/line/line/line/close, which becomes one
 * "re" when the three lines are axis-aligned; four consecutive lines of a stroked path that
 * close on their start become one "qu" (not returned); a closepath after a move adds the
 * closing line when the path is open; a stroke of exactly the items of the fill just before
 * it is merged into that fill ("fs") and not counted twice.
 *
 * fill_text and stroke_text are wrapped to hand the text on in DeviceGray black (the package
 * keeps no colour; see fill_text).
 *
 * fill_image, fill_image_mask and fill_shade are wrapped too: they count the images the page
 * draws (pymupdf's image list shows shadings as images; a page that draws none of the three
 * needs no image scan), and go on, with the clips, masks, groups and tiles around them, to a
 * second stext device that keeps images: what page.get_image_info() reads from a run of its
 * own (a text page made with TEXT_PRESERVE_IMAGES), without its text.
 *
 * Pointers come from the mupdf Python bindings (the thread's fz_context, the fz_page and an
 * empty fz_stext_page), and everything runs under the GIL on the calling thread, as every
 * other pymupdf call of the parse does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>
#include <mupdf/fitz.h>

#include "page_box.h"
#include "page_lines.h"

#ifndef DOCPARSE_MUPDF_VERSION
#error "build with -DDOCPARSE_MUPDF_VERSION=\"x.y.z\" (parser_svc/parsers/native/build.py)"
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
    fz_device *dev;    /* the stext device whose entries were wrapped */
    fz_device inner;   /* its own entries, copied before they were wrapped */
    fz_device *images; /* a stext device that keeps images, fed the page's image draws and the
                          clips, masks, groups and tiles they are drawn in; NULL when not asked
                          for, or after it failed (the page's images are then scanned apart) */
    int images_failed;
    Py_ssize_t drawn;  /* images drawn: fill_image, fill_image_mask and fill_shade calls (a
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
    /* which "l" and "re" items can be table rules (pdf_pass.is_rule_candidate) */
    double min_rule, thin_line, thin_rect;
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

/* pdf_pass.is_rule_candidate: an axis-aligned line (at most thin_line across) or thin
   rectangle (at most thin_rect) at least min_rule long, or a rectangle at least min_rule both
   ways; on the doubles the tuple would carry, as the Python predicate sees them. */
static int is_rule_candidate(const collector *col, char kind, double ax, double ay, double bx,
                             double by)
{
    double dx = fabs(ax - bx), dy = fabs(ay - by);
    double thin = kind == 'l' ? col->thin_line : col->thin_rect;
    if ((dy <= thin && dx >= col->min_rule) || (dx <= thin && dy >= col->min_rule))
        return 1;
    return kind == 'r' && dx >= col->min_rule && dy >= col->min_rule;
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
        if (it->kind != 'l' && it->kind != 'r')
            continue;
        double ax = it->p[0], ay = it->p[1], bx = it->p[2], by = it->p[3];
        if (!is_rule_candidate(col, it->kind, ax, ay, bx, by))
            continue; /* counted, not returned: most items of a page are no rule */
        PyObject *tuple = Py_BuildValue("(sdddd)", it->kind == 'l' ? "l" : "re", ax, ay, bx, by);
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

static collector *mine(fz_device *dev)
{
    collector *col = current;
    return col && col->dev == dev ? col : NULL;
}

/* `call` on the images device, if there is one; an error there ends that device only (the
   text device's run goes on: its wrapper would disable it on an error we let through). */
#define TO_IMAGES(ctx, col, call)                                                           \
    do {                                                                                    \
        if ((col)->images) {                                                                \
            fz_device *images = (col)->images;                                              \
            fz_try(ctx) { call; }                                                           \
            fz_catch(ctx) {                                                                 \
                fz_ignore_error(ctx);                                                       \
                (col)->images = NULL;                                                       \
                (col)->images_failed = 1;                                                   \
            }                                                                               \
        }                                                                                   \
    } while (0)

static void fill_path(fz_context *ctx, fz_device *dev, const fz_path *path, int even_odd,
                      fz_matrix ctm, fz_colorspace *cs, const float *color, float alpha,
                      fz_color_params params)
{
    collector *col = mine(dev);
    if (!col)
        return;
    walk(ctx, col, path, ctm, 0);
    emit(col, 1);
    if (col->inner.fill_path)
        col->inner.fill_path(ctx, dev, path, even_odd, ctm, cs, color, alpha, params);
}

static void stroke_path(fz_context *ctx, fz_device *dev, const fz_path *path,
                        const fz_stroke_state *stroke, fz_matrix ctm, fz_colorspace *cs,
                        const float *color, float alpha, fz_color_params params)
{
    collector *col = mine(dev);
    if (!col)
        return;
    walk(ctx, col, path, ctm, 1);
    emit(col, 0);
    if (col->inner.stroke_path)
        col->inner.stroke_path(ctx, dev, path, stroke, ctm, cs, color, alpha, params);
}

/* Text reaches the stext device in DeviceGray black. The stext device only turns a text's
   colour into each character's sRGB value, which the reading package does not keep; from an
   ICC-based colour space that conversion first builds an lcms colour link, a few ms of CPU
   per profile in every parse child (a forked child starts without mupdf's link cache). */
static const float black[FZ_MAX_COLORS] = {0};

static void fill_text(fz_context *ctx, fz_device *dev, const fz_text *text, fz_matrix ctm,
                      fz_colorspace *cs, const float *color, float alpha, fz_color_params params)
{
    collector *col = mine(dev);
    if (col && col->inner.fill_text)
        col->inner.fill_text(ctx, dev, text, ctm, fz_device_gray(ctx), black, alpha, params);
}

static void stroke_text(fz_context *ctx, fz_device *dev, const fz_text *text,
                        const fz_stroke_state *stroke, fz_matrix ctm, fz_colorspace *cs,
                        const float *color, float alpha, fz_color_params params)
{
    collector *col = mine(dev);
    if (col && col->inner.stroke_text)
        col->inner.stroke_text(ctx, dev, text, stroke, ctm, fz_device_gray(ctx), black, alpha,
                               params);
}

static void fill_image(fz_context *ctx, fz_device *dev, fz_image *image, fz_matrix ctm,
                       float alpha, fz_color_params params)
{
    collector *col = mine(dev);
    if (!col)
        return;
    col->drawn += 1;
    if (col->inner.fill_image)
        col->inner.fill_image(ctx, dev, image, ctm, alpha, params);
    TO_IMAGES(ctx, col, fz_fill_image(ctx, images, image, ctm, alpha, params));
}

static void fill_image_mask(fz_context *ctx, fz_device *dev, fz_image *image, fz_matrix ctm,
                            fz_colorspace *cs, const float *color, float alpha,
                            fz_color_params params)
{
    collector *col = mine(dev);
    if (!col)
        return;
    col->drawn += 1;
    if (col->inner.fill_image_mask)
        col->inner.fill_image_mask(ctx, dev, image, ctm, cs, color, alpha, params);
    TO_IMAGES(ctx, col, fz_fill_image_mask(ctx, images, image, ctm, cs, color, alpha, params));
}

static void fill_shade(fz_context *ctx, fz_device *dev, fz_shade *shade, fz_matrix ctm,
                       float alpha, fz_color_params params)
{
    collector *col = mine(dev);
    if (!col)
        return;
    col->drawn += 1;
    if (col->inner.fill_shade)
        col->inner.fill_shade(ctx, dev, shade, ctm, alpha, params);
    TO_IMAGES(ctx, col, fz_fill_shade(ctx, images, shade, ctm, alpha, params));
}

/* The nesting, so the images device clips (a shading is drawn to its scissor) as a run of
   its own would. */

static void clip_path(fz_context *ctx, fz_device *dev, const fz_path *path, int even_odd,
                      fz_matrix ctm, fz_rect scissor)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.clip_path)
        col->inner.clip_path(ctx, dev, path, even_odd, ctm, scissor);
    TO_IMAGES(ctx, col, fz_clip_path(ctx, images, path, even_odd, ctm, scissor));
}

static void clip_stroke_path(fz_context *ctx, fz_device *dev, const fz_path *path,
                             const fz_stroke_state *stroke, fz_matrix ctm, fz_rect scissor)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.clip_stroke_path)
        col->inner.clip_stroke_path(ctx, dev, path, stroke, ctm, scissor);
    TO_IMAGES(ctx, col, fz_clip_stroke_path(ctx, images, path, stroke, ctm, scissor));
}

static void clip_text(fz_context *ctx, fz_device *dev, const fz_text *text, fz_matrix ctm,
                      fz_rect scissor)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.clip_text)
        col->inner.clip_text(ctx, dev, text, ctm, scissor);
    TO_IMAGES(ctx, col, fz_clip_text(ctx, images, text, ctm, scissor));
}

static void clip_stroke_text(fz_context *ctx, fz_device *dev, const fz_text *text,
                             const fz_stroke_state *stroke, fz_matrix ctm, fz_rect scissor)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.clip_stroke_text)
        col->inner.clip_stroke_text(ctx, dev, text, stroke, ctm, scissor);
    TO_IMAGES(ctx, col, fz_clip_stroke_text(ctx, images, text, stroke, ctm, scissor));
}

static void clip_image_mask(fz_context *ctx, fz_device *dev, fz_image *image, fz_matrix ctm,
                            fz_rect scissor)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.clip_image_mask)
        col->inner.clip_image_mask(ctx, dev, image, ctm, scissor);
    TO_IMAGES(ctx, col, fz_clip_image_mask(ctx, images, image, ctm, scissor));
}

static void pop_clip(fz_context *ctx, fz_device *dev)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.pop_clip)
        col->inner.pop_clip(ctx, dev);
    TO_IMAGES(ctx, col, fz_pop_clip(ctx, images));
}

static void begin_mask(fz_context *ctx, fz_device *dev, fz_rect area, int luminosity,
                       fz_colorspace *cs, const float *bc, fz_color_params params)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.begin_mask)
        col->inner.begin_mask(ctx, dev, area, luminosity, cs, bc, params);
    TO_IMAGES(ctx, col, fz_begin_mask(ctx, images, area, luminosity, cs, bc, params));
}

static void end_mask(fz_context *ctx, fz_device *dev, fz_function *fn)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.end_mask)
        col->inner.end_mask(ctx, dev, fn);
    TO_IMAGES(ctx, col, fz_end_mask_tr(ctx, images, fn));
}

static void begin_group(fz_context *ctx, fz_device *dev, fz_rect area, fz_colorspace *cs,
                        int isolated, int knockout, int blendmode, float alpha)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.begin_group)
        col->inner.begin_group(ctx, dev, area, cs, isolated, knockout, blendmode, alpha);
    TO_IMAGES(ctx, col,
              fz_begin_group(ctx, images, area, cs, isolated, knockout, blendmode, alpha));
}

static void end_group(fz_context *ctx, fz_device *dev)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.end_group)
        col->inner.end_group(ctx, dev);
    TO_IMAGES(ctx, col, fz_end_group(ctx, images));
}

static int begin_tile(fz_context *ctx, fz_device *dev, fz_rect area, fz_rect view, float xstep,
                      float ystep, fz_matrix ctm, int id, int doc_id)
{
    collector *col = mine(dev);
    if (!col)
        return 0;
    int cached = 0; /* non-zero: the tile is cached and its content not run again */
    if (col->inner.begin_tile)
        cached = col->inner.begin_tile(ctx, dev, area, view, xstep, ystep, ctm, id, doc_id);
    TO_IMAGES(ctx, col,
              fz_begin_tile_tid(ctx, images, area, view, xstep, ystep, ctm, id, doc_id));
    return cached;
}

static void end_tile(fz_context *ctx, fz_device *dev)
{
    collector *col = mine(dev);
    if (!col)
        return;
    if (col->inner.end_tile)
        col->inner.end_tile(ctx, dev);
    TO_IMAGES(ctx, col, fz_end_tile(ctx, images));
}

/* text_and_rules(ctx, page, stext_page, flags, images_page, (min_rule, thin_line, thin_rect))
 *   -> (rules, items, drawn, images)
 * Fills the empty stext_page from one run of the page with the given stext flags and, when
 * images_page is not 0, the empty images_page with what a text page that keeps images
 * (FZ_STEXT_PRESERVE_IMAGES) holds of them. Returns the page's "l" and "re" items that can be
 * table rules (is_rule_candidate, with the three sizes given) as
 * ("l", ax, ay, bx, by) / ("re", x0, y0, x1, y1), the number of items of every kind, the
 * number of images drawn and whether images_page is complete (False: not asked for, or its
 * device failed). RuntimeError with mupdf's message when the run fails. */
static PyObject *text_and_rules(PyObject *self, PyObject *args)
{
    unsigned long long ctx_ptr, page_ptr, stext_ptr, images_ptr;
    int flags;
    double min_rule, thin_line, thin_rect;
    if (!PyArg_ParseTuple(args, "KKKiK(ddd)", &ctx_ptr, &page_ptr, &stext_ptr, &flags,
                          &images_ptr, &min_rule, &thin_line, &thin_rect))
        return NULL;
    fz_context *ctx = (fz_context *)(uintptr_t)ctx_ptr;
    fz_page *page = (fz_page *)(uintptr_t)page_ptr;
    fz_stext_page *stext = (fz_stext_page *)(uintptr_t)stext_ptr;
    fz_stext_page *images_page = (fz_stext_page *)(uintptr_t)images_ptr;
    if (!ctx || !page || !stext) {
        PyErr_SetString(PyExc_ValueError, "null pointer");
        return NULL;
    }
    collector col;
    memset(&col, 0, sizeof col);
    col.min_rule = min_rule;
    col.thin_line = thin_line;
    col.thin_rect = thin_rect;
    col.out = PyList_New(0);
    if (!col.out)
        return NULL;
    fz_device *volatile dev = NULL;
    fz_device *volatile images = NULL;
    collector *volatile saved = current;
    char message[256] = "";
    fz_try(ctx) {
        fz_stext_options options;
        memset(&options, 0, sizeof options);
        options.flags = flags;
        dev = fz_new_stext_device(ctx, stext, &options);
        if (images_page) {
            fz_stext_options keep;
            memset(&keep, 0, sizeof keep);
            keep.flags = FZ_STEXT_PRESERVE_IMAGES;
            images = fz_new_stext_device(ctx, images_page, &keep);
        }
        col.dev = dev;
        col.images = images;
        col.inner = *dev;
        dev->fill_path = fill_path;
        dev->stroke_path = stroke_path;
        dev->fill_text = fill_text;
        dev->stroke_text = stroke_text;
        dev->fill_image = fill_image;
        dev->fill_image_mask = fill_image_mask;
        dev->fill_shade = fill_shade;
        dev->clip_path = clip_path;
        dev->clip_stroke_path = clip_stroke_path;
        dev->clip_text = clip_text;
        dev->clip_stroke_text = clip_stroke_text;
        dev->clip_image_mask = clip_image_mask;
        dev->pop_clip = pop_clip;
        dev->begin_mask = begin_mask;
        dev->end_mask = end_mask;
        dev->begin_group = begin_group;
        dev->end_group = end_group;
        dev->begin_tile = begin_tile;
        dev->end_tile = end_tile;
        current = &col;
        fz_run_page(ctx, page, dev, fz_identity, NULL);
        fz_close_device(ctx, dev);
        if (col.images) {
            fz_try(ctx)
                fz_close_device(ctx, col.images);
            fz_catch(ctx) {
                fz_ignore_error(ctx);
                col.images_failed = 1;
            }
        }
    }
    fz_always(ctx) {
        current = saved;
        fz_drop_device(ctx, dev);
        fz_drop_device(ctx, images);
    }
    fz_catch(ctx) {
        snprintf(message, sizeof message, "%s", fz_caught_message(ctx));
        fz_ignore_error(ctx);
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
    PyObject *complete = (images_page && !col.images_failed) ? Py_True : Py_False;
    return Py_BuildValue("(NnnO)", col.out, col.count, col.drawn, complete);
}

static PyMethodDef methods[] = {
    {"text_and_rules", text_and_rules, METH_VARARGS,
     "text_and_rules(ctx, page, stext_page, flags, images_page, sizes) -> "
     "(rules, items, drawn, images_complete)"},
    {"page_lines", page_lines, METH_VARARGS,
     "page_lines(ctx, stext_page) -> [[(x0, y0, x1, y1, text, size, bold, chars), ...], ...]"},
    {"page_segments", page_segments, METH_VARARGS,
     "page_segments(ctx, stext_page, gap_ems) -> [(x0, y0, x1, y1, text), ...]"},
    {"page_box", page_box, METH_VARARGS,
     "page_box(ctx, page) -> (x0, y0, x1, y1, rotation) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pdf_pass", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__pdf_pass(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddStringConstant(m, "MUPDF_VERSION", DOCPARSE_MUPDF_VERSION) < 0 ||
              PyModule_AddIntConstant(m, "API", 4) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
