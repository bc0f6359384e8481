"""Outlook MSG (an OLE2 / CFB compound file of MAPI properties) → ReadingPackage, like EML.

Properties are streams `__substg1.0_PPPPTTTT` (PPPP the property id, TTTT its type: 001F
UTF-16LE, 001E 8-bit text in the message's code page, 0102 binary) and fixed-size values in
`__properties_version1.0`. The transport headers (007D), when the message was sent, give the
date, ids and addresses as the e-mail module reads them; a draft has the MAPI properties only.
Recipients are `__recip_version1.0_#N` storages, attachments `__attach_version1.0_#N` (a
message attached is the storage `__substg1.0_3701000D` in it, parsed one level down).
"""

from __future__ import annotations

import email
import io
import struct
from datetime import UTC, datetime, timedelta
from email import policy
from typing import Any

import olefile  # type: ignore[import-untyped]

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseFailure, ParseOptions, ProgressFn, corrupt
from parser_svc.parsers.eml import headers as mime_headers
from parser_svc.parsers.formats import parser_for
from parser_svc.parsers.mail_parts import (
    Headers,
    Part,
    add_attachments,
    body_page,
    capped,
    nesting,
    new_package,
)
from parser_svc.parsers.mail_text import address, decode_bytes, decode_words
from parser_svc.parsers.msg_rtf import decompress_rtf

_PROPS = "__properties_version1.0"
_RECIP, _ATTACH = "__recip_version1.0_#", "__attach_version1.0_#"
_EMBEDDED = "__substg1.0_3701000D"
# Windows code pages Python names otherwise than cpNNN.
_CODE_PAGES = {
    65001: "utf-8",
    20127: "ascii",
    20866: "koi8-r",
    21866: "koi8-u",
    50220: "iso-2022-jp",
    51932: "euc-jp",
    51949: "euc-kr",
    54936: "gb18030",
    936: "gbk",
    28603: "iso8859-13",
    28605: "iso8859-15",
} | {28590 + n: f"iso8859-{n}" for n in range(1, 10)}
_FILETIME_EPOCH = datetime(1601, 1, 1, tzinfo=UTC)


def parse_msg(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    with nesting(options):
        try:
            # A FAT or directory pointing past the end (a truncated file) raises, rather than
            # reading streams as empty.
            ole = olefile.OleFileIO(io.BytesIO(data), raise_defects=olefile.DEFECT_INCORRECT)
        except Exception as err:  # olefile raises OSError and others for a damaged file
            raise corrupt(f"the Outlook message (OLE2 file) cannot be opened: {err}") from err
        try:
            store = _Store(ole, [], 32, len(data))
            if not store.has_properties():
                raise corrupt("the OLE2 file holds no Outlook message properties")
            return _package(store, progress, options)
        except (OSError, ValueError, struct.error) as err:
            raise corrupt(f"the Outlook message is damaged: {err}") from err


class _Store:
    """One message's (or recipient's, attachment's) properties in the compound file."""

    def __init__(self, ole: Any, prefix: list[str], header: int, limit: int) -> None:
        self.ole, self.prefix, self.limit = ole, prefix, limit
        self.fixed: dict[int, bytes] = {}
        raw = self.stream(_PROPS) or b""
        for at in range(header, len(raw) - 15, 16):
            tag = struct.unpack_from("<I", raw, at)[0]
            self.fixed[tag] = raw[at + 8 : at + 16]
        self.charset = self.code_page(0x3FFD) or self.code_page(0x3FDE)

    def code_page(self, prop: int) -> str:
        """The Python codec of a code-page property ("" when unset)."""
        page = self.number(prop) or 0
        return _CODE_PAGES.get(page, f"cp{page}") if page > 0 else ""

    def has_properties(self) -> bool:
        return bool(self.ole.exists(_PROPS)) or any(
            name.startswith("__substg1.0_") for name in self.children(streams=True)
        )

    def children(self, *, streams: bool) -> list[str]:
        depth = len(self.prefix) + 1
        found = self.ole.listdir(streams=streams, storages=not streams)
        return sorted(path[-1] for path in found if len(path) == depth and path[:-1] == self.prefix)

    def stream(self, name: str) -> bytes | None:
        path = [*self.prefix, name]
        if not self.ole.exists(path) or self.ole.get_type(path) != 2:  # 2: a stream
            return None
        if self.ole.get_size(path) > self.limit:
            raise ValueError(f"the stream {'/'.join(path)} is larger than the file")
        data: bytes = self.ole.openstream(path).read()
        return data

    def text(self, prop: int) -> str:
        wide = self.stream(f"__substg1.0_{prop:04X}001F")
        if wide is not None:
            return decode_bytes(wide, "utf-16-le").rstrip("\x00")
        narrow = self.stream(f"__substg1.0_{prop:04X}001E")
        return decode_bytes(narrow, self.charset).rstrip("\x00") if narrow is not None else ""

    def binary(self, prop: int) -> bytes | None:
        return self.stream(f"__substg1.0_{prop:04X}0102")

    def number(self, prop: int) -> int | None:
        value = self.fixed.get((prop << 16) | 0x0003)
        return struct.unpack_from("<i", value)[0] if value else None

    def flag(self, prop: int) -> bool:
        value = self.fixed.get((prop << 16) | 0x000B)
        return bool(value and value[0])

    def time(self, prop: int) -> str:
        value = self.fixed.get((prop << 16) | 0x0040)
        if not value:
            return ""
        ticks = struct.unpack_from("<Q", value)[0]
        if not ticks:
            return ""
        try:
            return (_FILETIME_EPOCH + timedelta(microseconds=ticks // 10)).isoformat()
        except OverflowError:
            return ""


def _package(store: _Store, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    package = new_package("msg", _headers(store))
    parts = capped(package, _attachments(store), progress)
    html_raw = store.binary(0x1013)
    html_charset = store.code_page(0x3FDE) or store.charset
    html = decode_bytes(html_raw, html_charset) if html_raw is not None else None
    if html is None and store.text(0x1013):
        html = store.text(0x1013)
    plain = store.text(0x1000) or None
    compressed = store.binary(0x1009) if html is None and plain is None else None
    if compressed is None or not _rtf_body(package, compressed, options):
        body_page(package, plain, html, options)
    add_attachments(package, parts, progress, options)
    return package


def _rtf_body(package: rp.ReadingPackage, compressed: bytes, options: ParseOptions) -> bool:
    """The body from the compressed RTF (a message with no plain or HTML body) through the RTF
    parser; False, with a warning, when it cannot be read."""
    try:
        rtf = decompress_rtf(compressed, options.max_unzipped_bytes)
        parsed = parser_for("rtf")(rtf, lambda *_: None, options)
    except ParseFailure as failure:
        package.warnings.append(f"the message's RTF body cannot be read: {failure.message}")
        return False
    page = parsed.pages[0] if parsed.pages else rp.Page()
    page.number = 1
    package.pages.append(page)
    package.assets.extend(parsed.assets)
    package.warnings.extend(parsed.warnings)
    return True


def _recipients(store: _Store) -> dict[int, list[str]]:
    """Recipient addresses by type (1 To, 2 Cc, 3 Bcc), from the recipient storages."""
    out: dict[int, list[str]] = {1: [], 2: [], 3: []}
    for name in store.children(streams=False):
        if not name.startswith(_RECIP):
            continue
        recip = _Store(store.ole, [*store.prefix, name], 8, store.limit)
        smtp = recip.text(0x39FE) or recip.text(0x3003)
        found = address(recip.text(0x3001), smtp)
        if found:
            out.setdefault(recip.number(0x0C15) or 1, []).append(found)
    return out


def _split(display: str) -> list[str]:
    return [name.strip() for name in display.split(";") if name.strip()]


def _headers(store: _Store) -> Headers:
    recipients = _recipients(store)
    sender_email = store.text(0x5D01) or store.text(0x0C1F) or store.text(0x0065)
    found = Headers(
        sender=address(store.text(0x0C1A) or store.text(0x0042), sender_email),
        to=recipients[1] or _split(store.text(0x0E04)),
        cc=recipients[2] or _split(store.text(0x0E03)),
        bcc=recipients[3] or _split(store.text(0x0E02)),
        subject=decode_words(store.text(0x0037)),
        date=store.time(0x0039) or store.time(0x0E06),
        message_id=store.text(0x1035),
        in_reply_to=store.text(0x1042),
    )
    transport = store.text(0x007D)
    if transport.strip():
        sent = mime_headers(
            email.message_from_string(transport.strip() + "\n\n", policy=policy.compat32)
        )
        found.sender = sent.sender or found.sender
        found.to, found.cc = sent.to or found.to, sent.cc or found.cc
        found.subject = found.subject or sent.subject
        found.date = sent.date or found.date
        found.message_id = sent.message_id or found.message_id
        found.reply_to = sent.reply_to
        found.in_reply_to = sent.in_reply_to or found.in_reply_to
    return found


def _attachments(store: _Store) -> list[Part]:
    parts: list[Part] = []
    for name in store.children(streams=False):
        if not name.startswith(_ATTACH):
            continue
        attach = _Store(store.ole, [*store.prefix, name], 8, store.limit)
        filename = attach.text(0x3707) or attach.text(0x3704) or attach.text(0x3001)
        inline = attach.flag(0x7FFE) or bool((attach.number(0x3714) or 0) & 0x4)
        declared = attach.text(0x370E).lower()
        if attach.ole.exists([*attach.prefix, _EMBEDDED]):
            # method 5: a message; 6: an OLE object (an embedded Word or Excel object)
            embedded = _embedded(attach, filename, inline)
            if attach.number(0x3705) == 6:
                embedded.declared_type, embedded.nested = declared, _ole_object
                embedded.filename = filename or "object"
            parts.append(embedded)
            continue
        data = attach.binary(0x3701) or b""
        parts.append(Part(filename=filename, declared_type=declared, data=data, inline=inline))
    return parts


def _ole_object(_: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    raise ParseFailure(
        ErrorReason.UNSUPPORTED_FORMAT,
        "an OLE object embedded in the message (not a file attachment) cannot be parsed",
    )


def _embedded(attach: _Store, filename: str, inline: bool) -> Part:
    """A message attached to the message: its bytes (for size and sha256) are its streams'."""
    prefix = [*attach.prefix, _EMBEDDED]
    streams = [p for p in attach.ole.listdir(streams=True) if p[: len(prefix)] == prefix]
    data = b"".join(attach.ole.openstream(p).read() for p in sorted(streams))

    def parse(_: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
        with nesting(options):
            inner = _Store(attach.ole, prefix, 24, attach.limit)
            return _package(inner, progress, options)

    inner_subject = _Store(attach.ole, prefix, 24, attach.limit).text(0x0037)
    name = filename or (inner_subject or "message") + ".msg"
    return Part(
        filename=name,
        declared_type="application/vnd.ms-outlook",
        data=data,
        inline=inline,
        nested=parse,
    )
