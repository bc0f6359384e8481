"""PDF → ReadingPackage, page by page with pymupdf.

Each page: the text layer's blocks in reading order; if the page has no usable text but shows
images (a scan), it is rendered and OCR'd instead (mixed documents OCR only such pages); its
images become assets; ruled tables are found from the page's vector rules (pdf_tables.py).

Failures are precise: PASSWORD_REQUIRED / WRONG_PASSWORD for encrypted files, CORRUPT_DOCUMENT
for a file that cannot be opened, whose page count cannot be read, that has 0 pages, or that
had to be repaired and still yields nothing; DOCUMENT_TOO_LARGE over the page cap. A repaired
file that yields text succeeds with a warning.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pymupdf
from pymupdf import mupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    AssetSink,
    ParseFailure,
    ParseOptions,
    ProgressFn,
    corrupt,
    describe_error,
    is_out_of_memory,
    make_table,
    mime_for_ext,
    page_text,
    pdf_split,
    safe,
    too_large,
)
from parser_svc.parsers.password import candidates
from parser_svc.parsers.pdf_images import named_images
from parser_svc.parsers.pdf_ocr import OcrPages, PendingPage
from parser_svc.parsers.pdf_pass import Rules, rules_of, text_and_rules
from parser_svc.parsers.pdf_resources import ResourceScans
from parser_svc.parsers.pdf_tables import find_tables
from parser_svc.parsers.textlayer import fonts_without_unicode, strip_replacements
from parser_svc.parsers.textlayer import judge_page as judge_text_layer

TEXT_BLOCK = 0
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


def parse_pdf(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
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
        try:
            total = doc.page_count
        except Exception as err:
            raise corrupt(f"the PDF's page count cannot be read: {err}") from err
        if total <= 0:
            raise corrupt("the PDF has no pages")
        if total > options.max_pages:
            raise too_large(f"the PDF has {total} pages; the limit is {options.max_pages}")
        if package.decrypted and not doc.permissions & PDF_PERM_COPY:
            package.warnings.append(
                "the document's permissions forbid copying text; it was extracted because the "
                "user password was supplied"
            )
        _metadata(doc, package)
        reading = _Reading.of(doc, package, options)
        progress(0, total, "text")
        _all_pages(reading, progress)
        reading.assets.finish()
        state = reading.state
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


def warm_up() -> rp.ReadingPackage:
    """The package of a small PDF made here (base-14 text, a ruled table): run once by the fork
    server (parser_svc.child.zygote) so that its children start with mupdf set up, and with the OCR
    models for Latin script loaded (~0.5 s a job saved; ~60 MB shared copy-on-write; no
    threads). The fork server counts a child's memory limit from where a spawned child would
    apply it, so what is preloaded here gives no child extra room."""
    from parser_svc.parsers import ocr

    ocr.warm_up()
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


class _State:
    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.failed_pages = 0
        self.image_pages = 0
        self.ocr_pages = 0
        # xref → (asset id or "", mime type): each image is stored once per document.
        self.extracted: dict[int, tuple[str, str]] = {}
        # Pages whose text layer was garbage (fonts without a Unicode map), read by OCR instead.
        self.garbage_pages: list[tuple[int, str]] = []  # (page number, why)
        self.font_unicode: dict[int, bool] = {}  # font xref -> has no Unicode map
        self.scans = ResourceScans()  # pages' font and image lists, by resources object
        # Image xref -> MD5 of its decoded pixels: each image is decoded once per document to
        # tell which xref a shown image is (pymupdf's get_image_info(xrefs=True) decodes every
        # image of the page's resources again on every page).
        self.image_digests: dict[int, bytes | None] = {}
        # Images whose extraction failed with a warning (pdf_split: a range read elsewhere).
        self.warned_xrefs: list[int] = []


def _authenticate(doc: pymupdf.Document, password: str) -> None:
    tries = candidates(password)
    if not tries:
        raise ParseFailure("PASSWORD_REQUIRED", "the PDF is encrypted and needs a password")
    for candidate in tries:
        if doc.authenticate(candidate):
            return
    raise ParseFailure("WRONG_PASSWORD", "the password does not open this PDF")


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


def _bbox(rect: Any) -> rp.BoundingBox:
    x0, y0, x1, y1 = rect
    return rp.BoundingBox(x0=x0, y0=y0, x1=x1, y1=y1)


def _usable_chars(text: str) -> int:
    """Characters that are neither whitespace nor U+FFFD (str.split() splits on exactly the
    characters str.isspace() names; this runs in C, a per-character loop did not)."""
    return len("".join(text.split())) - text.count("\ufffd")


@dataclass
class _Reading:
    """One process's reading of a document: what it adds pages, assets and warnings to."""

    doc: pymupdf.Document
    package: rp.ReadingPackage
    options: ParseOptions
    assets: AssetSink
    state: _State

    @classmethod
    def of(
        cls, doc: pymupdf.Document, package: rp.ReadingPackage, options: ParseOptions
    ) -> _Reading:
        return cls(doc, package, options, AssetSink(package, options), _State())


def _all_pages(reading: _Reading, progress: ProgressFn) -> None:
    """Every page, in order: the first range here, the others by forked siblings when the
    document is long and cores are free (pdf_split.py), each added as this process would have
    read it, or read here again when it cannot be."""
    options, package = reading.options, reading.package
    total = reading.doc.page_count
    cut = pdf_split.ranges(total, options.page_processes, options.pdf_split_min_pages)
    if options.page_delay_ms:  # the test hook paces one process's pages
        cut = [range(total)]
    if len(cut) > 1:  # the OCR threads are shared out among the processes
        threads = max(1, options.ocr_page_threads // len(cut))
        reading.options = options = replace(options, ocr_page_threads=threads)

    def read_range(pages: range, report: ProgressFn) -> pdf_split.Part:
        part = pdf_split.Part()
        mine = _Reading.of(reading.doc, part.package, options)
        _read_pages(mine, pages, report)
        state = mine.state
        part.failed_pages, part.image_pages = state.failed_pages, state.image_pages
        part.ocr_pages, part.garbage_pages = state.ocr_pages, state.garbage_pages
        part.warnings, part.warned_xrefs = state.warnings, state.warned_xrefs
        part.extracted, part.dropped_assets = state.extracted, mine.assets.dropped
        return part

    siblings = [pdf_split.fork_sibling(pages, read_range) for pages in cut[1:]]
    shown = 0
    pdf_split.last_processes = 1

    def report(done: int, _total: int, stage: str) -> None:
        nonlocal shown
        for sibling in siblings:
            sibling.poll()
        shown = max(shown, min(total, done + sum(sibling.done for sibling in siblings)))
        progress(shown, total, stage)

    try:
        _read_pages(reading, cut[0], report)
        while siblings:
            sibling = siblings[0]
            message = sibling.finish(lambda: report(len(package.pages), total, "text"))
            siblings.pop(0)
            part = pdf_split.outcome(message)
            if part is not None and _add_part(part, reading):
                pdf_split.last_processes += 1
            else:
                _read_pages(reading, sibling.pages, report)
                _drop_unlisted_assets(reading)  # what the sibling stored and this did not
    finally:
        for sibling in siblings:
            sibling.kill()


def _drop_unlisted_assets(reading: _Reading) -> None:
    """Removes the files of the (per-parse) assets directory that the package does not list."""
    directory = reading.options.assets_dir
    if directory is None or not directory.is_dir():
        return
    listed = {asset.asset_id for asset in reading.package.assets}
    for path in directory.iterdir():
        if path.name not in listed:
            path.unlink(missing_ok=True)


def _add_part(part: pdf_split.Part, reading: _Reading) -> bool:
    """Adds a sibling's range as if read here; False (nothing added) when that cannot be
    told apart from reading it here: an asset limit in play, mupdf warnings (a repair), or a
    warning about an image this process also tried."""
    assets, state, options = reading.assets, reading.state, reading.options
    new = [a for a in part.package.assets if a.sha256 not in assets.ids]
    if (
        part.dropped_assets
        or assets.dropped
        or part.mupdf_warnings
        or any(xref in state.extracted for xref in part.warned_xrefs)
        or len(assets.ids) + len(new) > options.max_assets
        or assets.total_bytes + sum(a.size_bytes for a in new) > options.max_asset_bytes
    ):
        return False
    for asset in new:
        assets.ids[asset.sha256] = asset.asset_id
        assets.total_bytes += asset.size_bytes
    reading.package.assets.extend(new)
    reading.package.pages.extend(part.package.pages)
    state.failed_pages += part.failed_pages
    state.image_pages += part.image_pages
    state.ocr_pages += part.ocr_pages
    state.garbage_pages.extend(part.garbage_pages)
    state.warnings.extend(part.warnings)
    state.warned_xrefs.extend(part.warned_xrefs)
    for xref, named in part.extracted.items():
        state.extracted.setdefault(xref, named)
    return True


def _read_pages(reading: _Reading, pages: range, progress: ProgressFn) -> None:
    """`pages`, in order. A page that needs OCR is read beside the next pages (pdf_ocr.py);
    pages are added to the package, and counted done, in page order."""
    doc, package, options, assets, state = (
        reading.doc, reading.package, reading.options, reading.assets, reading.state
    )  # fmt: skip
    total = doc.page_count
    ocr = OcrPages(options, len(pages))
    # Pages not yet added: each with its OCR in flight (or None) and why it needed OCR.
    waiting: deque[tuple[rp.Page, PendingPage | None, str]] = deque()

    def finish_first() -> None:
        out, pending, garbage = waiting.popleft()
        if pending is not None:
            try:
                out.text = page_text(ocr.finish(pending))
                out.ocr = True
                state.ocr_pages += 1
                if garbage:
                    state.garbage_pages.append((out.number, garbage))
            except Exception as err:
                _page_error(err, out.number - 1, state)
        package.pages.append(out)
        progress(len(package.pages), total, "text")

    def finish_ready() -> None:
        while waiting and waiting[0][1] is None:
            finish_first()

    try:
        for index in pages:
            out, needs_ocr, garbage = _page(doc, index, options, assets, state)
            pending = None
            if needs_ocr:
                while ocr.in_flight >= ocr.threads:
                    finish_first()
                    finish_ready()
                progress(len(package.pages), total, "ocr")
                try:
                    pending = ocr.start(doc[index], out)
                except Exception as err:
                    _page_error(err, index, state)
            waiting.append((out, pending, garbage))
            finish_ready()
        while waiting:
            finish_first()
    finally:
        ocr.close()


def _page(
    doc: pymupdf.Document,
    index: int,
    options: ParseOptions,
    assets: AssetSink,
    state: _State,
) -> tuple[rp.Page, bool, str]:
    """The page without its OCR; whether it needs OCR (its blocks are then left empty for the
    OCR's lines, and the caller reads it) and why its text layer is garbage, if it is."""
    try:
        page = doc[index]
        rect = page.rect
        out = rp.Page(
            number=index + 1, width=rect.width, height=rect.height, rotation=page.rotation
        )
    except Exception as err:
        state.failed_pages += 1
        state.warnings.append(f"page {index + 1} cannot be read: {err}")
        return rp.Page(number=index + 1), False, ""
    try:
        # The page's rules and image count come from the run that reads its text.
        textpage, rules, drawn, image_page = text_and_rules(page)
        texts = _text_blocks(page, textpage, out)
        usable = _usable_chars("".join(texts))
        # A page that draws no image has none to list or store (most pages: no image scan).
        images = _images(doc, page, out, assets, state, usable, image_page) if drawn != 0 else 0
        if images:
            state.image_pages += 1
        garbage = judge_text_layer(
            "".join(texts),
            lambda: fonts_without_unicode(doc, state.scans.fonts(page), state.font_unicode),
        )
        if (images and usable < options.ocr_min_chars) or garbage:
            if options.ocr:
                del out.blocks[:]
                return out, True, garbage
            else:
                state.warnings.append(f"page {index + 1} needs OCR, which is disabled")
                if garbage:
                    texts = [strip_replacements(t) for t in texts]
        if options.pdf_tables:
            for table in _tables(page, textpage, rules, state):
                out.tables.append(table)
        out.text = page_text(texts)
    except Exception as err:
        _page_error(err, index, state)
    return out, False, ""


def _page_error(err: Exception, index: int, state: _State) -> None:
    """A page that cannot be read is a warning; what fails the whole parse is raised."""
    if isinstance(err, ParseFailure | MemoryError):
        raise err
    state.failed_pages += 1
    if is_out_of_memory(err):
        raise too_large(
            f"page {index + 1} exceeded the parse's memory limit ({describe_error(err)})"
        ) from err
    state.warnings.append(f"page {index + 1} cannot be read: {describe_error(err)}")


def _text_blocks(page: pymupdf.Page, textpage: Any, out: rp.Page) -> list[str]:
    texts = []
    add = out.blocks.add  # built in place: append() copies a message built apart (4x slower)
    for x0, y0, x1, y1, text, _no, kind in page.get_text("blocks", sort=True, textpage=textpage):
        if kind != TEXT_BLOCK or not text.strip():
            continue
        clean = safe(text.strip())
        texts.append(clean)
        bbox = add(text=clean, source="text").bbox
        bbox.x0, bbox.y0, bbox.x1, bbox.y1 = x0, y0, x1, y1
    return texts


def _images(
    doc: pymupdf.Document,
    page: pymupdf.Page,
    out: rp.Page,
    assets: AssetSink,
    state: _State,
    usable_chars: int,
    image_page: Any = None,
) -> int:
    """Adds the page's images (stored once per document) and returns how many it shows."""
    shown = 0
    listed = state.scans.images(page)  # pymupdf walks the page's resources each time
    if usable_chars and not listed:
        # No image resources (the quick check); a page without text may still draw inline
        # images, which only the full scan below sees.
        return 0
    for info in named_images(doc, page, listed, image_page, state.image_digests):
        bbox = pymupdf.Rect(info["bbox"])
        if bbox.is_empty or bbox.width < 4 or bbox.height < 4:
            continue
        shown += 1
        xref = int(info.get("xref") or 0)
        if xref <= 0:
            continue  # an inline image: shown (and OCR'd if need be) but not stored
        if xref not in state.extracted:
            state.extracted[xref] = ("", "")
            try:
                image = doc.extract_image(xref)
            except Exception as err:
                state.warnings.append(f"image {xref} cannot be extracted: {err}")
                state.warned_xrefs.append(xref)
                image = None
            if image and image.get("image"):
                mime = mime_for_ext(str(image.get("ext", "")))
                asset_id = assets.add(
                    image["image"],
                    mime,
                    int(image.get("width") or 0),
                    int(image.get("height") or 0),
                )
                state.extracted[xref] = (asset_id, mime)
        asset_id, mime = state.extracted[xref]
        if asset_id:
            out.images.append(
                rp.ImageRef(
                    asset_id=asset_id,
                    bbox=_bbox(bbox),
                    mime_type=mime,
                    width=int(info.get("width") or 0),
                    height=int(info.get("height") or 0),
                )
            )
    return shown


def _garbage_warning(pages: list[tuple[int, str]]) -> str:
    numbers = [str(n) for n, _why in pages]
    shown = ", ".join(numbers[:20]) + (", ..." if len(numbers) > 20 else "")
    return (
        f"{len(pages)} page{'s' if len(pages) > 1 else ''} ({shown}) had an unreadable text "
        f"layer and {'were' if len(pages) > 1 else 'was'} read by OCR instead (page "
        f"{pages[0][0]}: {pages[0][1]})"
    )


def _tables(
    page: pymupdf.Page, textpage: Any, rules: Rules | None, state: _State
) -> list[rp.Table]:
    try:
        if rules is None:  # not read with the text: a second run of the page
            rules = rules_of(page.get_cdrawings())
        if not rules[0]:
            return []
        found = find_tables(rules, lambda: page.get_text("words", textpage=textpage))
    except Exception as err:
        state.warnings.append(f"page {page.number + 1}: table detection failed: {err}")
        return []
    return [
        make_table([[safe(cell) for cell in row] for row in table.rows], _bbox(table.bbox))
        for table in found
    ]
