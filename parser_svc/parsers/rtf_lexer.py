"""RTF tokens, read iteratively (no recursion: a file of a million "{" is a long loop, never
a deep stack): group open and close, control words with their numeric parameter, control
symbols, hex bytes (\\'hh), \\binN binary data and runs of plain text. Also the code pages a
document's \\ansicpg and a font's \\fcharset name, and text decoding that never yields U+FFFD."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass

OPEN, CLOSE, WORD, SYMBOL, HEX, TEXT, BINARY = range(7)
# \word or \word-123, with the one space that ends it; \'hh; another control symbol; braces;
# plain text (line ends are not text in RTF).
_TOKEN = re.compile(
    rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?|\\'([0-9a-fA-F]{2})|\\(.)|([{}])|([^\\{}\r\n]+)|[\r\n]+",
    re.DOTALL,
)
# \fcharsetN -> Python codec (Windows code pages, as Word maps them).
CHARSETS = {
    0: "cp1252",
    77: "mac_roman",
    128: "cp932",
    129: "cp949",
    130: "johab",
    134: "gbk",
    136: "big5",
    161: "cp1253",
    162: "cp1254",
    163: "cp1258",
    177: "cp1255",
    178: "cp1256",
    186: "cp1257",
    204: "cp1251",
    222: "cp874",
    238: "cp1250",
    254: "cp437",
    255: "cp850",
}
# What control words and symbols stand for in text.
CHARS = {
    "tab": "\t",
    "line": "\n",
    "emdash": "\u2014",
    "endash": "\u2013",
    "bullet": "\u2022",
    "lquote": "\u2018",
    "rquote": "\u2019",
    "ldblquote": "\u201c",
    "rdblquote": "\u201d",
    "emspace": " ",
    "enspace": " ",
    "qmspace": " ",
    "nestcell": " ",
}
SYMBOLS = {"~": "\u00a0", "_": "\u2011", "-": "", "{": "{", "}": "}", "\\": "\\"}
SYMBOL_CHARSET = 2
SYMBOL_CODEC = "symbol"  # a Symbol / Wingdings font: bytes shown as the font's private-use glyphs


@dataclass(slots=True)
class Token:
    kind: int
    word: str = ""
    param: int | None = None
    data: bytes = b""


def tokens(data: bytes) -> Iterator[Token]:
    """The tokens of `data` in order. A stray backslash at the end is dropped."""
    pos, end = 0, len(data)
    match = _TOKEN.match
    while pos < end:
        found = match(data, pos)
        if found is None:  # a lone "\" at the very end
            return
        pos = found.end()
        word, param, hexbyte, symbol, brace, text = found.groups()
        if word is not None:
            number = int(param) if param is not None else None
            if word == b"bin" and number is not None and number > 0:
                # The space after \binN is its delimiter, already consumed; N raw bytes follow.
                yield Token(BINARY, data=data[pos : pos + number])
                pos += number
                continue
            yield Token(WORD, word.decode("ascii"), number)
        elif hexbyte is not None:
            yield Token(HEX, data=bytes.fromhex(hexbyte.decode("ascii")))
        elif symbol is not None:
            yield Token(SYMBOL, symbol.decode("latin-1"))
        elif brace is not None:
            yield Token(OPEN if brace == b"{" else CLOSE)
        elif text is not None:
            yield Token(TEXT, data=text)


def codec_for_charset(charset: int) -> str | None:
    if charset == SYMBOL_CHARSET:
        return SYMBOL_CODEC
    return CHARSETS.get(charset)


def codec_for_codepage(codepage: int) -> str | None:
    """A Python codec for a Windows code page number (\\ansicpgN, \\cpgN), or None."""
    if codepage == 65001:
        return "utf-8"
    for name in (f"cp{codepage}", "mac_roman" if codepage == 10000 else ""):
        if not name:
            continue
        try:
            codecs.lookup(name)
        except LookupError:
            continue
        return name
    return None


def decode(raw: bytes, codec: str) -> tuple[str, bool]:
    """`raw` in `codec`; bytes it cannot map fall back to cp1252, then Latin-1 (every byte is a
    character there), so the text never holds U+FFFD. The flag says a fallback was needed."""
    if codec == SYMBOL_CODEC:
        return "".join(chr(0xF000 + b) if b >= 0x20 else chr(b) for b in raw), False
    try:
        return raw.decode(codec), False
    except (UnicodeDecodeError, LookupError):
        pass
    try:
        return raw.decode("cp1252"), True
    except UnicodeDecodeError:
        return raw.decode("latin-1"), True
