"""Outlook's compressed RTF (the PR_RTF_COMPRESSED property, 1009 of an MSG file): the LZ77
variant "LZFu" of [MS-OXRTFCP], or "MELA" (stored uncompressed).

A 16-byte header (compressed size, raw size, type, CRC), then runs of a control byte whose 8
bits, low first, each say: a literal byte, or a 2-byte big-endian reference (12-bit offset into
a 4096-byte ring dictionary, 4-bit length + 2) to bytes already written. The dictionary starts
with a fixed RTF prologue. Bounded: the output stops at the raw size the header declares, and
that size must be within the parse's limit before any work is done.
"""

from __future__ import annotations

import struct

from parser_svc.parsers import corrupt, too_large

_LZFU, _MELA = 0x75465A4C, 0x414C454D
_PROLOGUE = (
    b"{\\rtf1\\ansi\\mac\\deff0\\deftab720{\\fonttbl;}{\\f0\\fnil \\froman \\fswiss \\fmodern "
    b"\\fscript \\fdecor MS Sans SerifSymbolArialTimes New RomanCourier{\\colortbl\\red0\\green0"
    b"\\blue0\r\n\\par \\pard\\plain\\f0\\fs20\\b\\i\\u\\tab\\tx"
)


def decompress_rtf(data: bytes, limit: int) -> bytes:
    """The RTF of a compressed-RTF stream; CORRUPT_DOCUMENT when it is not one,
    DOCUMENT_TOO_LARGE when it declares more than `limit` bytes."""
    if len(data) < 16:
        raise corrupt("the message's compressed RTF body is shorter than its header")
    _, raw_size, kind, _ = struct.unpack_from("<IIII", data)
    if raw_size > limit:
        raise too_large(f"the message's RTF body declares {raw_size} bytes; the limit is {limit}")
    if kind == _MELA:
        return data[16 : 16 + raw_size]
    if kind != _LZFU:
        raise corrupt("the message's RTF body is in an unknown compression")
    ring = bytearray(4096)
    ring[: len(_PROLOGUE)] = _PROLOGUE
    write = len(_PROLOGUE)
    out = bytearray()
    at, end = 16, len(data)
    while at < end and len(out) < raw_size:
        control = data[at]
        at += 1
        for bit in range(8):
            if at >= end or len(out) >= raw_size:
                break
            if not control & (1 << bit):
                ring[write] = data[at]
                out.append(data[at])
                write, at = (write + 1) & 0xFFF, at + 1
                continue
            if at + 1 >= end:
                break
            reference = (data[at] << 8) | data[at + 1]
            at += 2
            offset, length = reference >> 4, (reference & 0xF) + 2
            if offset == write:  # the end marker
                return bytes(out)
            for i in range(length):
                byte = ring[(offset + i) & 0xFFF]
                ring[write] = byte
                out.append(byte)
                write = (write + 1) & 0xFFF
    return bytes(out[:raw_size])
