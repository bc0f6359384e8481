"""Some pages of a reading package: a serialized package cut to a page selection (only the
selected pages and the records of the assets they show; sheets, slides and attachments left
out, document-wide fields kept), and page parts (one page each, as StreamResult sends them)
joined into one package. Shared by the parse service
(GetResult with `pages`) and the gateway (GET /v1/jobs/{id}/result?pages=)."""

from __future__ import annotations

from collections.abc import Iterable

from docparse import page_ranges
from docparse.v1 import reading_package_pb2 as rp


def joined(parts: Iterable[bytes]) -> rp.ReadingPackage:
    """One package of serialized page parts (each a ReadingPackage of one page and its assets'
    records), in page order, each asset record once."""
    package = rp.ReadingPackage()
    pages: dict[int, rp.Page] = {}
    assets: dict[str, rp.Asset] = {}
    for data in parts:
        part = rp.ReadingPackage.FromString(data)
        package.content_type = package.content_type or part.content_type
        for page in part.pages:
            pages[page.number] = page
        for asset in part.assets:
            assets.setdefault(asset.asset_id, asset)
    package.pages.extend(pages[number] for number in sorted(pages))
    package.assets.extend(assets.values())
    return package


_FIELDS = rp.ReadingPackage.DESCRIPTOR.fields_by_name
_PAGES = _FIELDS["pages"].number
_ASSETS = _FIELDS["assets"].number
_NOT_PAGES = frozenset(_FIELDS[name].number for name in ("sheets", "slides", "attachments"))


class TruncatedPackage(ValueError):
    """Bytes that are not a serialized message: a field runs past the end."""


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise TruncatedPackage("a varint runs past the end")


def _fields(data: memoryview) -> list[tuple[int, int, int, int]]:
    """Each top-level field of a serialized message: (number, start, value start, end)."""
    found = []
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        value = pos
        wire = key & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            length, value = _varint(data, pos)
            pos = value + length
        else:
            raise TruncatedPackage(f"wire type {wire} at byte {start}")
        if pos > len(data):
            raise TruncatedPackage(f"field {key >> 3} at byte {start} runs past the end")
        found.append((key >> 3, start, value, pos))
    return found


def cut_serialized(data: bytes, selection: page_ranges.Selection) -> bytes:
    """The serialized package with only the selected pages and the records of the assets they
    show; sheets, slides and attachments left out, every other field kept. Nothing it drops is
    decoded: only each page and asset record is (a workbook's megabytes of sheets are skipped,
    not parsed). For a package serialized deterministically, the bytes are those of the
    package so restricted, serialized deterministically (tests/docparse/test_package_pages.py)."""
    view = memoryview(data)
    kept: list[tuple[memoryview, str | None]] = []
    shown: set[str] = set()
    for number, start, value, end in _fields(view):
        if number in _NOT_PAGES:
            continue
        asset_id = None
        if number == _PAGES:
            page = rp.Page.FromString(data[value:end])
            if not page_ranges.selects(selection, page.number):
                continue
            shown.update(image.asset_id for image in page.images)
        elif number == _ASSETS:
            asset_id = rp.Asset.FromString(data[value:end]).asset_id
        kept.append((view[start:end], asset_id))
    return b"".join(piece for piece, asset in kept if asset is None or asset in shown)
