"""Plain text → ReadingPackage: the characters (`text_charset.decode_text`: BOM, UTF-8, then
detection), one Page, or one per form-feed-separated page (\\f, as printers and `pr` paginate);
each page's paragraphs are the runs of lines between blank lines, each a body block with its
lines kept. Pages are counted against options.max_pages before any is built."""

from __future__ import annotations

import re

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseOptions, ProgressFn, too_large
from parser_svc.parsers.text_charset import decode_text

_BLANK_LINES = re.compile(r"\n[ \t\v\u00a0\u3000]*\n\s*")
_LINE_END = re.compile(r"\r\n?|[\u2028\u2029\x85]")


def paragraphs(text: str) -> list[str]:
    """Runs of lines separated by blank lines, their trailing spaces removed."""
    out = []
    for paragraph in _BLANK_LINES.split(text):
        lines = [line.rstrip() for line in paragraph.split("\n")]
        joined = "\n".join(lines).strip("\n")
        if joined.strip():
            out.append(joined)
    return out


def parse_text(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    decoded = decode_text(data, "text file")
    text, encoding = _LINE_END.sub("\n", decoded.text), decoded.encoding
    del decoded
    pages = text.count("\f") + 1
    if pages > options.max_pages:
        raise too_large(
            f"the text file has {pages} form-feed-separated pages; the limit is {options.max_pages}"
        )
    package = rp.ReadingPackage(content_type="text")
    package.metadata.extra["charset"] = encoding
    parts = text.split("\f") if pages > 1 else [text]
    del text
    # Trailing form feeds (a last page ended by one) make no empty page.
    while len(parts) > 1 and not parts[-1].strip():
        parts.pop()
    total = len(parts)
    progress(0, total, "text")
    for number, part in enumerate(parts, start=1):
        page = package.pages.add(number=number)
        blocks = paragraphs(part)
        for block in blocks:
            page.blocks.add(text=block, source="text")
        page.text = "\n\n".join(blocks)
        progress(number, total, "text")
    if not any(page.text for page in package.pages):
        package.warnings.append("the text file holds no text")
    return package
