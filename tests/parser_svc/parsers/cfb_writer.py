"""A minimal writer of OLE2 / CFB compound files (version 3, 512-byte sectors), for building
Outlook .msg fixtures in tests: `compound_file({"a/b": b"...", ...})` makes a file whose
storages are the paths' folders and whose streams are their bytes. Streams under 4096 bytes go
to the mini stream (64-byte mini sectors), as real files have them; the directory is a
balanced binary tree ordered as CFB orders names (length, then upper case). No DIFAT sectors:
files up to ~7 MB, plenty for fixtures. `msg_file` builds a .msg from MAPI properties.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

SECTOR, MINI, CUTOFF = 512, 64, 4096
FREE, END, FAT_SECT, NOSTREAM = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF


@dataclass
class _Entry:
    name: str
    kind: int  # 1 storage, 2 stream, 5 root
    data: bytes = b""
    children: dict[str, _Entry] = field(default_factory=dict)
    sid: int = 0
    start: int = END
    left: int = NOSTREAM
    right: int = NOSTREAM
    child: int = NOSTREAM


def _key(entry: _Entry) -> tuple[int, str]:
    return (len(entry.name), entry.name.upper())


def _tree(entries: list[_Entry]) -> int:
    """Links the siblings as a balanced search tree; answers its root's id."""
    if not entries:
        return NOSTREAM
    middle = len(entries) // 2
    root = entries[middle]
    root.left, root.right = _tree(entries[:middle]), _tree(entries[middle + 1 :])
    return root.sid


def _chain(fat: list[int], first: int, count: int) -> None:
    for i in range(count):
        fat[first + i] = first + i + 1 if i < count - 1 else END


def _pad(data: bytes, size: int) -> bytes:
    return data + b"\0" * (-len(data) % size)


def _dir_entry(e: _Entry, size: int) -> bytes:
    name = e.name.encode("utf-16-le") + b"\0\0"
    return struct.pack(
        "<64sHBBIII16sIQQIQ",
        name,
        len(name),
        e.kind,
        1,  # black
        e.left,
        e.right,
        e.child,
        b"\0" * 16,
        0,
        0,
        0,
        e.start,
        size,
    )


def compound_file(streams: dict[str, bytes]) -> bytes:
    root = _Entry("Root Entry", 5)
    for path, data in streams.items():
        *folders, leaf = path.split("/")
        node = root
        for folder in folders:
            node = node.children.setdefault(folder, _Entry(folder, 1))
        node.children[leaf] = _Entry(leaf, 2, data)
    order: list[_Entry] = []

    def number(node: _Entry) -> None:
        node.sid = len(order)
        order.append(node)
        for child in node.children.values():
            number(child)

    number(root)
    for node in order:
        kids = sorted(node.children.values(), key=_key)
        node.child = _tree(kids)
    # The mini stream: small streams, each in whole 64-byte mini sectors.
    mini = bytearray()
    minifat: list[int] = []
    for e in order:
        if e.kind == 2 and len(e.data) < CUTOFF and e.data:
            e.start = len(minifat)
            count = -(-len(e.data) // MINI)
            minifat += [0] * count
            _chain(minifat, e.start, count)
            mini += _pad(e.data, MINI)
    big = [e for e in order if e.kind == 2 and len(e.data) >= CUTOFF]
    dir_bytes_len = len(order) * 128
    n_dir = -(-dir_bytes_len // SECTOR)
    n_minifat = -(-len(minifat) * 4 // SECTOR) if minifat else 0
    n_mini = -(-len(mini) // SECTOR)
    n_big = sum(-(-len(e.data) // SECTOR) for e in big)
    n_fat = 1
    while n_fat * 128 < n_fat + n_dir + n_minifat + n_mini + n_big:
        n_fat += 1
    assert n_fat <= 109, "fixture too large for a file without DIFAT sectors"
    total = n_fat + n_dir + n_minifat + n_mini + n_big
    fat = [FREE] * (n_fat * 128)
    for i in range(n_fat):
        fat[i] = FAT_SECT
    at = n_fat
    dir_start = at
    _chain(fat, at, n_dir)
    at += n_dir
    minifat_start = at if n_minifat else END
    _chain(fat, at, n_minifat)
    at += n_minifat
    root.start = at if n_mini else END
    _chain(fat, at, n_mini)
    at += n_mini
    body = bytearray()
    for e in big:
        count = -(-len(e.data) // SECTOR)
        e.start = at
        _chain(fat, at, count)
        at += count
        body += _pad(e.data, SECTOR)
    assert at == total
    directory = b"".join(
        _dir_entry(e, len(mini) if e.kind == 5 else len(e.data) if e.kind == 2 else 0)
        for e in order
    )
    difat = list(range(n_fat)) + [FREE] * (109 - n_fat)
    header = struct.pack(
        "<8s16sHHHHH6sIIIIIIIII",
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        b"\0" * 16,
        0x3E,
        3,
        0xFFFE,
        9,
        6,
        b"\0" * 6,
        0,
        n_fat,
        dir_start,
        0,
        CUTOFF,
        minifat_start,
        n_minifat,
        END,
        0,
    ) + struct.pack("<109I", *difat)
    minifat_bytes = struct.pack(f"<{len(minifat)}I", *minifat) if minifat else b""
    minifat_bytes += struct.pack("<I", FREE) * (-(len(minifat_bytes) // 4) % 128)
    out = header + struct.pack(f"<{len(fat)}I", *fat)
    out += _pad(directory, SECTOR) + minifat_bytes + _pad(bytes(mini), SECTOR) + bytes(body)
    return bytes(out)


def unicode_prop(prop: int, text: str) -> tuple[str, bytes]:
    return f"__substg1.0_{prop:04X}001F", text.encode("utf-16-le")


def fixed_props(header: int, values: dict[int, bytes]) -> bytes:
    """A `__properties_version1.0` stream: `header` bytes, then one 16-byte entry per
    property tag (id << 16 | type) with its value (up to 8 bytes)."""
    out = b"\0" * header
    for tag, value in values.items():
        out += struct.pack("<II", tag, 6) + value.ljust(8, b"\0")
    return out
