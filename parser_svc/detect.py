"""Content sniffing: the document type comes from the bytes, never from the file name.

`detect_type` answers one of SUPPORTED or None; `describe` says in words what unsupported
content is (for the INVALID_ARGUMENT message). Containers are looked into, not just their magic:
a ZIP is an Office document only if its parts say so, and an OLE2 (CFB) file may be a Word
document, an Excel workbook or an encrypted DOCX/XLSX/PPTX ("encrypted_ooxml": the
EncryptedPackage stream of an OLE container, not a zip). A truncated container whose kind can
still be told is accepted: its parse then ends FAILED with CORRUPT_DOCUMENT.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ZIP_MAGIC = b"PK\x03\x04"

SUPPORTED = ("pdf", "docx", "xlsx", "pptx", "doc", "xls", "encrypted_ooxml", "ole")

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

# Magic numbers of formats we recognise but do not parse, for a precise rejection message.
_OTHER_MAGIC = (
    (b"\xffWPC", "a WordPerfect document"),
    (b"{\\rtf", "an RTF document"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
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
    """ "pdf", "docx", "xlsx", "pptx", "doc", "xls", "encrypted_ooxml", "ole" (an OLE2
    container too damaged to tell, parsed to a precise failure) or None (unsupported)."""
    return sniff(content).kind


def describe(content: bytes) -> str:
    """What the content is, in words: 'a WordPerfect document', 'a PDF document', ..."""
    return sniff(content).label


def sniff(content: bytes) -> Detection:
    if not content:
        return Detection(None, "empty content")
    head = content[:1024]
    if b"%PDF-" in head:
        return Detection("pdf", "a PDF document")
    if content.startswith(OLE_MAGIC):
        return _sniff_ole(content)
    if content.startswith(ZIP_MAGIC):
        return _sniff_zip(content)
    for magic, label in _OTHER_MAGIC:
        if content.startswith(magic):
            return Detection(None, label)
    return Detection(None, "content of an unrecognised type")


_LABELS = {
    "docx": "a Word document (DOCX)",
    "xlsx": "an Excel workbook (XLSX)",
    "pptx": "a PowerPoint presentation (PPTX)",
    "doc": "a Word 97-2003 document (DOC)",
    "xls": "an Excel 97-2003 workbook (XLS)",
    "encrypted_ooxml": "an encrypted Office document (DOCX/XLSX/PPTX in an OLE container)",
    "ole": "a damaged OLE2 container",
}


def _kind(kind: str) -> Detection:
    return Detection(kind, _LABELS[kind])


def _sniff_zip(content: bytes) -> Detection:
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
        names = archive.namelist()
    except (zipfile.BadZipFile, ValueError, OSError):
        # Truncated or damaged: the local file headers still name the parts.
        names = [
            content[m.start() + 30 : m.start() + 30 + _u16(content, m.start() + 26)].decode(
                "utf-8", "replace"
            )
            for m in re.finditer(re.escape(ZIP_MAGIC), content)
            if m.start() + 30 <= len(content)
        ]
        archive = None
    if archive is not None and "[Content_Types].xml" in names:
        try:
            types = archive.read("[Content_Types].xml")[:1_000_000].decode("utf-8", "replace")
        except (zipfile.BadZipFile, OSError, ValueError, RuntimeError):
            types = ""
        lowered = types.lower()
        for marker, kind in _MAIN_PART_TYPES:
            if marker in lowered:
                return _kind(kind)
    if "mimetype" in names[:3] and archive is not None:
        try:
            mimetype = archive.read("mimetype")[:200].decode("ascii", "replace")
        except (zipfile.BadZipFile, OSError, ValueError, RuntimeError):
            mimetype = ""
        if "opendocument" in mimetype:
            return Detection(None, f"an OpenDocument file ({mimetype})")
        if "epub" in mimetype:
            return Detection(None, "an EPUB book")
    for prefix, kind in _PART_PREFIXES:
        if any(name.startswith(prefix) for name in names):
            return _kind(kind)
    return Detection(None, "a ZIP archive that is not an Office document")


def _u16(data: bytes, offset: int) -> int:
    return int.from_bytes(data[offset : offset + 2], "little") if offset + 2 <= len(data) else 0


_OLE_STREAMS = (
    ("encryptedpackage", "encrypted_ooxml"),
    ("worddocument", "doc"),
    ("workbook", "xls"),
    ("book", "xls"),
)
_OLE_OTHERS = (
    ("powerpoint document", "a PowerPoint 97-2003 presentation (PPT)"),
    ("visiodocument", "a Visio drawing"),
    ("__nameid_version1.0", "an Outlook message (MSG)"),
    ("contents", "an OLE2 container (Works / Publisher / embedded object)"),
)


def _sniff_ole(content: bytes) -> Detection:
    import olefile  # type: ignore[import-untyped]

    try:
        with olefile.OleFileIO(content) as ole:
            streams = {"/".join(entry).lower() for entry in ole.listdir(streams=True)}
    except Exception:  # olefile raises many types on damaged containers
        streams = set()
        # The directory may be cut off; its entries are UTF-16 names in the raw bytes.
        for name, kind in _OLE_STREAMS:
            if name.encode("utf-16-le") in content.lower():
                return _kind(kind)
        return _kind("ole")
    for name, kind in _OLE_STREAMS:
        if name in streams:
            return _kind(kind)
    for name, label in _OLE_OTHERS:
        if any(stream.startswith(name) for stream in streams):
            return Detection(None, label)
    return Detection(None, "an OLE2 container of an unsupported kind")
