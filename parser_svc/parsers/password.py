"""Passwords: SASLprep (RFC 4013) normalisation, as PDF 2.0 (AES-256, R6) requires.

`candidates` gives the forms to try in order: the SASLprep'd password first, then the password
exactly as submitted if that differs (older writers did not normalise, and Office formats do not
prescribe it). A password SASLprep prohibits (control characters, ...) is tried as given only.
"""

from __future__ import annotations

import stringprep
import unicodedata


class SaslprepError(ValueError):
    """The string holds a character SASLprep prohibits."""


def saslprep(value: str) -> str:
    """RFC 4013 SASLprep with unassigned code points allowed (the "query" profile)."""
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch for ch in value if not stringprep.in_table_b1(ch)
    )
    normal = unicodedata.normalize("NFKC", mapped)
    if not normal:
        return normal
    prohibited = (
        stringprep.in_table_c12,
        stringprep.in_table_c21,
        stringprep.in_table_c22,
        stringprep.in_table_c3,
        stringprep.in_table_c4,
        stringprep.in_table_c5,
        stringprep.in_table_c6,
        stringprep.in_table_c7,
        stringprep.in_table_c8,
        stringprep.in_table_c9,
    )
    for ch in normal:
        if any(check(ch) for check in prohibited):
            raise SaslprepError(f"prohibited character U+{ord(ch):04X}")
    if any(stringprep.in_table_d1(ch) for ch in normal):
        if any(stringprep.in_table_d2(ch) for ch in normal):
            raise SaslprepError("mixes right-to-left and left-to-right characters")
        if not (stringprep.in_table_d1(normal[0]) and stringprep.in_table_d1(normal[-1])):
            raise SaslprepError("right-to-left text must start and end right-to-left")
    return normal


def candidates(password: str) -> list[str]:
    """Forms of `password` to try, normalised first; [] when no password was given."""
    if not password:
        return []
    try:
        normal = saslprep(password)
    except SaslprepError:
        return [password]
    return [normal] if normal == password or not normal else [normal, password]
