"""Which parser reads which detected type, and `parse_detected`: sniff, then parse.

Every kind `detect.sniff` can answer maps here to `module.function(data, progress, options)`
in this package. A container format (an e-mail's attachments) parses its parts through
`parse_detected`, so a part gets every guarantee a submitted document gets.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseFailure, ParseOptions, ProgressFn, corrupt

Parser = Callable[[bytes, ProgressFn, ParseOptions], rp.ReadingPackage]

# kind -> (module of parser_svc.parsers, function)
PARSERS: dict[str, tuple[str, str]] = {
    "pdf": ("pdf", "parse_pdf"),
    "docx": ("docx", "parse_docx"),
    "doc": ("doc", "parse_doc"),
    "xlsx": ("xlsx", "parse_xlsx"),
    "xls": ("xls", "parse_xls"),
    "pptx": ("pptx", "parse_pptx"),
    "png": ("image", "parse_image"),
    "jpeg": ("image", "parse_image"),
    "tiff": ("image", "parse_image"),
    "gif": ("image", "parse_image"),
    "bmp": ("image", "parse_image"),
    "webp": ("image", "parse_image"),
    "html": ("html_page", "parse_html"),
    "markdown": ("markdown_doc", "parse_markdown"),
    "text": ("plain_text", "parse_text"),
    "csv": ("delimited", "parse_csv"),
    "rtf": ("rtf", "parse_rtf"),
    "odt": ("odf_text", "parse_odt"),
    "ods": ("odf_sheet", "parse_ods"),
    "odp": ("odf_slides", "parse_odp"),
    "epub": ("epub", "parse_epub"),
    "eml": ("eml", "parse_eml"),
    "msg": ("msg", "parse_msg"),
}


def parser_for(kind: str) -> Parser:
    """The parser of a detected kind; UNSUPPORTED_FORMAT for a kind this version cannot read."""
    entry = PARSERS.get(kind)
    if entry is None:
        raise ParseFailure(
            ErrorReason.UNSUPPORTED_FORMAT, f"no parser for {kind!r} documents in this version"
        )
    module_name, function = entry
    try:
        module = importlib.import_module(f"parser_svc.parsers.{module_name}")
    except ModuleNotFoundError as err:
        if err.name != f"parser_svc.parsers.{module_name}":
            raise
        raise ParseFailure(
            ErrorReason.UNSUPPORTED_FORMAT, f"no parser for {kind!r} documents in this version"
        ) from err
    parser: Parser = getattr(module, function)
    return parser


def parse_detected(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    """Sniffs `data` and parses it as what it is (an attachment, a decrypted package).
    Content no parser reads: UNSUPPORTED_FORMAT naming what it is."""
    from parser_svc.parsers.detect import sniff

    found = sniff(data)
    if found.kind is None:
        raise ParseFailure(ErrorReason.UNSUPPORTED_FORMAT, f"{found.label} cannot be parsed")
    return parse_kind(found.kind, data, progress, options)


def parse_kind(
    kind: str, data: bytes, progress: ProgressFn, options: ParseOptions
) -> rp.ReadingPackage:
    """`data` parsed as `kind` (what sniffing found), the OLE2 cases included: an encrypted
    Office package is decrypted and parsed as what it holds; a damaged container fails."""
    if kind == "ole":
        raise corrupt("the OLE2 container is damaged: no Word or Excel content can be found")
    if kind == "encrypted_ooxml":
        from parser_svc.parsers.detect import detect_type
        from parser_svc.parsers.office import decrypt

        plain = decrypt(data, options.password, "Office document")
        inner = detect_type(plain)
        if inner not in ("docx", "xlsx", "pptx"):
            raise corrupt("the decrypted content is not a DOCX, XLSX or PPTX package")
        package = parse_kind(inner, plain, progress, options)
        package.decrypted = True
        return package
    return parser_for(kind)(data, progress, options)
