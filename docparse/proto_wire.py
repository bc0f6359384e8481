"""The pieces of the protobuf wire format that code here writes by hand, where putting bytes
already encoded together is cheaper than building and encoding a message: a varint, and a
length-delimited field (its tag, its length, its bytes: a string, bytes or a message), exactly
as encoding the message would write them."""

from __future__ import annotations


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(field: int, payload: bytes) -> bytes:
    """Field `field` of a message holding `payload` (bytes, a string or a message), encoded."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload
