"""Document parsers. Each runs inside the parse subprocess, never in a server process.

A parser is `parse_<format>(data, progress, options) -> ReadingPackage` and raises ParseFailure
with a stable reason code for every document it cannot turn into a faithful package.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from docparse_server.cpus import usable_cpus

# pymupdf 2 imports its ONNX layout model (pymupdf.layout) and pymupdf4llm on `import pymupdf`:
# ~0.75 s and ~100 MB per parse child, for analyses these parsers never ask for (tables are
# found from ruled lines). Marking both absent before pymupdf is first imported skips them;
# pymupdf treats them as optional.
if "pymupdf" not in sys.modules:
    for _optional in ("pymupdf.layout", "pymupdf4llm"):
        sys.modules.setdefault(_optional, None)  # type: ignore[arg-type]

ProgressFn = Callable[[int, int, str], None]


class ParseFailure(Exception):
    """A document the parser cannot turn into a package, with its stable reason code."""

    def __init__(self, reason: ErrorReason, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


def too_large(message: str) -> ParseFailure:
    return ParseFailure(ErrorReason.DOCUMENT_TOO_LARGE, message)


def corrupt(message: str) -> ParseFailure:
    return ParseFailure(ErrorReason.CORRUPT_DOCUMENT, message)


class TableBudget:
    """Grid cells of every table of a flowing document (HTML, Markdown, EPUB, RTF, ODF),
    spent before each table is built: DOCUMENT_TOO_LARGE past the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def spend(self, count: int) -> None:
        self.used += count
        if self.used > self.limit:
            raise too_large(f"the document's tables have more than {self.limit} cells")


MB = 1024 * 1024
# What a parse is told when the deployment says nothing. parser_svc.settings, the one place the
# environment is read, defaults its fields to these (DOCPARSE_PARSE_MAX_PAGES, ...); a parse run
# in process or by hand gets them through ParseOptions.defaults().
DEFAULT_MAX_PAGES = 5000
DEFAULT_MAX_UNZIPPED_MB = 1024
DEFAULT_MAX_CELLS = 5_000_000
DEFAULT_MAX_ASSETS = 1000
DEFAULT_MAX_ASSET_MB = 256
DEFAULT_OCR_DPI = 150
DEFAULT_OCR_MAX_SIDE_PX = 2500
DEFAULT_OCR_MIN_CHARS = 8
DEFAULT_PDF_SPLIT_MIN_PAGES = 24
# A job's own OCR resolution (SubmitJobRequest.ocr_dpi) is bounded to this range.
MIN_JOB_OCR_DPI = 72
MAX_JOB_OCR_DPI = 400
# ParseOptions.images and .ocr_mode (the job's ImageMode and OcrMode, by name).
IMAGES_NONE, IMAGES_REFERENCED, IMAGES_ALL = "none", "referenced", "all"
OCR_AUTO, OCR_FORCE, OCR_OFF = "auto", "force", "off"


@dataclass(kw_only=True)
class ParseOptions:
    """What the worker tells the parse child besides the document: one JSON object on the
    child's stdin with the job (`to_json`, `from_json`), never its environment or command line.

    The deployment's part has no defaults on the fields, so no mapping can forget one:
    `Settings.parse_options` maps the settings onto them, `defaults()` the DEFAULT_* constants
    (the settings' own defaults) for parses run in process or by hand."""

    # The deployment (DOCPARSE_ENV) the assets are stored in; named in every Asset.
    deployment: str
    # Over these: DOCUMENT_TOO_LARGE. Over the asset limits: a warning, images dropped.
    max_pages: int
    max_unzipped_bytes: int
    max_cells: int
    max_assets: int
    max_asset_bytes: int
    ocr: bool
    ocr_dpi: int
    ocr_max_side_px: int
    # A page is OCR'd when its text layer has fewer usable characters than this.
    ocr_min_chars: int
    ocr_threads: int
    # Threads that read a PDF's OCR pages at once (pdf_ocr.py).
    ocr_page_threads: int
    pdf_tables: bool
    # A PDF of at least twice this many pages is read by up to `page_processes` processes
    # (pdf_split.py), each a range of at least this many pages; 0 = always one process.
    pdf_split_min_pages: int
    # The antiword program for DOC files; "" = antiword on PATH.
    antiword: str
    # Test and demo hooks (keep 0 and ""): a pause after each page; fault markers whose bytes
    # in a document make the child crash (SIGSEGV) or corrupt its own globals.
    page_delay_ms: int
    fault_segv_marker: str
    fault_corrupt_marker: str

    # The job's own.
    # The submitted password ("" = none); never logged, never written to disk by the child.
    password: str = field(default="", repr=False)
    job_id: str = ""
    # Where the child writes asset files (named by asset id); None = keep no assets.
    assets_dir: Path | None = None
    # BCP-47 language hints for OCR (the job's `languages`); empty = detect the script per page.
    languages: list[str] = field(default_factory=list)
    # Processes that may read the document's pages at once: the cores the replica's other
    # parses leave free, named by the worker per job (1 in a parse run by hand or in process).
    page_processes: int = 1
    # The job's page selection, normalised (page_ranges.py; "" = every page). PDF only.
    pages: str = ""
    # Which images the package carries: IMAGES_NONE, IMAGES_REFERENCED or IMAGES_ALL.
    images: str = "referenced"
    # When pages are OCR'd: OCR_AUTO, OCR_FORCE or OCR_OFF (`ocr` False also means off).
    ocr_mode: str = "auto"
    # The uid and gid a child started by root drops to once its document is open (0: it
    # does not; parser_svc/child/privileges.py).
    child_uid: int = 0
    child_gid: int = 0
    # The child confines the files it may open with Landlock once its document is open
    # (parser_svc/child/landlock.py; Settings.child_landlock).
    landlock: bool = True

    @classmethod
    def defaults(cls, **overrides: Any) -> ParseOptions:
        """The deployment defaults (the DEFAULT_* constants above, which Settings' fields
        default to; never the environment) with `overrides`, for parses run in process or by
        hand: what `Settings().parse_options(**overrides)` gives with no DOCPARSE_* set."""
        options = cls(
            deployment="dev",
            max_pages=DEFAULT_MAX_PAGES,
            max_unzipped_bytes=DEFAULT_MAX_UNZIPPED_MB * MB,
            max_cells=DEFAULT_MAX_CELLS,
            max_assets=DEFAULT_MAX_ASSETS,
            max_asset_bytes=DEFAULT_MAX_ASSET_MB * MB,
            ocr=True,
            ocr_dpi=DEFAULT_OCR_DPI,
            ocr_max_side_px=DEFAULT_OCR_MAX_SIDE_PX,
            ocr_min_chars=DEFAULT_OCR_MIN_CHARS,
            ocr_threads=0,
            ocr_page_threads=overrides.pop("ocr_page_threads", 0) or usable_cpus(),
            pdf_tables=True,
            pdf_split_min_pages=DEFAULT_PDF_SPLIT_MIN_PAGES,
            antiword="",
            page_delay_ms=0,
            fault_segv_marker="",
            fault_corrupt_marker="",
        )
        return replace(options, **overrides)

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ParseOptions:
        """The options `to_json` wrote. A partial object (a child run by hand with `{}`) takes
        the defaults for what it leaves out."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in raw.items() if k in known}
        if values.get("assets_dir"):
            values["assets_dir"] = Path(values["assets_dir"])
        return cls(**values) if known <= values.keys() else cls.defaults(**values)


_MIME_EXT = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/bmp": "bmp",
    "image/tiff": "tif",
    "image/jpx": "jpx",
    "image/jp2": "jp2",
    "image/jbig2": "jb2",
    "image/x-emf": "emf",
    "image/x-wmf": "wmf",
    "image/svg+xml": "svg",
    "image/webp": "webp",
}
EXT_MIME = {ext: mime for mime, ext in _MIME_EXT.items()} | {"jpeg": "image/jpeg"}


def mime_for_ext(ext: str) -> str:
    return EXT_MIME.get(ext.lower().lstrip("."), "application/octet-stream")


class AssetSink:
    """Collects a package's images: writes each distinct one once to `assets_dir` under its
    content-derived id, lists it in `package.assets`, and stops (with a warning) at the limits."""

    def __init__(self, package: rp.ReadingPackage, options: ParseOptions) -> None:
        self.package = package
        self.options = options
        self.ids: dict[str, str] = {}
        self.total_bytes = 0
        self.dropped = 0

    def add(self, data: bytes, mime_type: str, width: int = 0, height: int = 0) -> str:
        """The asset id of `data`, or "" when it is not kept (no store, images none, or over
        a limit)."""
        directory = self.options.assets_dir
        if directory is None or not data or self.options.images == IMAGES_NONE:
            return ""
        sha256 = hashlib.sha256(data).hexdigest()
        if sha256 in self.ids:
            return self.ids[sha256]
        o = self.options
        if len(self.ids) >= o.max_assets or self.total_bytes + len(data) > o.max_asset_bytes:
            self.dropped += 1
            return ""
        ext = _MIME_EXT.get(mime_type, "bin")
        asset_id = f"{sha256[:32]}.{ext}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / asset_id).write_bytes(data)
        self.total_bytes += len(data)
        self.ids[sha256] = asset_id
        self.package.assets.append(
            rp.Asset(
                asset_id=asset_id,
                mime_type=mime_type,
                size_bytes=len(data),
                sha256=sha256,
                deployment=o.deployment,
                job_id=o.job_id,
                width=width,
                height=height,
            )
        )
        return asset_id

    def finish(self) -> None:
        if self.dropped:
            self.package.warnings.append(
                f"{self.dropped} images were not stored: over the limit of "
                f"{self.options.max_assets} images / {self.options.max_asset_bytes} bytes"
            )


def page_text(blocks: list[str]) -> str:
    return "\n\n".join(b for b in blocks if b)


def table_text(rows: list[list[str]]) -> str:
    return "\n".join("\t".join(cell for cell in row) for row in rows)


def make_table(rows: list[list[str]], bbox: rp.BoundingBox | None = None) -> rp.Table:
    table = rp.Table(rows=[rp.TableRow(cells=row) for row in rows])
    if bbox is not None:
        table.bbox.CopyFrom(bbox)
    return table


def safe(text: str) -> str:
    """`text` as valid UTF-8 (libraries hand out lone surrogates from broken files)."""
    if text.isascii():  # most text, told without a copy
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


# How allocation failures under RLIMIT_AS surface from C code: upb (protobuf) answers a failed
# allocation with SystemError "returned NULL without setting an exception" or EncodeError
# "Failed to serialize proto"; mupdf, onnxruntime and libc with their own words.
_OOM_MARKERS = (
    "out of memory",
    "malloc",
    "bad_alloc",
    "cannot allocate",
    "memory error",
    "returned null without setting",
    "failed to serialize proto",
    "failed to allocate",
    # the dynamic loader, when a module imported mid-parse cannot map its shared object under
    # the address-space limit (ImportError)
    "failed to map segment",
)


def is_out_of_memory(err: BaseException) -> bool:
    if isinstance(err, MemoryError):
        return True
    text = f"{type(err).__name__}: {err}".lower()
    return any(marker in text for marker in _OOM_MARKERS)


def describe_error(err: BaseException) -> str:
    """One line about an exception (some libraries put a whole traceback in the message)."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:300]
