"""A TIFF's pages from its directory chain, read from the header without decoding anything.

A TIFF lists its pages as a chain of image file directories (IFDs), each pointing to the next.
The chain is walked here, at most `limit + 1` directories (a file claiming 10,000 pages costs
5,001 small reads, not 10,000 decoded pages), with loops stopped; each directory gives its
pixel size and whether it is a reduced-resolution copy (a thumbnail or preview of another
page: NewSubfileType bit 0), so the caller checks every page's size before decoding one.
Classic TIFF and BigTIFF, either byte order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# Tags read from each directory (tags are sorted ascending in a valid file).
_NEW_SUBFILE_TYPE, _IMAGE_WIDTH, _IMAGE_LENGTH = 254, 256, 257
# Entries looked at per directory for those tags (a hostile directory may claim 65,535).
_MAX_ENTRIES_SCANNED = 32
# Field types with an integer value that fits in the entry: BYTE, SHORT, LONG, LONG8.
_INT_FORMATS = {1: "B", 3: "H", 4: "I", 16: "Q"}


@dataclass(frozen=True)
class TiffDirectory:
    index: int  # position in the chain: the frame number Pillow seeks to
    width: int  # 0 when the directory does not say
    height: int
    reduced: bool  # a reduced-resolution copy of another page


@dataclass
class TiffChain:
    directories: list[TiffDirectory]
    # The chain holds more than `limit` directories (`limit + 1` were read).
    more: bool = False
    # Why the walk stopped early ("" when it reached the end): a loop or a cut-off file.
    damage: str = ""


@dataclass(frozen=True)
class _Layout:
    order: str  # struct byte order
    count: str  # directory entry count format
    offset: str  # offset format
    entry: int  # entry size in bytes


def _layout(data: bytes) -> tuple[_Layout, int] | None:
    """The file's layout and the first directory's offset; None for a header that is not
    a TIFF's."""
    if data[:2] not in (b"II", b"MM") or len(data) < 8:
        return None
    order = "<" if data[:2] == b"II" else ">"
    (magic,) = struct.unpack_from(order + "H", data, 2)
    if magic == 42:
        (first,) = struct.unpack_from(order + "I", data, 4)
        return _Layout(order, "H", "I", 12), first
    if magic == 43 and len(data) >= 16:
        (first,) = struct.unpack_from(order + "Q", data, 8)
        return _Layout(order, "Q", "Q", 20), first
    return None


def _read_entries(data: bytes, at: int, count: int, lay: _Layout) -> dict[int, int]:
    """The wanted tags' integer values among the directory's first entries."""
    found: dict[int, int] = {}
    value_at = 8 if lay.entry == 12 else 12  # tag(2) type(2) count(4 or 8) value
    for i in range(min(count, _MAX_ENTRIES_SCANNED)):
        entry = at + i * lay.entry
        tag, kind = struct.unpack_from(lay.order + "HH", data, entry)
        if tag > _IMAGE_LENGTH:
            break
        fmt = _INT_FORMATS.get(kind)
        if tag in (_NEW_SUBFILE_TYPE, _IMAGE_WIDTH, _IMAGE_LENGTH) and fmt is not None:
            size = struct.calcsize(fmt)
            if size <= lay.entry - value_at:
                (found[tag],) = struct.unpack_from(lay.order + fmt, data, entry + value_at)
    return found


def walk_tiff(data: bytes, limit: int) -> TiffChain | None:
    """The first `limit + 1` directories of the chain (`more` when it goes on), or None when
    `data` is not a TIFF."""
    start = _layout(data)
    if start is None:
        return None
    lay, offset = start
    count_size = struct.calcsize(lay.count)
    chain = TiffChain([])
    seen: set[int] = set()
    while offset and len(chain.directories) <= limit:
        if offset in seen:
            chain.damage = "its list of pages loops back on itself"
            break
        seen.add(offset)
        end = offset + count_size
        if end > len(data):
            chain.damage = "it is cut off inside its list of pages"
            break
        (count,) = struct.unpack_from(lay.order + lay.count, data, offset)
        next_at = end + count * lay.entry
        if next_at + struct.calcsize(lay.offset) > len(data):
            chain.damage = "it is cut off inside its list of pages"
            break
        tags = _read_entries(data, end, count, lay)
        chain.directories.append(
            TiffDirectory(
                index=len(chain.directories),
                width=tags.get(_IMAGE_WIDTH, 0),
                height=tags.get(_IMAGE_LENGTH, 0),
                reduced=bool(tags.get(_NEW_SUBFILE_TYPE, 0) & 1),
            )
        )
        (offset,) = struct.unpack_from(lay.order + lay.offset, data, next_at)
    chain.more = len(chain.directories) > limit
    return chain
