"""Content sniffing: the document type comes from the bytes, never from the file name.

`detect_type` answers one of SUPPORTED or None; `describe` says in words what unsupported
content is (for the INVALID_ARGUMENT message). Containers are looked into, not just their magic:
a ZIP is an Office document only if its parts say so, and an OLE2 (CFB) file may be a Word
document, an Excel workbook, an Outlook message or an encrypted DOCX/XLSX/PPTX
("encrypted_ooxml": the EncryptedPackage stream of an OLE container, not a zip); a zip with a
`mimetype` member may be OpenDocument or EPUB. Images and RTF are told by their magic numbers;
what has none is looked at as text (detect_text.py: HTML, e-mail, CSV/TSV, Markdown, plain
text). A truncated container whose kind can still be told is accepted: its parse then ends
FAILED with CORRUPT_DOCUMENT.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from mmap import mmap

from parser_svc.parsers.detect_text import TEXT_KINDS, sniff_text

# What sniffing reads: an upload's bytes, or a memory map of a stored one.
Buffer = bytes | mmap

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ZIP_MAGIC = b"PK\x03\x04"

SUPPORTED = (
    "pdf",
    "docx",
    "xlsx",
    "pptx",
    "doc",
    "xls",
    "encrypted_ooxml",
    "ole",
    "png",
    "jpeg",
    "tiff",
    "gif",
    "bmp",
    "webp",
    "rtf",
    "odt",
    "ods",
    "odp",
    "epub",
    "msg",
    *TEXT_KINDS,
)

_MAIN_PART_TYPES = (
    ("wordprocessingml.document.main", "docx"),
    ("wordprocessingml.template.main", "docx"),
    ("ms-word.document.macroenabled.main", "docx"),
    ("ms-word.template.macroenabledtemplate.main", "docx"),
    ("spreadsheetml.sheet.main", "xlsx"),
    ("spreadsheetml.template.main", "xlsx"),
    ("ms-excel.sheet.macroenabled.main", "xlsx"),
    ("ms-excel.template.macroenabled.main", "xlsx"),
    ("presentationml.presentation.main", "pptx"),
    ("presentationml.slideshow.main", "pptx"),
    ("presentationml.template.main", "pptx"),
    ("ms-powerpoint.presentation.macroenabled.main", "pptx"),
    ("ms-powerpoint.slideshow.macroenabled.main", "pptx"),
)
_PART_PREFIXES = (("word/", "docx"), ("xl/", "xlsx"), ("ppt/", "pptx"))

# Magic numbers of formats read from their first bytes.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"II+\x00", "tiff"),  # BigTIFF
    (b"MM\x00+", "tiff"),
    (b"{\\rtf", "rtf"),
)

# Magic numbers of formats we recognise but do not parse, for a precise rejection message.
_OTHER_MAGIC = (
    (b"\xffWPC", "a WordPerfect document"),
    (b"%!PS", "a PostScript document"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"Rar!", "a RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
)


@dataclass(frozen=True)
class Detection:
    """`kind` is one of SUPPORTED, or None with `label` saying what the content is."""

    kind: str | None
    label: str


def detect_type(content: bytes) -> str | None:
    """One of SUPPORTED ("ole": an OLE2 container too damaged to tell, parsed to a precise
    failure) or None (unsupported)."""
    return sniff(content).kind


def describe(content: bytes) -> str:
    """What the content is, in words: 'a WordPerfect document', 'a PDF document', ..."""
    return sniff(content).label


def sniff(content: Buffer) -> Detection:
    """`content`: the upload's bytes, or a memory map of a stored upload (only the pages
    looked at are read)."""
    if not content:
        return Detection(None, "empty content")
    head = content[:1024]
    if b"%PDF-" in head:
        return Detection("pdf", "a PDF document")
    if content[: len(OLE_MAGIC)] == OLE_MAGIC:
        return _sniff_ole(content)
    if content[: len(ZIP_MAGIC)] == ZIP_MAGIC:
        return _sniff_zip(content)
    for magic, kind in _MAGIC:
        if content[: len(magic)] == magic:
            return _kind(kind)
    if content[:4] == b"RIFF" and content[8:12] == b"WEBP":
        return _kind("webp")
    if content[:2] == b"BM" and _u32(content, 14) in _BMP_HEADER_SIZES:
        return _kind("bmp")
    for magic, label in _OTHER_MAGIC:
        if content[: len(magic)] == magic:
            return Detection(None, label)
    text = sniff_text(content[:_TEXT_WINDOW])
    if text.kind is not None:
        return _kind(text.kind)
    return Detection(None, text.label)


# A BMP's DIB header sizes (BITMAPCOREHEADER to BITMAPV5HEADER): "BM" alone is too weak.
_BMP_HEADER_SIZES = (12, 16, 40, 52, 56, 64, 108, 124)
# How much of a file text sniffing reads.
_TEXT_WINDOW = 64 * 1024


_LABELS = {
    "docx": "a Word document (DOCX)",
    "xlsx": "an Excel workbook (XLSX)",
    "pptx": "a PowerPoint presentation (PPTX)",
    "doc": "a Word 97-2003 document (DOC)",
    "xls": "an Excel 97-2003 workbook (XLS)",
    "encrypted_ooxml": "an encrypted Office document (DOCX/XLSX/PPTX in an OLE container)",
    "ole": "a damaged OLE2 container",
    "png": "a PNG image",
    "jpeg": "a JPEG image",
    "tiff": "a TIFF image",
    "gif": "a GIF image",
    "bmp": "a BMP image",
    "webp": "a WebP image",
    "rtf": "an RTF document",
    "odt": "an OpenDocument text (ODT)",
    "ods": "an OpenDocument spreadsheet (ODS)",
    "odp": "an OpenDocument presentation (ODP)",
    "epub": "an EPUB book",
    "msg": "an Outlook message (MSG)",
    "html": "an HTML page",
    "markdown": "a Markdown document",
    "text": "a plain text document",
    "csv": "a CSV/TSV table",
    "eml": "an e-mail message (EML)",
}


def _kind(kind: str) -> Detection:
    return Detection(kind, _LABELS[kind])


# Sniffing runs in the API process on untrusted bytes, so it is bounded by construction: it
# reads at most this many central-directory entries and inflates at most this many bytes of
# any member (a zip bomb's 1 GiB part costs 64 KiB here; the parse child checks real sizes).
_MAX_ENTRIES = 4096
_MAX_INFLATE = 64 * 1024
_EOCD = b"PK\x05\x06"
_CENTRAL = b"PK\x01\x02"


@dataclass(frozen=True)
class _Member:
    name: str
    header_offset: int  # of its local file header


def _sniff_zip(content: Buffer) -> Detection:
    members = _central_directory(content) or _local_headers(content)
    names = [m.name for m in members]
    by_name = {m.name: m for m in members}
    if "[Content_Types].xml" in by_name:
        types = _inflate_head(content, by_name["[Content_Types].xml"]).decode("utf-8", "replace")
        lowered = types.lower()
        for marker, kind in _MAIN_PART_TYPES:
            if marker in lowered:
                return _kind(kind)
    if "mimetype" in by_name:
        mimetype = _inflate_head(content, by_name["mimetype"])[:200].decode("ascii", "replace")
        mimetype = mimetype.strip().lower()
        for prefix, kind in _ODF_TYPES:
            if mimetype.startswith(prefix):
                return _kind(kind)
        if "opendocument" in mimetype:
            return Detection(None, f"an OpenDocument file ({mimetype})")
        if mimetype == "application/epub+zip":
            return _kind("epub")
    for prefix, kind in _PART_PREFIXES:
        if any(name.startswith(prefix) for name in names):
            return _kind(kind)
    return Detection(None, "a ZIP archive that is not an Office document")


_ODF_TYPES = (
    ("application/vnd.oasis.opendocument.text", "odt"),  # -template, -master too
    ("application/vnd.oasis.opendocument.spreadsheet", "ods"),
    ("application/vnd.oasis.opendocument.presentation", "odp"),
)


def _central_directory(content: Buffer) -> list[_Member]:
    """The first `_MAX_ENTRIES` members named by the central directory; [] when it cannot be
    read (truncated, damaged, ZIP64)."""
    end = content.rfind(_EOCD, max(0, len(content) - 65_557))
    if end < 0 or end + 22 > len(content):
        return []
    offset = _u32(content, end + 16)
    members: list[_Member] = []
    while len(members) < _MAX_ENTRIES and content[offset : offset + 4] == _CENTRAL:
        name_len, extra_len = _u16(content, offset + 28), _u16(content, offset + 30)
        comment_len = _u16(content, offset + 32)
        name = content[offset + 46 : offset + 46 + name_len].decode("utf-8", "replace")
        members.append(_Member(name, _u32(content, offset + 42)))
        offset += 46 + name_len + extra_len + comment_len
    return members


def _local_headers(content: Buffer) -> list[_Member]:
    """Truncated or damaged: the local file headers still name the parts."""
    members: list[_Member] = []
    for match in re.finditer(re.escape(ZIP_MAGIC), content):
        start = match.start()
        if start + 30 > len(content) or len(members) >= _MAX_ENTRIES:
            break
        name = content[start + 30 : start + 30 + _u16(content, start + 26)]
        members.append(_Member(name.decode("utf-8", "replace"), start))
    return members


def _inflate_head(content: Buffer, member: _Member) -> bytes:
    """At most `_MAX_INFLATE` bytes of the member's start; b"" when it cannot be read."""
    start = member.header_offset
    if content[start : start + 4] != ZIP_MAGIC:
        return b""
    method, flags = _u16(content, start + 8), _u16(content, start + 6)
    data = start + 30 + _u16(content, start + 26) + _u16(content, start + 28)
    window = memoryview(content)[data : data + _MAX_INFLATE * 4]
    if flags & 1:  # encrypted member
        return b""
    if method == 0:  # stored: its size, unless a data descriptor after it says it
        size = _u32(content, start + 18) if not flags & 8 else 0
        return bytes(window[: min(size or _MAX_INFLATE, _MAX_INFLATE)])
    if method != 8:
        return b""
    try:
        return zlib.decompressobj(-15).decompress(window, _MAX_INFLATE)
    except zlib.error:
        return b""


def _u16(data: Buffer, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 2], "little") if offset + 2 <= len(data) else 0


def _u32(data: Buffer, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 4], "little") if offset + 4 <= len(data) else 0


_OLE_STREAMS = (
    ("encryptedpackage", "encrypted_ooxml"),
    ("worddocument", "doc"),
    ("workbook", "xls"),
    ("book", "xls"),
)
# An Outlook message's property streams and named-property storage.
_MSG_PREFIXES = ("__substg1.0_", "__nameid_version1.0")
_OLE_OTHERS = (
    ("powerpoint document", "a PowerPoint 97-2003 presentation (PPT)"),
    ("visiodocument", "a Visio drawing"),
    ("contents", "an OLE2 container (Works / Publisher / embedded object)"),
)


def _sniff_ole(content: Buffer) -> Detection:
    import olefile  # type: ignore[import-untyped]

    try:
        with olefile.OleFileIO(content) as ole:
            streams = {"/".join(entry).lower() for entry in ole.listdir(streams=True)}
    except Exception:  # olefile raises many types on damaged containers
        streams = set()
        # The directory may be cut off; its entries are UTF-16 names in the raw bytes.
        for name, kind in (*_OLE_STREAMS, ("__substg1.0_", "msg")):
            if re.search(re.escape(name.encode("utf-16-le")), content, re.IGNORECASE):
                return _kind(kind)
        return _kind("ole")
    for name, kind in _OLE_STREAMS:
        if name in streams:
            return _kind(kind)
    if any(stream.startswith(_MSG_PREFIXES) for stream in streams):
        return _kind("msg")
    for name, label in _OLE_OTHERS:
        if any(stream.startswith(name) for stream in streams):
            return Detection(None, label)
    return Detection(None, "an OLE2 container of an unsupported kind")
