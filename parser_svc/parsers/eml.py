"""EML (RFC 5322 / MIME) → ReadingPackage.

`package.email` holds the headers (RFC 2047 words decoded in any charset, the date as ISO
8601); the body is ONE page (see mail_parts.body_page for the choice between a plain and an
HTML alternative); every other leaf part is an attachment parsed as its own package, a
message/rfc822 part through this parser one level down (mail_parts bounds the nesting).
"""

from __future__ import annotations

import email
from email import errors, policy
from email.message import Message

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseOptions, ProgressFn, corrupt
from parser_svc.parsers.mail_parts import (
    Headers,
    Part,
    add_attachments,
    body_page,
    capped,
    nesting,
    new_package,
)
from parser_svc.parsers.mail_text import (
    addresses,
    decode_bytes,
    decode_words,
    header_str,
    iso_date,
    unflow,
)

_BODY_TYPES = ("text/plain", "text/html")


def parse_eml(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    with nesting(options):
        message = email.message_from_bytes(data, policy=policy.compat32)
        if not message.keys():
            raise corrupt("the e-mail has no headers: it is not an RFC 5322 message")
        return _package(message, progress, options)


def _package(message: Message, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    package = new_package("eml", headers(message))
    walk = _Walk()
    walk.visit(message, group=False)
    parts = capped(package, walk.parts, progress)
    body_page(package, walk.plain, walk.html, options)
    if any(isinstance(d, _TRUNCATED) for d in _defects(message)):
        package.warnings.append(
            "the message ends before its last MIME part does (truncated?): what it holds was read"
        )
    add_attachments(package, parts, progress, options)
    return package


def headers(message: Message) -> Headers:
    def one(name: str) -> str:
        return decode_words(message.get(name, ""))

    def listed(name: str) -> list[str]:
        return addresses(list(message.get_all(name, [])))

    sender = listed("From")
    reply_to = listed("Reply-To")
    return Headers(
        sender=sender[0] if sender else one("From"),
        to=listed("To"),
        cc=listed("Cc"),
        bcc=listed("Bcc"),
        subject=one("Subject"),
        date=iso_date(header_str(message.get("Date", ""))),
        message_id=one("Message-ID"),
        reply_to=", ".join(reply_to),
        in_reply_to=one("In-Reply-To"),
    )


# What the email package notes in a multipart whose boundaries stop (a cut message).
_TRUNCATED = (errors.StartBoundaryNotFoundDefect, errors.CloseBoundaryNotFoundDefect)


def _defects(message: Message) -> list[object]:
    found: list[object] = []
    for part in message.walk():
        found.extend(getattr(part, "defects", []))
    return found


def _text(part: Message) -> str:
    payload = part.get_payload(decode=True)
    data = payload if isinstance(payload, bytes) else b""
    text = decode_bytes(data, part.get_content_charset())
    if part.get_content_type() == "text/plain" and _param(part, "format") == "flowed":
        return unflow(text, _param(part, "delsp") == "yes")
    return text


def _param(part: Message, name: str) -> str:
    value = part.get_param(name)
    return value.strip().lower() if isinstance(value, str) else ""


def _described(part: Message) -> Message:
    """A part's Content-Type and Content-Disposition, 8-bit bytes in them decoded (asked of
    the part itself, the email package would replace them with U+FFFD)."""
    probe = Message()
    probe.set_default_type(part.get_default_type())
    for name in ("Content-Type", "Content-Disposition"):
        value = part.get(name)
        if value is not None:
            probe[name] = header_str(value)
    return probe


def _filename(part: Message) -> str:
    value = part.get_param("filename", header="content-disposition")
    if value is None:
        value = part.get_param("name")
    if isinstance(value, tuple):  # RFC 2231: (charset, language, text as Latin-1 bytes)
        charset, _, text = value
        return decode_words(decode_bytes(str(text).encode("latin-1", "replace"), charset))
    return decode_words(email.utils.unquote(value)) if isinstance(value, str) else ""


def _is_attachment(part: Message) -> bool:
    disposition = (part.get_content_disposition() or "").lower()
    return disposition == "attachment" or bool(_filename(part))


class _Walk:
    """The MIME tree in order: the body (the first text part, or the first alternative group)
    and the parts that are attachments."""

    def __init__(self) -> None:
        self.plain: str | None = None
        self.html: str | None = None
        self.closed = False
        self.parts: list[Part] = []

    def visit(self, part: Message, group: bool) -> None:
        described = _described(part)
        ctype = described.get_content_type()
        if ctype == "message/rfc822":
            self.parts.append(_nested(part, described))
            return
        if part.is_multipart():
            opened = ctype == "multipart/alternative" and not self.closed and not group
            for sub in part.get_payload():
                if isinstance(sub, Message):
                    self.visit(sub, group or opened)
            if opened:
                self.closed = True
            return
        if ctype in _BODY_TYPES and not _is_attachment(described) and (group or not self.closed):
            slot = "plain" if ctype == "text/plain" else "html"
            if getattr(self, slot) is None:
                setattr(self, slot, _text(part))
                self.closed = self.closed or not group
                return
        payload = part.get_payload(decode=True)
        disposition = (described.get_content_disposition() or "").lower()
        inline = disposition == "inline" or (disposition != "attachment" and "Content-ID" in part)
        self.parts.append(
            Part(
                filename=_filename(described),
                declared_type=ctype,
                data=payload if isinstance(payload, bytes) else b"",
                inline=inline,
            )
        )


def _nested(part: Message, described: Message) -> Part:
    payload = part.get_payload()
    inner = payload[0] if isinstance(payload, list) and payload else None
    if isinstance(inner, Message):
        data = inner.as_bytes(policy=policy.compat32)
    else:
        raw = part.get_payload(decode=True)
        data = raw if isinstance(raw, bytes) else b""
    name = _filename(described)
    if not name and isinstance(inner, Message):
        name = (decode_words(inner.get("Subject", "")) or "message") + ".eml"
    return Part(filename=name, declared_type="message/rfc822", data=data, nested=parse_eml)
