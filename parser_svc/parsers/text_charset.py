"""The characters of a text file (HTML, Markdown, plain text, CSV, XHTML), whatever its charset.

In order: a byte order mark (UTF-8, UTF-16, UTF-32) decides; then the charset the file declares
(an HTML <meta charset>, an XML declaration), when the bytes decode in it (unless they are valid
UTF-8 with non-ASCII letters: a page saved as UTF-8 under a stale declaration); then UTF-8; then
detection (charset-normalizer). Every decode is strict, so a file that decodes never yields
U+FFFD that was not in it; bytes that are no text in any charset are UNSUPPORTED_FORMAT.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any

from charset_normalizer import from_bytes

from docparse.reasons import ErrorReason
from parser_svc.parsers import ParseFailure

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Where a page declares its charset: the first bytes (the HTML standard looks at 1024).
DECLARATION_WINDOW = 4096
_META_CHARSET = re.compile(
    rb"<meta[^>]{0,512}?charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]{1,40})", re.I
)
_XML_ENCODING = re.compile(rb"<\?xml[^>]{0,200}?encoding\s*=\s*[\"']([A-Za-z0-9._:-]{1,40})[\"']")
# Labels a browser reads as another charset (the WHATWG Encoding Standard): ISO-8859-1 and ASCII
# pages are decoded as windows-1252, which they are in practice.
_WEB_ALIASES = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "x-sjis": "shift_jis",
    "gb2312": "gbk",
}
# Control bytes that text files hold (tab, line feed, form feed, carriage return, escape).
_TEXT_CONTROLS = frozenset(b"\t\n\x0b\x0c\r\x1b")
_SAMPLE = 64 * 1024


@dataclass(frozen=True)
class Decoded:
    text: str
    # The codec name it was read with ("utf-8", "cp1251", "utf-16-le", ...).
    encoding: str
    # How the charset was known: "bom", "declared", "utf-8" or "detected".
    source: str


def _strict(data: bytes, encoding: str) -> str | None:
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return None


def _codec(label: str) -> str | None:
    name = _WEB_ALIASES.get(label.strip().lower(), label.strip().lower())
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def declared_charset(data: bytes) -> str | None:
    """The charset an HTML or XML file declares in its first bytes (meta charset, http-equiv
    content type, XML declaration); None when it declares none or one Python does not know."""
    head = data[:DECLARATION_WINDOW]
    found = _XML_ENCODING.search(head) or _META_CHARSET.search(head)
    if found is None:
        return None
    return _codec(found.group(1).decode("ascii"))


def _binary(sample: bytes) -> bool:
    """Whether a sample holds bytes no text file has: many NULs or other control bytes (a
    stray NUL in a saved page is not binary; UTF-16 without a BOM is found by detection)."""
    controls = sum(1 for byte in sample if byte < 0x20 and byte not in _TEXT_CONTROLS)
    return controls > max(8, len(sample) // 100)


def decode_text(data: bytes, what: str, *, declared: str | None = None) -> Decoded:
    """`data` as text (see the module docstring); `declared`: the charset the file names.
    NUL characters (a stray one is not binary) are dropped: no text shows them."""
    decoded = _decode_text(data, what, declared)
    if "\x00" in decoded.text:
        return Decoded(decoded.text.replace("\x00", ""), decoded.encoding, decoded.source)
    return decoded


def _decode_text(data: bytes, what: str, declared: str | None) -> Decoded:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            text = _strict(data[len(bom) :], encoding)
            if text is None:
                raise ParseFailure(
                    ErrorReason.CORRUPT_DOCUMENT,
                    f"the {what} starts with a {encoding.upper()} byte order mark but its "
                    f"bytes are not {encoding.upper()}",
                )
            return Decoded(text, encoding, "bom")
    utf8 = _strict(data, "utf-8") if not _binary(data[:_SAMPLE]) else None
    # A page that declares a single-byte charset but is valid UTF-8 with non-ASCII letters was
    # saved as UTF-8 (multi-byte sequences do not happen by accident): UTF-8 wins.
    if declared and not (utf8 is not None and not data.isascii()):
        text = _strict(data, declared)
        if text is not None and (declared.startswith("utf-16") or "\x00" not in text):
            return Decoded(text, declared, "declared")
    if utf8 is not None:
        return Decoded(utf8, "utf-8", "utf-8")
    return _detected(data, what)


# Charsets by how common they are on the web and in office exports: of the candidates that read
# a sample equally well (a short text fits many), the commonest wins.
_COMMON = (
    "cp1252",
    "cp1251",
    "cp932",
    "shift_jis",
    "euc_jp",
    "gb18030",
    "gbk",
    "big5",
    "euc_kr",
    "cp1250",
    "koi8_r",
    "cp1253",
    "cp1254",
    "cp1255",
    "cp1256",
    "cp1257",
    "cp874",
    "iso8859_15",
    "iso8859_2",
)
_TIE = 0.02  # candidates within this much of the least chaos read the sample equally well


def _likeliest(results: list[Any]) -> str | None:
    """Of charset-normalizer's candidates, the commonest charset among those whose reading is
    as clean as the best one's."""
    if not results:
        return None
    least = min(r.chaos for r in results)
    tied = [r for r in results if r.chaos <= least + _TIE]

    def rank(result: Any) -> tuple[int, float]:
        names = [result.encoding, *result.could_be_from_charset]
        common = min((_COMMON.index(n) for n in names if n in _COMMON), default=len(_COMMON))
        return common, -result.coherence

    best = min(tied, key=rank)
    names = [best.encoding, *best.could_be_from_charset]
    common = next((n for n in _COMMON if n in names), best.encoding)
    return _codec(common)


def _detected(data: bytes, what: str) -> Decoded:
    results = from_bytes(data[: 4 * _SAMPLE] if len(data) > 4 * _SAMPLE else data)
    encoding = _likeliest(list(results))
    text = _strict(data, encoding) if encoding else None
    wide = encoding is not None and encoding.startswith(("utf-16", "utf-32"))
    if text is not None and (wide or not _binary(data[:_SAMPLE])):
        return Decoded(text, encoding or "", "detected")
    if not _binary(data[:_SAMPLE]):
        # Text in a single-byte charset detection cannot name (a short file, rare letters):
        # windows-1252 where it decodes, else ISO-8859-1, which decodes every byte.
        text = _strict(data, "cp1252")
        if text is not None:
            return Decoded(text, "cp1252", "detected")
        return Decoded(data.decode("latin-1"), "latin-1", "detected")
    raise ParseFailure(
        ErrorReason.UNSUPPORTED_FORMAT,
        f"the {what} is not text in any known character set (binary content)",
    )
