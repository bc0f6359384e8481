"""Merged cell ranges of an XLS (BIFF) workbook, which xlrd reports only when it also loads
every cell's formatting (formatting_info=True, slower and larger).

Instead the workbook stream is walked record by record (4-byte headers, no record decoded but
BOUNDSHEET and MERGEDCELLS): the globals' BOUNDSHEET records give each worksheet's offset, and
each worksheet's substream (nested chart substreams skipped) its MERGEDCELLS records, each a
count and that many (first row, last row, first column, last column) 0-based ranges.
"""

from __future__ import annotations

import struct

BOF_CODES = frozenset({0x0009, 0x0209, 0x0409, 0x0809})
EOF = 0x000A
BOUNDSHEET = 0x0085
MERGEDCELLS = 0x00E5
WORKSHEET = 0
MAX_RANGES = 100_000


def column_name(index: int) -> str:
    """0 → "A", 25 → "Z", 26 → "AA"."""
    name = ""
    index += 1
    while index > 0:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def _records(mem: bytes, pos: int) -> list[tuple[int, int, int]]:
    """(code, body offset, body length) of the substream starting at the BOF at `pos`, up to
    its EOF, without the records of nested substreams."""
    out: list[tuple[int, int, int]] = []
    depth, end = 0, len(mem)
    while pos + 4 <= end:
        code, length = struct.unpack_from("<HH", mem, pos)
        body = pos + 4
        pos = body + length
        if code in BOF_CODES:
            depth += 1
            continue
        if code == EOF:
            depth -= 1
            if depth <= 0:
                break
            continue
        if depth == 1 and code in (BOUNDSHEET, MERGEDCELLS):
            out.append((code, body, length))
    return out


def worksheet_merges(mem: bytes, base: int = 0) -> list[list[str]]:
    """For each worksheet in workbook order (chart, macro and module sheets left out, as xlrd
    leaves them out), its merged ranges in A1 notation ("A1:C1")."""
    sheets: list[list[str]] = []
    try:
        for code, body, length in _records(mem, base):
            if code != BOUNDSHEET or length < 6:
                continue
            offset, _visibility, kind = struct.unpack_from("<iBB", mem, body)
            if kind == WORKSHEET:
                sheets.append(_ranges(mem, base + offset))
    except struct.error:
        return sheets
    return sheets


def _ranges(mem: bytes, pos: int) -> list[str]:
    ranges: list[str] = []
    if pos < 0 or pos >= len(mem):
        return ranges
    for code, body, length in _records(mem, pos):
        if code != MERGEDCELLS or length < 2:
            continue
        (count,) = struct.unpack_from("<H", mem, body)
        count = min(count, (length - 2) // 8)
        for index in range(count):
            r0, r1, c0, c1 = struct.unpack_from("<HHHH", mem, body + 2 + 8 * index)
            first = f"{column_name(c0)}{r0 + 1}"
            ranges.append(f"{first}:{column_name(c1)}{r1 + 1}")
            if len(ranges) >= MAX_RANGES:
                return ranges
    return ranges
