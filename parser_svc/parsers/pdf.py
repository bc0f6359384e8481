"""PDF → ReadingPackage, page by page with pymupdf.

Each page: the text layer's blocks in reading order; if the page has no usable text but shows
images (a scan), it is rendered and OCR'd instead (mixed documents OCR only such pages); its
images become assets; its tables are found from its rules and word boxes
(pdf_table_structure.py) and joined where one continues on the next page (pdf_table_pages.py).

Failures are precise: PASSWORD_REQUIRED / WRONG_PASSWORD for encrypted files, CORRUPT_DOCUMENT
for a file that cannot be opened, whose page count cannot be read, that has 0 pages, or that
had to be repaired and still yields nothing; DOCUMENT_TOO_LARGE over the page cap. A repaired
file that yields text succeeds with a warning.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace

import pymupdf
from pymupdf import mupdf

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    ParseFailure,
    ParseOptions,
    ProgressFn,
    corrupt,
    page_ranges,
    pdf_split,
    safe,
    too_large,
)
from parser_svc.parsers.password import candidates
from parser_svc.parsers.pdf_chunks import read_split
from parser_svc.parsers.pdf_headings import mark_structure
from parser_svc.parsers.pdf_pages import Reading, read_pages
from parser_svc.parsers.pdf_split import ForkRange
from parser_svc.parsers.pdf_table_pages import join_continued_tables

PDF_PERM_COPY = 1 << 4  # bit 5 of /P: copy or extract text


# A forked parse child ends with os._exit right after its one parse (parser_svc.child.zygote): there
# the document is kept until the exit instead of closed, because closing frees each object
# mupdf loaded, one by one (22 ms of CPU for the corpus's 8 files, 14 ms for one 2 MB file
# with attachments: bench/README.md), and the exit drops the process's memory wholesale
# anyway. Everywhere else (tests, the fork server's warm-up, a spawned child) it is closed.
_kept_until_exit: list[pymupdf.Document] | None = None


def keep_documents_until_exit() -> None:
    """For a process that ends with os._exit after its parse: documents stay open."""
    global _kept_until_exit
    _kept_until_exit = []


@contextlib.contextmanager
def _opened(doc: pymupdf.Document) -> Iterator[pymupdf.Document]:
    try:
        yield doc
    finally:
        if _kept_until_exit is None:
            doc.close()
        else:
            _kept_until_exit.append(doc)


def parse_pdf(
    data: bytes, progress: ProgressFn, options: ParseOptions, fork: ForkRange | None = None
) -> rp.ReadingPackage:
    """The package of a PDF; a long one's page ranges are read by other processes when
    `fork` starts them (the parse child's does; without it every page is read here)."""
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    pymupdf.TOOLS.mupdf_display_errors(False)
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as err:
        raise corrupt(f"the PDF cannot be opened: {err}") from err
    with _opened(doc):
        package = rp.ReadingPackage(content_type="pdf")
        if doc.needs_pass:
            _authenticate(doc, options.password)
            package.decrypted = True
        wanted = _wanted(doc, options, package)
        total = sum(len(pages) for pages in wanted)  # the pages read
        if package.decrypted and not doc.permissions & PDF_PERM_COPY:
            package.warnings.append(
                "the document's permissions forbid copying text; it was extracted because the "
                "user password was supplied"
            )
        _metadata(doc, package)
        reading = Reading.of(doc, package, options)
        progress(0, total, "text")
        _all_pages(reading, wanted, progress, fork)
        reading.assets.finish()
        state = reading.state
        join_continued_tables(doc, package)  # tables broken across pages
        repaired = pymupdf.TOOLS.mupdf_warnings().strip()
        if repaired:
            lines = repaired.splitlines()
            package.warnings.append(
                safe(
                    f"the PDF is damaged and was repaired ({len(lines)} warnings; "
                    f"first: {lines[0]})"
                )
            )
        if state.garbage_pages:
            package.warnings.append(_garbage_warning(state.garbage_pages))
        package.warnings.extend(safe(w) for w in state.warnings)
        chars = sum(len(page.text) for page in package.pages)
        if chars == 0:
            if repaired or state.failed_pages == total:
                raise corrupt(
                    "the PDF is damaged: it was repaired but yields no text"
                    + (f" ({state.failed_pages} unreadable pages)" if state.failed_pages else "")
                )
            if not state.image_pages:
                package.warnings.append("the document contains no text and no images")
            else:
                package.warnings.append("no text was found, not even by OCR of the images")
        return package


def warm_up(ocr_scripts: tuple[str, ...] | None = None) -> rp.ReadingPackage:
    """The package of a small PDF made here (base-14 text, a ruled table): run once by the fork
    server (parser_svc.child.zygote) so that its children start with mupdf set up, and with the OCR
    models of `ocr_scripts` loaded (ocr.warm_up; None: every script's). The fork server counts
    a child's memory limit from where a spawned child would apply it, so what is preloaded here
    gives no child extra room."""
    from parser_svc.parsers import ocr

    ocr.warm_up(ocr_scripts)
    _colour_links()
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Warm-up page 1", fontsize=14)
    page.insert_textbox(pymupdf.Rect(72, 100, 520, 200), "Body text. " * 20, fontname="tiro")
    for i in range(3):
        page.draw_line((72, 220 + 20 * i), (300, 220 + 20 * i))
        page.draw_line((72 + 114 * i, 220), (72 + 114 * i, 260))
    page.insert_text((80, 235), "a", fontsize=9)
    page.insert_text((200, 255), "b", fontsize=9)
    data = doc.tobytes()
    doc.close()
    return parse_pdf(data, lambda *_: None, ParseOptions.defaults())


def _colour_links() -> None:
    """mupdf's colour links (lcms transforms) from the device gray, CMYK and Lab colour spaces
    to sRGB, for single colours and for images, built here once: a page that meets one of them
    (a gray image, a CMYK line) builds it on first use, which in a forked child means every
    job (a few ms each: bench/README.md). A document's own ICC profiles still build theirs."""
    rgb = mupdf.fz_device_rgb()
    params = mupdf.FzColorParams(mupdf.fz_default_color_params)
    none = mupdf.FzColorspace()
    for space in (mupdf.fz_device_gray(), mupdf.fz_device_cmyk(), mupdf.fz_device_lab()):
        mupdf.fz_convert_color(space, [0.5] * mupdf.fz_colorspace_n(space), rgb, none, params)
        pixmap = mupdf.fz_new_pixmap(space, 1, 1, mupdf.FzSeparations(), 0)
        mupdf.fz_clear_pixmap(pixmap)
        mupdf.fz_convert_pixmap(pixmap, rgb, none, mupdf.FzDefaultColorspaces(), params, 1)


def _authenticate(doc: pymupdf.Document, password: str) -> None:
    tries = candidates(password)
    if not tries:
        raise ParseFailure(
            ErrorReason.PASSWORD_REQUIRED, "the PDF is encrypted and needs a password"
        )
    for candidate in tries:
        if doc.authenticate(candidate):
            return
    raise ParseFailure(ErrorReason.WRONG_PASSWORD, "the password does not open this PDF")


def _metadata(doc: pymupdf.Document, package: rp.ReadingPackage) -> None:
    meta = doc.metadata or {}
    package.metadata.CopyFrom(
        rp.DocumentMetadata(
            title=safe(meta.get("title") or ""),
            author=safe(meta.get("author") or ""),
            subject=safe(meta.get("subject") or ""),
            creator=safe(meta.get("creator") or ""),
            producer=safe(meta.get("producer") or ""),
        )
    )
    for key in ("keywords", "creationDate", "modDate", "format", "encryption"):
        if meta.get(key):
            package.metadata.extra[key] = safe(str(meta[key]))


def _wanted(
    doc: pymupdf.Document, options: ParseOptions, package: rp.ReadingPackage
) -> list[range]:
    """The 0-based page ranges to read (the job's selection, or every page), the document's
    page count said in the package; CORRUPT_DOCUMENT for no pages, DOCUMENT_TOO_LARGE over
    the page limit (counting the pages read), PAGE_RANGE_PAST_END."""
    try:
        total = doc.page_count
    except Exception as err:
        raise corrupt(f"the PDF's page count cannot be read: {err}") from err
    if total <= 0:
        raise corrupt("the PDF has no pages")
    wanted = _selected(options.pages, total)
    package.document_page_count = total
    package.page_selection = options.pages
    count = sum(len(pages) for pages in wanted)
    if count > options.max_pages:
        asked = f" (of {total}) asked" if options.pages else ""
        raise too_large(f"the PDF has {count} pages{asked}; the limit is {options.max_pages}")
    return wanted


def _selected(pages: str, total: int) -> list[range]:
    """The 0-based page ranges the job asked for (every page when it named none);
    PAGE_RANGE_PAST_END when it names a page past the document's last."""
    try:
        selection = page_ranges.parse(pages)
    except page_ranges.PageRangeError as err:  # checked at submit; a parse run by hand
        raise ParseFailure(ErrorReason.INVALID_PAGE_RANGE, str(err)) from err
    beyond = page_ranges.past_end(selection, total)
    if beyond:
        raise ParseFailure(
            ErrorReason.PAGE_RANGE_PAST_END,
            page_ranges.past_end_message(pages, beyond, total),
        )
    return page_ranges.indexes(selection, total)


def _plan(reading: Reading, wanted: list[range], fork: ForkRange | None) -> list[tuple[range, int]]:
    """The chunks to read, in page order, each with the process that reads it (0: here). One
    wanted range (every page, or one range asked) is dealt out to the free cores
    (pdf_split.plan); several asked ranges are all read here, one after the other."""
    options = reading.options
    if len(wanted) > 1 or options.page_delay_ms or fork is None:
        return [(pages, 0) for pages in wanted]  # no siblings, or the test hook pacing one
    start, count = wanted[0].start, len(wanted[0])
    plan = pdf_split.plan(count, options.page_processes, options.pdf_split_min_pages)
    return [(range(start + r.start, start + r.stop), owner) for r, owner in plan]


def _all_pages(
    reading: Reading, wanted: list[range], progress: ProgressFn, fork: ForkRange | None
) -> None:
    """The pages asked (`wanted`), in order: read here, or by sibling processes (`fork`) too
    when the document is long and cores are free (pdf_split.py), each chunk then added as
    this process would have read it, or read here again when it cannot be."""
    options, package = reading.options, reading.package
    plan = _plan(reading, wanted, fork)
    processes = 1 + max(owner for _, owner in plan)
    if processes == 1 or fork is None:
        total = sum(len(pages) for pages in wanted)
        for pages, _ in plan:
            read_pages(
                reading, pages, lambda _d, _t, stage: progress(len(package.pages), total, stage)
            )
    else:  # the OCR threads are shared out among the processes
        threads = max(1, options.ocr_page_threads // processes)
        reading.options = replace(options, ocr_page_threads=threads)
        read_split(reading, [pages for pages, _ in plan], processes, progress, fork)
    # Headings, title and page furniture: once every page is in, whatever process read it.
    mark_structure(package, reading.state.looks, _outline(reading.doc, package))


def _outline(doc: pymupdf.Document, package: rp.ReadingPackage) -> list[list[object]]:
    """The document's outline (level, title, page number), or [] (with a warning) when it
    cannot be read."""
    try:
        return list(doc.get_toc(simple=True))
    except Exception as err:
        package.warnings.append(safe(f"the document outline cannot be read: {err}"))
        return []


def _garbage_warning(pages: list[tuple[int, str]]) -> str:
    numbers = [str(n) for n, _why in pages]
    shown = ", ".join(numbers[:20]) + (", ..." if len(numbers) > 20 else "")
    return (
        f"{len(pages)} page{'s' if len(pages) > 1 else ''} ({shown}) had an unreadable text "
        f"layer and {'were' if len(pages) > 1 else 'was'} read by OCR instead (page "
        f"{pages[0][0]}: {pages[0][1]})"
    )
