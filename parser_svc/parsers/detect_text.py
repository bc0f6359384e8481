"""Sniffing content that has no magic number: is it text, and which kind of text?

Runs in the API process on the first 64 KiB of an upload, so it decodes only for looking (the
parse child detects the charset properly) and every pattern is linear. The kinds, tried in this
order: "html" (a doctype, <html>, <head> or <body> first, or XHTML), "eml" (a block of RFC 5322
header fields first, with From/Received/Message-ID/MIME-Version among them), "csv" (two or
more records with the same number of fields by one delimiter), "markdown" (its syntax in two
ways, or a fence or table rule), else "text". Content with more than 1% NULs or other control
characters (8 in a short file), unless it reads as UTF-16 (a byte order mark, or every other
byte zero), is not text.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass

TEXT_KINDS = ("html", "eml", "csv", "markdown", "text")

_BOMS = (
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
# Control bytes that text does not carry (tab, LF, VT, FF, CR and ESC are allowed), NUL
# among them.
_CONTROLS = bytes(b for b in range(32) if b not in (9, 10, 11, 12, 13, 27)) + b"\x7f"


@dataclass(frozen=True)
class TextSniff:
    kind: str | None
    label: str


def sniff_text(head: bytes) -> TextSniff:
    """`head`: the first bytes of the content (at most the sniffing window)."""
    text = _decode(bytes(head))
    if text is None:
        return TextSniff(None, "binary content of an unrecognised type")
    body = text.lstrip("\ufeff \t\r\n")
    if not body:
        return TextSniff(None, "content of blank text only")
    if _HTML.match(body):
        return TextSniff("html", "an HTML page")
    if body.startswith("<?xml") or body.startswith("<svg"):
        return TextSniff(None, "an SVG image" if "<svg" in body[:2000] else "an XML document")
    if _is_email(body):
        return TextSniff("eml", "an e-mail message (EML)")
    lines = body.splitlines()
    if len(head) >= 64 * 1024 and len(lines) > 1:
        lines = lines[:-1]  # cut by the window
    if _is_delimited(lines):
        return TextSniff("csv", "a CSV/TSV table")
    if _is_markdown(lines):
        return TextSniff("markdown", "a Markdown document")
    return TextSniff("text", "a plain text document")


def _decode(head: bytes) -> str | None:
    """The text for looking at, or None when `head` is not text."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return head.decode(codec, "ignore")
    even, odd = head[0::2], head[1::2]
    for zeros, others, codec in ((odd, even, "utf-16-le"), (even, odd, "utf-16-be")):
        if zeros and zeros.count(0) > 0.4 * len(zeros) and others.count(0) < 0.05 * len(others):
            wide = head.decode(codec, "ignore")
            controls = sum(wide.count(chr(b)) for b in _CONTROLS)
            return wide if controls <= max(2, len(wide) // 100) else None
    controls = sum(head.count(bytes([b])) for b in _CONTROLS)
    if controls > max(8, len(head) // 100):
        return None  # a stray NUL or two is text; many are not
    return head.decode("utf-8", "replace")  # legacy 8-bit charsets are text too


_HTML = re.compile(
    r"(?:<\?xml[^>]{0,200}\?>\s*)?(?:<!--.{0,4000}?-->\s*)*"
    r"(?:<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>])",
    re.IGNORECASE | re.DOTALL,
)
_HEADER = re.compile(r"[!-9;-~]{1,76}:")
_MAIL_FIELDS = frozenset({"from", "received", "message-id", "mime-version", "return-path"})
_COMMON_FIELDS = _MAIL_FIELDS | {"to", "subject", "date", "cc", "content-type", "delivered-to"}


def _is_email(body: str) -> bool:
    """A header block first: every line a field or a folded continuation, up to a blank line,
    with at least three fields, one of them a field only mail carries."""
    lines = body.splitlines()[:300]
    if lines and lines[0].startswith("From "):  # an mbox envelope line
        lines = lines[1:]
    names: set[str] = set()
    for line in lines:
        if not line.strip():
            break
        if line[0] in " \t" and names:
            continue
        match = _HEADER.match(line)
        if match is None:
            return False
        names.add(match.group()[:-1].lower())
    return len(names) >= 3 and bool(names & _MAIL_FIELDS) and len(names & _COMMON_FIELDS) >= 2


def _is_delimited(lines: list[str]) -> bool:
    """Two or more records, each with the same number (2+) of fields by one delimiter. A comma
    or semicolon followed by a space in most fields is prose, not a table."""
    sample = [line for line in lines[:60] if line.strip()]
    if len(sample) < 2:
        return False
    for delimiter in ("\t", ",", ";", "|"):
        if delimiter not in sample[0]:
            continue
        try:
            records = list(csv.reader(sample, delimiter=delimiter))
        except csv.Error:
            continue
        widths = {len(record) for record in records[:-1] or records}
        if len(widths) != 1 or widths == {1}:
            continue
        if len(records) < 3 and delimiter not in "\t;":
            continue
        fields = [field for record in records for field in record[1:]]
        spaced = sum(field.startswith(" ") for field in fields)
        if delimiter != "\t" and spaced > len(fields) // 2:
            continue
        if delimiter == "|" and sample[0].lstrip().startswith("|"):
            continue  # a Markdown table
        return True
    return False


_MARKDOWN = (
    ("heading", re.compile(r"#{1,6}\s+\S")),
    ("fence", re.compile(r"(?:```|~~~)")),
    ("list", re.compile(r"\s{0,6}(?:[-*+]|\d{1,9}[.)])\s+\S")),
    ("quote", re.compile(r">\s")),
    ("table", re.compile(r"\s*\|?\s*:?-{3,}:?\s*\|")),
    ("link", re.compile(r".*\[[^\]\n]{1,200}\]\([^)\s]{1,500}\)")),
    ("emphasis", re.compile(r".*(?:\*\*|__)\S[^*\n]{0,200}(?:\*\*|__)")),
)


def _is_markdown(lines: list[str]) -> bool:
    """Markdown's syntax used in two ways (a heading and a list, a link and emphasis), or a
    fence or a table rule alone."""
    seen: set[str] = set()
    for line in lines[:400]:
        for name, pattern in _MARKDOWN:
            if name not in seen and pattern.match(line):
                seen.add(name)
    return len(seen) >= 2 or bool(seen & {"fence", "table"})
