"""A PDF's page count read at submit, so that a page range past the last page is refused there
(INVALID_ARGUMENT PAGE_RANGE_PAST_END naming the count) instead of ending a job FAILED.

The replica must not open an upload in mupdf (parsing runs only in the confined parse child),
so this reads just what the count needs, in pure Python: the newest trailer's /Root (following
the cross-reference sections from `startxref`: tables, streams, hybrids, /Prev chains), the
catalog's /Pages, that node's /Count (direct, or an object of its own), each object found at
its offset or in its object stream. Every step is bounded (sections followed, bytes inflated,
nesting, a string's length, values read: pdf_objects.py); anything unusual (damage a repair
would mend, encrypted object streams, filters other than Flate, a free or misplaced entry)
answers None: the count is then checked when the parse opens the document, which ends the job
FAILED with the same reason. Where it answers, it answers what mupdf reads for an undamaged
file: the page tree's /Count.
"""

from __future__ import annotations

import re
import zlib
from typing import NamedTuple

from parser_svc.parsers.pdf_objects import (
    OBJ_HEAD,
    Parser,
    Ref,
    Unreadable,
    Value,
    W,
    predicted_row,
    skip,
)

MAX_SECTIONS = 32  # cross-reference sections followed (/Prev, /XRefStm)
MAX_COUNT = 10_000_000  # a larger /Count is damage (mupdf refuses it)
TAIL = 2048  # bytes from the end searched for `startxref`

_STARTXREF = re.compile(rb"startxref" + W + rb"+(\d+)")
_SUBSECTION = re.compile(W + rb"*(\d+) +(\d+) *(?:\r\n|\r|\n)")
_ENTRY = re.compile(rb"(\d{10}) (\d{5}) ([nf])[\r\n ]{2}")


def page_count(data: bytes) -> int | None:
    """The page count of an undamaged PDF, or None when it cannot be read this way."""
    try:
        return _Document(data).page_count()
    except (Unreadable, ValueError, IndexError, zlib.error, RecursionError):
        return None


class _Table(NamedTuple):
    """A cross-reference table's subsections: (first number, count, where its entries start)."""

    subsections: list[tuple[int, int, int]]


class _Stream(NamedTuple):
    """A cross-reference stream: its field widths, (first, count) ranges, rows (inflated) and
    their PNG predictor's columns (0: none)."""

    widths: tuple[int, int, int]
    ranges: list[tuple[int, int]]
    rows: bytes
    columns: int


# Where an object is: ("at", offset, 0), ("in", stream number, index), or None (free).
Place = tuple[str, int, int] | None


class _Document:
    def __init__(self, data: bytes) -> None:
        self.parser = Parser(data)
        self.data = data
        self.sections: list[_Table | _Stream] = []
        # Object streams read so far, by number: their /First and data (the catalog and the
        # page tree's root are mostly in one).
        self.object_streams: dict[int, tuple[int, bytes]] = {}

    def page_count(self) -> int | None:
        root = self._read_sections()
        catalog = self.resolve(root)
        pages = self.resolve(catalog.get("Pages")) if isinstance(catalog, dict) else None
        if not isinstance(pages, dict) or pages.get("Type") not in ("Pages", None):
            raise Unreadable("no page tree")
        count = pages.get("Count")
        if isinstance(count, Ref):
            count = self.resolve(count)
        if isinstance(count, bool) or not isinstance(count, int) or not 0 < count <= MAX_COUNT:
            raise Unreadable(f"a page count of {count!r}")
        return count

    def _read_sections(self) -> Value:
        """Reads the sections from `startxref` on, newest first; the newest /Root."""
        tail_at = max(0, len(self.data) - TAIL)
        found = list(_STARTXREF.finditer(self.data, tail_at))
        if not found:
            raise Unreadable("no startxref")
        offset: Value = int(found[-1].group(1))
        root: Value = None
        seen: set[int] = set()
        while isinstance(offset, int) and offset not in seen:
            if len(seen) >= MAX_SECTIONS:
                raise Unreadable("too many sections")
            seen.add(offset)
            trailer = self._section(offset)
            if root is None:
                root = trailer.get("Root")
            hybrid = trailer.get("XRefStm")
            if isinstance(hybrid, int) and hybrid not in seen:
                seen.add(hybrid)
                self._section(hybrid)
            offset = trailer.get("Prev")
        if not isinstance(root, Ref):
            raise Unreadable("no /Root")
        return root

    def _section(self, offset: int) -> dict[str, Value]:
        """Adds the section at `offset`; its trailer (a stream's dictionary)."""
        data = self.data
        start = skip(data, offset)
        if data.startswith(b"xref", start):
            return self._table(start + 4)
        head = OBJ_HEAD.match(data, offset)
        if head is None:
            raise Unreadable(f"no cross-reference at {offset}")
        trailer, end = self.parser.value(head.end())
        if not isinstance(trailer, dict) or trailer.get("Type") != "XRef":
            raise Unreadable("not a cross-reference stream")
        widths, size = trailer.get("W"), trailer.get("Size")
        index = trailer.get("Index", [0, size])
        if not (
            isinstance(widths, list)
            and len(widths) == 3
            and all(isinstance(w, int) and 0 <= w <= 8 for w in widths)
            and isinstance(index, list)
            and len(index) % 2 == 0
            and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in index)
        ):
            raise Unreadable("a cross-reference stream's /W or /Index")
        ranges = [(index[i], index[i + 1]) for i in range(0, len(index), 2)]
        rows, columns = self.parser.inflated(trailer, end)
        if columns and columns != sum(widths):
            raise Unreadable("predictor columns other than the row width")
        self.sections.append(_Stream((widths[0], widths[1], widths[2]), ranges, rows, columns))
        return trailer

    def _table(self, pos: int) -> dict[str, Value]:
        subsections = []
        while True:
            head = _SUBSECTION.match(self.data, pos)
            if head is None:
                break
            first, count = int(head.group(1)), int(head.group(2))
            subsections.append((first, count, head.end()))
            pos = head.end() + 20 * count
        pos = skip(self.data, pos)
        if not self.data.startswith(b"trailer", pos):
            raise Unreadable("no trailer after the table")
        trailer, _ = self.parser.value(pos + 7)
        if not isinstance(trailer, dict):
            raise Unreadable("the trailer is not a dictionary")
        self.sections.append(_Table(subsections))
        return trailer

    def place(self, number: int) -> Place:
        for section in self.sections:
            if isinstance(section, _Table):
                for first, count, entries in section.subsections:
                    if first <= number < first + count:
                        entry = _ENTRY.match(self.data, entries + 20 * (number - first))
                        if entry is None:
                            raise Unreadable("a malformed table entry")
                        return ("at", int(entry.group(1)), 0) if entry.group(3) == b"n" else None
                continue
            row = _stream_row(section, number)
            if row is not None:
                kind, second, third = row
                if kind == 0:
                    return None
                return ("at", second, 0) if kind == 1 else ("in", second, third)
        raise Unreadable(f"object {number} is in no section")

    def resolve(self, value: Value) -> Value:
        """`value`, or the object it refers to."""
        if not isinstance(value, Ref):
            return value
        place = self.place(value.number)
        if place is None:
            raise Unreadable(f"object {value.number} is free")
        kind, where, index = place
        if kind == "at":
            return self.parser.object_at(where, value.number)[0]
        return self._in_stream(where, index, value.number)

    def _in_stream(self, stream_number: int, index: int, number: int) -> Value:
        first, body = self._object_stream(stream_number)
        numbers = body[:first].split()
        if 2 * index + 1 >= len(numbers) or int(numbers[2 * index]) != number:
            raise Unreadable(f"object {number} is not at its index")
        start = first + int(numbers[2 * index + 1])
        return Parser(body).value(start)[0]

    def _object_stream(self, number: int) -> tuple[int, bytes]:
        """Object stream `number`'s /First and decoded data."""
        if number not in self.object_streams:
            place = self.place(number)
            if place is None or place[0] != "at":
                raise Unreadable("an object stream not at an offset")
            head, end = self.parser.object_at(place[1], number)
            first = head.get("First") if isinstance(head, dict) else None
            if not isinstance(head, dict) or not isinstance(first, int) or first < 0:
                raise Unreadable("not an object stream")
            self.object_streams[number] = first, self.parser.stream(head, end)
        return self.object_streams[number]


def _stream_row(section: _Stream, number: int) -> tuple[int, int, int] | None:
    """Object `number`'s row of a cross-reference stream (type, two fields), if it has one."""
    width = sum(section.widths)
    row_index = 0
    for first, count in section.ranges:
        if first <= number < first + count:
            row_index += number - first
            break
        row_index += count
    else:
        return None
    if section.columns:
        row = predicted_row(section.rows, width, row_index)
    else:
        row = section.rows[row_index * width : (row_index + 1) * width]
    if len(row) < width:
        raise Unreadable("a short cross-reference stream")
    fields, pos = [], 0
    for size in section.widths:
        fields.append(int.from_bytes(row[pos : pos + size], "big") if size else -1)
        pos += size
    kind = 1 if fields[0] == -1 else fields[0]
    return kind, max(fields[1], 0), max(fields[2], 0)
