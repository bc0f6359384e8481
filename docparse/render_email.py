"""What the renderers (text, Markdown, HTML) print of an e-mail package (EML, MSG): its header
block above the body, and a section per attachment ("Attachment 1: report.pdf") holding the
attachment's own package rendered, or why it was not read. The TypeScript SDK's
clients/typescript/src/render_email.ts prints the same."""

from __future__ import annotations

from docparse.render_layout import one_line
from docparse.v1 import reading_package_pb2 as rp


def is_email(package: rp.ReadingPackage) -> bool:
    return package.HasField("email")


def header_fields(package: rp.ReadingPackage, *, subject: bool) -> list[tuple[str, str]]:
    """The header block's lines as (name, value), the empty ones left out; the subject only
    when asked (Markdown and HTML print it as the heading instead)."""
    e = package.email
    fields = [
        ("From", e.sender),
        ("To", ", ".join(e.to)),
        ("Cc", ", ".join(e.cc)),
        ("Bcc", ", ".join(e.bcc)),
        ("Date", e.date),
    ]
    if subject:
        fields.append(("Subject", e.subject))
    return [(name, one_line(value)) for name, value in fields if one_line(value)]


def attachment_title(attachment: rp.Attachment) -> str:
    name = one_line(attachment.filename) or "(no name)"
    return f"Attachment {attachment.number}: {name}"


def attachment_note(attachment: rp.Attachment) -> str:
    """Why an attachment has no package, in words."""
    reason = f" ({attachment.reason})" if attachment.reason else ""
    message = one_line(attachment.reason_message)
    return f"Not read{reason}: {message}" if message else f"Not read{reason}"
