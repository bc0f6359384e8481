"""The few PDF objects the submit's page count reads (pdf_page_count.py), in pure Python and
bounded: values (ISO 32000-1, 7.3), streams through Flate and the PNG predictor of
cross-reference streams. What it does not follow raises Unreadable."""

from __future__ import annotations

import re
import zlib
from typing import NamedTuple

MAX_INFLATED = 4 << 20  # bytes a stream may inflate to
MAX_PREDICTED = 64 << 10  # bytes of a PNG-predicted xref stream (decoded in Python)
MAX_DEPTH = 16  # nesting of arrays and dictionaries
MAX_VALUES = 100_000  # values a parser reads in all (a page tree's /Kids refs are skipped)
MAX_STRING = 64 << 10  # bytes of a literal string


class Unreadable(Exception):
    """What this reader does not follow; the parse will."""


class Ref(NamedTuple):
    number: int
    generation: int


class Name(str):
    """A PDF name (/Type), apart from strings."""


Value = object

# ISO 32000-1, 7.2.2: white-space characters; a regular character is neither those nor these.
W = rb"[\x00\t\n\x0c\r ]"
_REGULAR = rb"[^\x00\t\n\x0c\r ()<>\[\]{}/%]"
_SPACE = re.compile(rb"(?:" + W + rb"+|%[^\r\n]*)*")
_NUMBER = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)")
_REF_TAIL = re.compile(W + rb"+(\d+)" + W + rb"+R(?!" + _REGULAR + rb")")
_NAME = re.compile(rb"/(" + _REGULAR + rb"*)")
_WORD = re.compile(rb"[a-zA-Z]+")
OBJ_HEAD = re.compile(rb"(?:" + W + rb"|%[^\r\n]*)*(\d+)" + W + rb"+(\d+)" + W + rb"+obj")
_REF_RUN = re.compile(rb"(?:\d+" + W + rb"+\d+" + W + rb"+R" + W + rb"*)+")
_STREAM = re.compile(rb"(?:" + W + rb"|%[^\r\n]*)*stream(?:\r\n|\n|\r)")


def skip(data: bytes, pos: int) -> int:
    """Past the whitespace and comments at `pos`."""
    space = _SPACE.match(data, pos)
    return space.end() if space else pos


class Parser:
    """PDF values from `data` at a position (ISO 32000-1, 7.3)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.budget = MAX_VALUES

    def value(self, pos: int, depth: int = 0) -> tuple[Value, int]:
        """The value at `pos` (whitespace and comments first) and where it ends."""
        if depth > MAX_DEPTH:
            raise Unreadable("nested too deep")
        self.budget -= 1
        if self.budget < 0:
            raise Unreadable(f"more than {MAX_VALUES} values")
        data = self.data
        pos = skip(data, pos)
        head = data[pos : pos + 2]
        if head == b"<<":
            return self._dict(pos + 2, depth)
        if head[:1] == b"[":
            items: list[Value] = []
            pos += 1
            while True:
                pos = skip(data, pos)
                refs = _REF_RUN.match(data, pos)  # /Kids: nothing here reads refs in arrays
                if refs is not None:
                    pos = refs.end()
                if data[pos : pos + 1] == b"]":
                    return items, pos + 1
                item, pos = self.value(pos, depth + 1)
                items.append(item)
        if head[:1] == b"/":
            name = _NAME.match(data, pos)
            assert name is not None
            return Name(name.group(1).decode("latin-1")), name.end()
        if head[:1] == b"(":
            return b"", _literal_end(data, pos)
        if head[:1] == b"<":
            end = data.find(b">", pos)
            if end < 0:
                raise Unreadable("unterminated hex string")
            return b"", end + 1
        number = _NUMBER.match(data, pos)
        if number is not None:
            text = number.group()
            if b"." in text:
                return float(text), number.end()
            ref = _REF_TAIL.match(data, number.end())
            if ref is not None:
                return Ref(int(text), int(ref.group(1))), ref.end()
            return int(text), number.end()
        word = _WORD.match(data, pos)
        if word is not None and word.group() in (b"true", b"false", b"null"):
            return {b"true": True, b"false": False, b"null": None}[word.group()], word.end()
        raise Unreadable(f"no value at {pos}")

    def _dict(self, pos: int, depth: int) -> tuple[dict[str, Value], int]:
        data, out = self.data, dict[str, Value]()
        while True:
            pos = skip(data, pos)
            if data[pos : pos + 2] == b">>":
                return out, pos + 2
            key, pos = self.value(pos, depth + 1)
            if not isinstance(key, Name):
                raise Unreadable("a dictionary key is not a name")
            out[str(key)], pos = self.value(pos, depth + 1)

    def object_at(self, offset: int, number: int) -> tuple[Value, int]:
        """Object `number`'s value at `offset` (its `N G obj` header) and where it ends."""
        head = OBJ_HEAD.match(self.data, offset)
        if head is None or int(head.group(1)) != number:
            raise Unreadable(f"object {number} is not at {offset}")
        return self.value(head.end())

    def stream(self, head: dict[str, Value], end: int) -> bytes:
        """The decoded data of the stream whose dictionary `head` ends at `end`."""
        data, columns = self.inflated(head, end)
        if columns:
            if len(data) > MAX_PREDICTED:
                raise Unreadable("a predicted stream past the bound")
            return _png_rows(data, columns)
        return data

    def inflated(self, head: dict[str, Value], end: int) -> tuple[bytes, int]:
        """The stream's data through its filter, and the columns of its PNG predictor (0:
        none; the rows are then still predicted)."""
        start = _STREAM.match(self.data, end)
        if start is None:
            raise Unreadable("no stream after the dictionary")
        length = head.get("Length")
        if not isinstance(length, int) or length < 0:  # an indirect length: its keyword
            length = self.data.find(b"endstream", start.end()) - start.end()
            if length < 0:
                raise Unreadable("unterminated stream")
        raw = self.data[start.end() : start.end() + length]
        return _filtered(raw, head)


_STRING_MARKS = re.compile(rb"[()\\]")


def _literal_end(data: bytes, pos: int) -> int:
    """Where the literal string at `pos` ends (balanced parentheses, escapes); one longer than
    MAX_STRING is not followed."""
    level, start = 0, pos
    for mark in _STRING_MARKS.finditer(data, pos, min(len(data), pos + MAX_STRING)):
        at = mark.start()
        if at < pos:  # the byte after a backslash
            continue
        byte = data[at]
        if byte == 0x5C:
            pos = at + 2
            continue
        level += 1 if byte == 0x28 else -1
        pos = at + 1
        if level == 0:
            return pos
    raise Unreadable(f"a string unterminated within {MAX_STRING} bytes of {start}")


def _filtered(raw: bytes, head: dict[str, Value]) -> tuple[bytes, int]:
    """`raw` through the stream's filter (none or Flate); the PNG predictor's columns (0:
    none)."""
    filters = head.get("Filter")
    if isinstance(filters, list) and len(filters) == 1:
        filters = filters[0]
    if filters is None:
        return raw, 0
    if filters != "FlateDecode":
        raise Unreadable(f"filter {filters!r}")
    inflater = zlib.decompressobj()
    out = inflater.decompress(raw, MAX_INFLATED)
    if inflater.unconsumed_tail:
        raise Unreadable("the stream inflates past the bound")
    params = head.get("DecodeParms")
    if isinstance(params, list) and len(params) == 1:
        params = params[0]
    if not isinstance(params, dict) or params.get("Predictor", 1) == 1:
        return out, 0
    predictor, columns = params.get("Predictor"), params.get("Columns", 1)
    one_byte = params.get("Colors", 1) == 1 and params.get("BitsPerComponent", 8) == 8
    if not (isinstance(predictor, int) and 10 <= predictor <= 15 and one_byte):
        raise Unreadable(f"predictor {predictor!r}")
    if not isinstance(columns, int) or isinstance(columns, bool) or columns < 1:
        raise Unreadable(f"predictor columns {columns!r}")
    return out, columns


def predicted_row(data: bytes, columns: int, index: int) -> bytes:
    """Row `index` of PNG-predicted rows of `columns` one-byte samples: the rows up to it are
    summed column by column from the last row not predicted "Up" (an xref stream's usual
    filter), not decoded one by one; other filters decode the rows (bounded)."""
    stride = columns + 1
    if len(data) < (index + 1) * stride:
        raise Unreadable("a short cross-reference stream")
    filters = data[0 : (index + 1) * stride : stride]
    last = len(filters.rstrip(b"\x02")) - 1  # the last row not "Up" (-1: none)
    if last >= 0 and filters[last] != 0:
        if len(data) > MAX_PREDICTED:
            raise Unreadable("a predicted stream past the bound")
        return _png_rows(data, columns)[index * columns : (index + 1) * columns]
    first = max(last, 0)  # a row without prediction is its own bytes; rows before it: none
    stop = index * stride + 1
    return bytes(
        sum(data[first * stride + 1 + c : stop + c + 1 : stride]) & 0xFF for c in range(columns)
    )


def _png_rows(data: bytes, columns: int) -> bytes:
    """Rows of `columns` bytes undone from PNG prediction (a filter byte each; one byte a
    sample, the xref stream's case)."""
    out = bytearray()
    previous = bytes(columns)
    for start in range(0, len(data) - columns, columns + 1):
        kind, row = data[start], bytearray(data[start + 1 : start + 1 + columns])
        for i in range(columns):
            left = row[i - 1] if i else 0
            up, corner = previous[i], previous[i - 1] if i else 0
            if kind == 1:
                row[i] = (row[i] + left) & 0xFF
            elif kind == 2:
                row[i] = (row[i] + up) & 0xFF
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                row[i] = (row[i] + _paeth(left, up, corner)) & 0xFF
            elif kind != 0:
                raise Unreadable(f"PNG filter {kind}")
        out += row
        previous = bytes(row)
    return bytes(out)


def _paeth(left: int, up: int, corner: int) -> int:
    guess = left + up - corner
    near = min(
        (abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner)
    )
    return near[2]
