"""Content sniffing: the document type comes from the bytes, never from the file name."""

from __future__ import annotations

import io
import zipfile

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def detect_type(content: bytes) -> str | None:
    """ "pdf", "docx", "xlsx", "pptx", "ole" (DOC / XLS / encrypted OOXML) or None."""
    head = content[:1024]
    if b"%PDF-" in head:
        return "pdf"
    if content.startswith(OLE_MAGIC):
        return "ole"
    if content.startswith(b"PK\x03\x04"):
        try:
            names = set(zipfile.ZipFile(io.BytesIO(content)).namelist())
        except zipfile.BadZipFile:
            return None
        for prefix, kind in (("word/", "docx"), ("xl/", "xlsx"), ("ppt/", "pptx")):
            if any(name.startswith(prefix) for name in names):
                return kind
    return None
