/* page_lines(ctx, stext_page) -> [[(x0, y0, x1, y1, text, size, bold, chars), ...], ...]
 * The page's text blocks that have a line with text, each the list of its lines' summaries
 * (page_lines.c). */
#ifndef DOCPARSE_PAGE_LINES_H
#define DOCPARSE_PAGE_LINES_H
#include <Python.h>

PyObject *page_lines(PyObject *self, PyObject *args);

/* page_segments(ctx, stext_page, gap_ems) -> [(x0, y0, x1, y1, text), ...]
 * Each text line's words (as pymupdf's extractWORDS cuts them) joined into runs where the gap
 * between two words is at most gap_ems of the second one's height, each with the box of its
 * words: the segments the borderless
 * table search reads (pdf_stream_tables.py). */
PyObject *page_segments(PyObject *self, PyObject *args);

#endif
