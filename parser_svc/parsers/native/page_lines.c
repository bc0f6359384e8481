/*
 * A text page's lines as the structure pass reads them, without pymupdf's dict.
 *
 * parser_svc/parsers/pdf_blocks.py reads each text line of a page as one summary: its box, its
 * text, the font size most of its characters have and whether most of them are bold. From
 * pymupdf that takes `TextPage.extractDICT()`, which builds a Python dict per block, line and
 * span (font name, colour, ascender, origin, ...) only for the summary to be computed from
 * them in Python: on text-heavy pages it costs about as much as the page's run itself.
 *
 * page_lines() walks the fz_stext_page once and builds the summaries directly, reproducing
 * what extractDICT would have shown the Python summary (pymupdf 1.28's JM_make_textpage_dict
 * and JM_make_spanlist): blocks and lines outside the page are skipped, a character counts
 * when its box overlaps the page, spans break where the size, the font's flags (superscript,
 * italic, serif, monospaced, bold), the character flags (but "synthetic"), the colour or the
 * font's name change, a line's box is the union of its spans' boxes, and the line's last span
 * is dropped when its box is empty. The Python fallback (pdf_blocks._line) computes the same
 * summary from extractDICT; tests/parser_svc/parsers/test_page_lines.py holds the two equal.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <mupdf/fitz.h>

#include "page_lines.h"

#define MAX_SIZES 32 /* distinct sizes in one line; more are counted under the last */

/* What a font shows a span: its name and flags (consecutive characters mostly share a font). */
typedef struct {
    fz_font *font;
    const char *name;
    int flags;
} font_look;

typedef struct {
    double size;
    Py_ssize_t count;
} size_count;

typedef struct {
    Py_UCS4 *text;
    Py_ssize_t len, cap;
    size_count sizes[MAX_SIZES];
    int nsizes;
    Py_ssize_t bold;
    font_look look;
} line_acc;

typedef struct {
    float size;
    int flags;
    int char_flags;
    unsigned argb;
    const char *font;
} style_t;

/* What pymupdf's JM_font_name shows: the name without a subset prefix ("ABCDEF+"). */
static const char *font_name(fz_context *ctx, fz_font *font)
{
    const char *name = fz_font_name(ctx, font);
    const char *plus = strchr(name, '+');
    return (plus && plus - name == 6) ? plus + 1 : name;
}

static int name_says_bold(const char *name)
{
    for (const char *p = name; *p; p++)
        if (strncasecmp(p, "bold", 4) == 0)
            return 1;
    return 0;
}

/* pymupdf's span flags: superscript 1, italic 2, serif 4, monospaced 8, bold 16. */
static int font_flags(fz_context *ctx, fz_stext_line *line, fz_stext_char *ch, font_look *look)
{
    if (look->font != ch->font) {
        look->font = ch->font;
        look->name = font_name(ctx, ch->font);
        look->flags = fz_font_is_italic(ctx, ch->font) * 2 + fz_font_is_serif(ctx, ch->font) * 4 +
                      fz_font_is_monospaced(ctx, ch->font) * 8 +
                      fz_font_is_bold(ctx, ch->font) * 16;
    }
    int flags = look->flags;
    if (line->wmode == 0 && line->dir.x == 1 && line->dir.y == 0)
        flags += ch->origin.y < line->first_char->origin.y - ch->size * 0.1f;
    return flags;
}

static fz_rect char_box(fz_stext_line *line, fz_stext_char *ch)
{
    fz_rect r = fz_rect_from_quad(ch->quad);
    if (line->wmode && r.y1 < r.y0 + ch->size)
        r.y0 = r.y1 - ch->size;
    return r;
}

static int overlaps(fz_rect a, fz_rect b)
{
    return !(a.x0 >= b.x1 || a.y0 >= b.y1 || a.x1 <= b.x0 || a.y1 <= b.y0);
}

static int push_char(line_acc *acc, int c)
{
    if (acc->len == acc->cap) {
        Py_ssize_t cap = acc->cap ? acc->cap * 2 : 256;
        Py_UCS4 *grown = PyMem_Realloc(acc->text, (size_t)cap * sizeof(Py_UCS4));
        if (!grown)
            return -1;
        acc->text = grown;
        acc->cap = cap;
    }
    if (c < 0 || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        c = 0xFFFD;
    acc->text[acc->len++] = (Py_UCS4)c;
    return 0;
}

/* A span's characters count toward its size (rounded to 0.1 as the fallback rounds) and, when
 * its font is bold or named so, toward the line's bold ones: the ones that are not spaces. */
static void count_span(line_acc *acc, Py_ssize_t start, const style_t *style)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t i = start; i < acc->len; i++)
        count += !Py_UNICODE_ISSPACE(acc->text[i]);
    double size = floor((double)style->size * 10.0 + 0.5) / 10.0;
    int i = 0;
    while (i < acc->nsizes && acc->sizes[i].size != size)
        i++;
    if (i == acc->nsizes) {
        if (acc->nsizes == MAX_SIZES)
            i = MAX_SIZES - 1;
        else
            acc->sizes[acc->nsizes++] = (size_count){size, 0};
    }
    acc->sizes[i].count += count;
    if ((style->flags & 16) || name_says_bold(style->font))
        acc->bold += count;
}

static int same_style(const style_t *a, const style_t *b)
{
    return a->size == b->size && a->flags == b->flags && a->char_flags == b->char_flags &&
           a->argb == b->argb && (a->font == b->font || strcmp(a->font, b->font) == 0);
}

/* The line's summary tuple, Py_None when it has no text but spaces, NULL on error. */
static PyObject *line_summary(fz_context *ctx, fz_stext_line *line, fz_rect page, int infinite,
                              line_acc *acc)
{
    acc->len = 0;
    acc->nsizes = 0;
    acc->bold = 0;
    fz_rect line_rect = fz_empty_rect, span_rect = fz_empty_rect;
    style_t style = {-1, 0, 0, 0, ""};
    int open = 0;
    Py_ssize_t span_start = 0;
    for (fz_stext_char *ch = line->first_char; ch; ch = ch->next) {
        fz_rect r = char_box(line, ch);
        if (!infinite && !overlaps(page, r))
            continue;
        if (!ch->font)
            continue; /* mupdf gives every character its font; pymupdf assumes it too */
        int flags = font_flags(ctx, line, ch, &acc->look);
        style_t now = {ch->size, flags, ch->flags & ~FZ_STEXT_SYNTHETIC, ch->argb,
                       acc->look.name};
        if (!open || !same_style(&now, &style)) {
            if (open) {
                count_span(acc, span_start, &style);
                line_rect = fz_union_rect(line_rect, span_rect);
            }
            open = 1;
            style = now;
            span_rect = r;
            span_start = acc->len;
        }
        span_rect = fz_union_rect(span_rect, r);
        if (push_char(acc, ch->c) < 0)
            return PyErr_NoMemory();
    }
    if (open) {
        if (!fz_is_empty_rect(span_rect)) {
            count_span(acc, span_start, &style);
            line_rect = fz_union_rect(line_rect, span_rect);
        } else {
            acc->len = span_start; /* pymupdf leaves the last span out */
        }
    }
    Py_ssize_t first = 0, last = acc->len;
    while (first < last && Py_UNICODE_ISSPACE(acc->text[first]))
        first++;
    while (last > first && Py_UNICODE_ISSPACE(acc->text[last - 1]))
        last--;
    if (first == last)
        Py_RETURN_NONE;
    Py_ssize_t chars = 0;
    int best = 0;
    for (int i = 0; i < acc->nsizes; i++) {
        chars += acc->sizes[i].count;
        if (acc->sizes[i].count > acc->sizes[best].count)
            best = i;
    }
    PyObject *text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, acc->text + first,
                                               last - first);
    if (!text)
        return NULL;
    double size = acc->nsizes ? acc->sizes[best].size : 0.0;
    return Py_BuildValue("(ddddNdOn)", (double)line_rect.x0, (double)line_rect.y0,
                         (double)line_rect.x1, (double)line_rect.y1, text, size,
                         acc->bold * 2 > chars ? Py_True : Py_False, chars);
}

static PyObject *block_lines(fz_context *ctx, fz_stext_block *block, fz_rect page, int infinite,
                             line_acc *acc)
{
    PyObject *lines = PyList_New(0);
    if (!lines)
        return NULL;
    for (fz_stext_line *line = block->u.t.first_line; line; line = line->next) {
        if (!infinite && fz_is_empty_rect(fz_intersect_rect(page, line->bbox)))
            continue;
        PyObject *summary = line_summary(ctx, line, page, infinite, acc);
        if (!summary) {
            Py_DECREF(lines);
            return NULL;
        }
        int failed = summary != Py_None && PyList_Append(lines, summary) < 0;
        Py_DECREF(summary);
        if (failed) {
            Py_DECREF(lines);
            return NULL;
        }
    }
    return lines;
}

PyObject *page_lines(PyObject *self, PyObject *args)
{
    unsigned long long ctx_ptr, stext_ptr;
    if (!PyArg_ParseTuple(args, "KK", &ctx_ptr, &stext_ptr))
        return NULL;
    fz_context *ctx = (fz_context *)(uintptr_t)ctx_ptr;
    fz_stext_page *stext = (fz_stext_page *)(uintptr_t)stext_ptr;
    if (!ctx || !stext) {
        PyErr_SetString(PyExc_ValueError, "null pointer");
        return NULL;
    }
    fz_rect page = stext->mediabox;
    int infinite = fz_is_infinite_rect(page);
    line_acc acc;
    memset(&acc, 0, sizeof acc);
    PyObject *blocks = PyList_New(0);
    for (fz_stext_block *block = stext->first_block; blocks && block; block = block->next) {
        if (block->type != FZ_STEXT_BLOCK_TEXT)
            continue;
        if (!infinite && fz_is_empty_rect(fz_intersect_rect(page, block->bbox)))
            continue;
        PyObject *lines = block_lines(ctx, block, page, infinite, &acc);
        if (!lines || (PyList_GET_SIZE(lines) && PyList_Append(blocks, lines) < 0))
            Py_CLEAR(blocks);
        Py_XDECREF(lines);
    }
    PyMem_Free(acc.text);
    return blocks;
}

/* The segment being built from a line's words: words join it while the gap from its right
 * edge is at most gap_ems of the word's height (pdf_stream_tables.py); its box holds them all. */
typedef struct {
    line_acc word; /* the word's characters (only its text is used) */
    line_acc seg;  /* the segment's text */
    fz_rect word_box;
    int open;
    double x0, y0, x1, y1;
    double gap_ems;
    PyObject *out;
} segmenter;

static int flush_segment(segmenter *s)
{
    if (!s->open)
        return 0;
    s->open = 0;
    PyObject *text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, s->seg.text, s->seg.len);
    if (!text)
        return -1;
    PyObject *item = Py_BuildValue("(ddddN)", s->x0, s->y0, s->x1, s->y1, text);
    if (!item)
        return -1;
    int failed = PyList_Append(s->out, item);
    Py_DECREF(item);
    return failed;
}

/* The word in s->word (its box s->word_box) joins the open segment or starts one. As
 * extractWORDS: a word whose box is empty (zero-width glyphs) is dropped but its box is kept,
 * growing with the next word's characters, within the block, across lines. */
static int add_word(segmenter *s)
{
    fz_rect w = s->word_box;
    Py_ssize_t len = s->word.len;
    s->word.len = 0;
    if (fz_is_empty_rect(w))
        return 0;
    s->word_box = fz_empty_rect;
    double x0 = w.x0, y0 = w.y0, x1 = w.x1, y1 = w.y1;
    if (s->open && x0 - s->x1 <= s->gap_ems * (y1 - y0)) {
        if (push_char(&s->seg, ' ') < 0)
            return -1;
        if (x1 > s->x1)
            s->x1 = x1;
        if (y0 < s->y0) /* a superscript's top too */
            s->y0 = y0;
        if (y1 > s->y1)
            s->y1 = y1;
    } else {
        if (flush_segment(s) < 0)
            return -1;
        s->open = 1;
        s->seg.len = 0;
        s->x0 = x0, s->y0 = y0, s->x1 = x1, s->y1 = y1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        if (push_char(&s->seg, (int)s->word.text[i]) < 0)
            return -1;
    return 0;
}

static int is_delimiter(int c)
{
    return c <= 32 || c == 160 || (c >= 0x202a && c <= 0x202e);
}

/* One line's words, as pymupdf's extractWORDS cuts them (spaces and control characters,
 * no-break space, direction marks; a change between right-to-left and other characters). */
static int line_segments(segmenter *s, fz_stext_line *line, fz_rect page, int infinite)
{
    int last_rtl = 0;
    for (fz_stext_char *ch = line->first_char; ch; ch = ch->next) {
        fz_rect r = char_box(line, ch);
        if (!infinite && !overlaps(page, r))
            continue;
        if (s->word.len == 0 && ch->c == 0x200d)
            continue; /* a zero-width joiner does not start a word */
        int delimiter = is_delimiter(ch->c);
        int rtl = ch->c >= 0x590 && ch->c <= 0x900;
        if (delimiter || rtl != last_rtl) {
            if (s->word.len == 0 && delimiter)
                continue;
            if (add_word(s) < 0)
                return -1;
            if (delimiter)
                continue;
        }
        if (push_char(&s->word, ch->c) < 0)
            return -1;
        last_rtl = rtl;
        s->word_box = fz_union_rect(s->word_box, r);
    }
    if (s->word.len && add_word(s) < 0)
        return -1;
    s->word.len = 0;
    return flush_segment(s);
}

PyObject *page_segments(PyObject *self, PyObject *args)
{
    unsigned long long ctx_ptr, stext_ptr;
    double gap_ems;
    if (!PyArg_ParseTuple(args, "KKd", &ctx_ptr, &stext_ptr, &gap_ems))
        return NULL;
    fz_stext_page *stext = (fz_stext_page *)(uintptr_t)stext_ptr;
    if (!ctx_ptr || !stext) {
        PyErr_SetString(PyExc_ValueError, "null pointer");
        return NULL;
    }
    fz_rect page = stext->mediabox;
    int infinite = fz_is_infinite_rect(page);
    segmenter s;
    memset(&s, 0, sizeof s);
    s.word_box = fz_empty_rect;
    s.gap_ems = gap_ems;
    s.out = PyList_New(0);
    for (fz_stext_block *block = stext->first_block; s.out && block; block = block->next) {
        if (block->type != FZ_STEXT_BLOCK_TEXT)
            continue;
        s.word_box = fz_empty_rect;
        for (fz_stext_line *line = block->u.t.first_line; line; line = line->next)
            if (line_segments(&s, line, page, infinite) < 0) {
                Py_CLEAR(s.out);
                break;
            }
    }
    PyMem_Free(s.word.text);
    PyMem_Free(s.seg.text);
    if (!s.out && !PyErr_Occurred())
        PyErr_NoMemory();
    return s.out;
}
