"""Merged cell ranges of an XLSX worksheet, which openpyxl's read-only mode does not expose.

The ranges are the sheet part's <mergeCells> element, after the rows. The part is inflated again
in bounded chunks and the `<mergeCell ref="A1:C1"/>` elements picked out with a pattern (text in
cells cannot contain a raw "<"), so the cost is a second inflate of the part, never a second XML
parse, and memory stays one chunk whatever the sheet's size.
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile

from parser_svc.parsers.office import parse_xml

MAIN_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PKG_REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
MERGE_CELL = re.compile(
    rb'<(?:[\w.-]+:)?mergeCell\b[^<>]{0,200}?\bref="([A-Za-z]{1,3}[0-9]{1,7}'
    rb'(?::[A-Za-z]{1,3}[0-9]{1,7})?)"'
)
CHUNK = 1 << 20
OVERLAP = 512
MAX_RANGES = 100_000


def sheet_parts(archive: zipfile.ZipFile) -> dict[str, str]:
    """Worksheet name → its part's member name, from xl/workbook.xml and its relationships."""
    try:
        workbook = parse_xml(archive.read("xl/workbook.xml"))
        rels = parse_xml(archive.read("xl/_rels/workbook.xml.rels"))
    except Exception:
        return {}
    targets: dict[str, str] = {}
    for rel in rels.iter(f"{{{PKG_REL_NS}}}Relationship"):
        target = rel.get("Target") or ""
        if target.startswith("/"):
            target = target[1:]
        else:
            target = posixpath.normpath(posixpath.join("xl", target))
        targets[rel.get("Id") or ""] = target
    parts: dict[str, str] = {}
    for sheet in workbook.iter(f"{{{MAIN_NS}}}sheet"):
        target = targets.get(sheet.get(f"{{{REL_NS}}}id") or "")
        if target:
            parts[sheet.get("name") or ""] = target
    return parts


def merged_ranges(archive: zipfile.ZipFile, member: str) -> list[str]:
    """The A1 ranges ("A1:C1") a worksheet part declares merged, in document order (at most
    MAX_RANGES); [] when the part is missing or damaged (the cells were read already)."""
    ranges: list[str] = []
    try:
        with archive.open(member) as stream:
            tail = b""
            while len(ranges) < MAX_RANGES:
                chunk = stream.read(CHUNK)
                if not chunk:
                    break
                buffer = tail + chunk
                if b"mergeCell" not in buffer:  # a plain search, much faster than the pattern
                    tail = buffer[-OVERLAP:]
                    continue
                for match in MERGE_CELL.finditer(buffer):
                    if match.end() > len(tail):  # matches inside the tail were taken before
                        ranges.append(match.group(1).decode("ascii").upper())
                tail = buffer[-OVERLAP:]
    except (KeyError, zipfile.BadZipFile, OSError, ValueError, EOFError):
        return ranges
    return ranges[:MAX_RANGES]


class WorkbookMerges:
    """Merged ranges per worksheet name, read on demand from the workbook's bytes."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.parts = sheet_parts(archive)

    def of(self, name: str) -> list[str]:
        member = self.parts.get(name)
        return merged_ranges(self.archive, member) if member else []

    def close(self) -> None:
        self.archive.close()


def open_merges(data: bytes) -> WorkbookMerges | None:
    """A reader of `data`'s merged ranges, None when it is not a readable zip."""
    try:
        return WorkbookMerges(zipfile.ZipFile(io.BytesIO(data)))
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
