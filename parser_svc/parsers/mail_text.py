"""Text of e-mail (EML, MSG) headers and bodies, decoded whatever the charset says.

Mail is often mislabelled: a body declared ISO-8859-1 holding UTF-8, an unknown or misspelt
charset, raw 8-bit bytes in a header. Decoding tries the declared charset strictly, then UTF-8,
then what charset-normalizer finds, and ends with Windows-1252 / Latin-1 (which decode every
byte), so no text of a package holds U+FFFD for bytes a charset could read.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import quopri
import re
from email.header import Header, decode_header
from email.utils import getaddresses, parsedate_to_datetime

from charset_normalizer import from_bytes

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import page_text, safe

# Charsets mail software writes that mean "not said" (decoded by the fallbacks).
_UNKNOWN = {"", "unknown-8bit", "x-unknown", "unknown", "default", "x-user-defined"}
# Labels Python does not know under the name mail uses.
_ALIASES = {"ks_c_5601-1987": "cp949", "x-sjis": "shift_jis", "windows-874": "cp874"}
# How much of a text of unknown charset the guess reads.
_GUESS_BYTES = 256 * 1024
_GUESS_MIN = 64
_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=")
_BLANK_LINES = re.compile(r"\n[ \t]*\n\s*")
_SPACES = re.compile(r"[ \t]*\n")


def _codec(charset: str | None) -> str | None:
    name = (charset or "").strip().strip("\"'").lower()
    if name in _UNKNOWN:
        return None
    name = _ALIASES.get(name, name)
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_bytes(data: bytes, charset: str | None = None) -> str:
    """`data` as text: the declared charset if it decodes strictly, else UTF-8, else the best
    guess, else Windows-1252 or Latin-1 (every byte decodes in one of them)."""
    tried: list[str] = []
    for name in (_codec(charset), "utf-8"):
        if name is None or name in tried:
            continue
        tried.append(name)
        try:
            return data.decode(name)
        except (UnicodeDecodeError, LookupError):
            continue
    # A guess reads its sample several times (bounded); on a few bytes it is noise.
    best = from_bytes(data[:_GUESS_BYTES]).best() if len(data) >= _GUESS_MIN else None
    if best is not None and best.encoding:
        try:
            return data.decode(best.encoding)
        except (UnicodeDecodeError, LookupError):
            pass
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _header_bytes(raw: str) -> bytes:
    """A header value as its bytes: the email package keeps undecodable 8-bit header bytes
    as lone surrogates."""
    try:
        return raw.encode("utf-8")
    except UnicodeEncodeError:
        return raw.encode("utf-8", "surrogateescape")


def header_str(raw: object) -> str:
    """A header value as a str: the email package hands out a header with raw 8-bit bytes as
    a Header of charset unknown-8bit, whose str() would replace them."""
    if not isinstance(raw, Header):
        return str(raw)
    out: list[str] = []
    for piece, charset in decode_header(raw):
        data = piece if isinstance(piece, bytes) else _header_bytes(piece)
        out.append(decode_bytes(data, charset))
    return "".join(out)


def _word(charset: str, encoding: str, payload: str) -> str | None:
    """One RFC 2047 encoded word decoded; None when its payload is not valid."""
    try:
        if encoding in "bB":
            data = base64.b64decode(payload + "=" * (-len(payload) % 4), validate=False)
        else:
            data = quopri.decodestring(payload.replace("_", " ").encode("ascii"), header=True)
    except (ValueError, binascii.Error, UnicodeEncodeError):
        return None
    return decode_bytes(data, charset.split("*", 1)[0])  # RFC 2231 adds "*language"


def decode_words(raw: object) -> str:
    """A header value with its RFC 2047 encoded words decoded (any charset; raw 8-bit bytes
    as UTF-8 or a fallback, also beside encoded words), folding removed: white space between
    two encoded words goes, as RFC 2047 says."""
    if raw is None:
        return ""
    text = header_str(raw)
    out: list[str] = []
    at, after_word = 0, False
    for found in _ENCODED_WORD.finditer(text):
        between = text[at : found.start()]
        decoded = _word(*found.groups())
        if decoded is None:
            continue
        if not (after_word and not between.strip()):
            out.append(between)
        out.append(decoded)
        at, after_word = found.end(), True
    out.append(text[at:])
    value = "".join(out)
    return safe(" ".join(value.replace("\r", " ").replace("\n", " ").split()))


def _quoted_name(name: str) -> str:
    if any(c in name for c in ',;:<>@"()[]\\'):
        escaped = name.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    return name


def address(name: str, addr: str) -> str:
    """ "Ann Lee <ann@example.com>", or the address (or name) alone."""
    name, addr = name.strip(), addr.strip()
    if name and addr and name != addr:
        return f"{_quoted_name(name)} <{addr}>"
    return addr or name


def addresses(raw: list[object]) -> list[str]:
    """Every address of address headers (To, Cc, ...), names decoded."""
    out: list[str] = []
    for name, addr in getaddresses([header_str(value) for value in raw]):
        found = address(decode_words(name), decode_words(addr))
        if found:
            out.append(found)
    return out


def iso_date(raw: str) -> str:
    """An RFC 5322 date as ISO 8601 with its offset; the header as written when unreadable."""
    raw = decode_words(raw)
    if not raw:
        return ""
    try:
        return parsedate_to_datetime(raw).isoformat()
    except (TypeError, ValueError, IndexError, OverflowError):
        return raw


def _quote_depth(line: str) -> tuple[int, str]:
    depth = len(line) - len(line.lstrip(">"))
    rest = line[depth:]
    return depth, rest[1:] if rest.startswith(" ") else rest  # RFC 3676 space-stuffing


def unflow(text: str, delsp: bool) -> str:
    """A format=flowed (RFC 3676) text with its soft line breaks (a line ending in a space,
    the signature separator "-- " aside) joined, quote depth by quote depth."""
    out: list[tuple[int, str]] = []
    soft = False
    for line in text.replace("\r\n", "\n").split("\n"):
        depth, content = _quote_depth(line)
        if soft and out and out[-1][0] == depth:
            out[-1] = (depth, out[-1][1] + content)
        else:
            out.append((depth, content))
        soft = content.endswith(" ") and content != "-- "
        if soft and delsp:
            out[-1] = (depth, out[-1][1][:-1])
    return "\n".join((">" * depth + " " if depth else "") + content for depth, content in out)


def text_page(text: str) -> rp.Page:
    """A plain-text body as one Page: a block per paragraph (blank-line separated), lines kept."""
    text = safe(text.replace("\r\n", "\n").replace("\r", "\n"))
    paragraphs = [_SPACES.sub("\n", p).strip("\n") for p in _BLANK_LINES.split(text)]
    page = rp.Page(number=1)
    for paragraph in paragraphs:
        if paragraph.strip():
            page.blocks.append(rp.TextBlock(text=paragraph, source="text"))
    page.text = page_text([b.text for b in page.blocks])
    return page
