"""EML limits and hostile input: a zip bomb attached, messages nested past the depth limit,
too many attachments or bytes, truncation, random damage. Fixture builders: test_email.py."""

from __future__ import annotations

import io
import random
import resource
import subprocess
import sys
import time
import zipfile
from email.mime.base import MIMEBase
from email.mime.message import MIMEMessage
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

import pytest

from docparse.reasons import ErrorReason
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.formats import parse_detected
from parser_svc.parsers.mail_parts import MAX_ATTACHMENTS, MAX_DEPTH
from tests.parser_svc.parsers.test_email import OPTIONS, attached, parse, pdf, with_attachments


def zip_bomb(word: bool, inflated: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        if word:
            archive.writestr(
                "[Content_Types].xml",
                '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                '<Override PartName="/word/document.xml" ContentType="application/vnd.'
                'openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
            )
            name = "word/document.xml"
        else:
            name = "zeros.bin"
        with archive.open(name, "w", force_zip64=True) as member:
            chunk = b"\0" * (1 << 20)
            for _ in range(inflated >> 20):
                member.write(chunk)
    return out.getvalue()


def test_a_zip_bomb_attachment_is_refused_and_stays_bounded() -> None:
    bomb = zip_bomb(word=True, inflated=256 << 20)
    options = ParseOptions.defaults(max_unzipped_bytes=64 << 20)
    message = with_attachments(
        attached(bomb, "bomb.docx"), attached(zip_bomb(False, 1 << 20), "z.zip")
    )
    before_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    package = parse(message.as_bytes(), options)
    elapsed = time.monotonic() - started
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_rss) / 1024
    bomb_part, plain_zip = package.attachments
    assert bomb_part.reason == ErrorReason.DOCUMENT_TOO_LARGE
    assert "zip bomb" in bomb_part.reason_message
    assert plain_zip.reason == ErrorReason.UNSUPPORTED_FORMAT
    assert grown_mb < 64, f"the parse grew the process by {grown_mb:.0f} MB"
    assert elapsed < 10  # generous: nothing is inflated


def nested(levels: int) -> bytes:
    inner = MIMEText(f"level {levels}", "plain", "utf-8")
    inner["Subject"] = f"level {levels}"
    inner["From"] = "a@example.com"
    message: MIMEBase = inner
    for level in range(levels - 1, 0, -1):
        outer = MIMEMultipart("mixed")
        outer["Subject"] = f"level {level}"
        outer["From"] = "a@example.com"
        outer.attach(MIMEText(f"level {level}", "plain", "utf-8"))
        outer.attach(MIMEMessage(message))
        message = outer
    return message.as_bytes()


def test_messages_inside_messages_are_read_down_to_the_depth_limit() -> None:
    package = parse(nested(MAX_DEPTH + 2))
    chain = []
    current = package
    while True:
        chain.append(current.pages[0].text)
        if not current.attachments:
            break
        attachment = current.attachments[0]
        assert attachment.declared_type == "message/rfc822"
        if not attachment.HasField("package"):
            assert attachment.reason == ErrorReason.DOCUMENT_TOO_LARGE
            assert f"deeper than {MAX_DEPTH}" in attachment.reason_message
            break
        assert attachment.filename == f"level {len(chain) + 1}.eml"
        current = attachment.package
    assert chain == [f"level {n}" for n in range(1, MAX_DEPTH + 1)]


def test_an_eml_file_attached_as_bytes_counts_as_nesting() -> None:
    """An .eml sent as application/octet-stream is sniffed as a message and parsed, within
    the same depth limit as a message/rfc822 part."""
    inner = parse_detected(nested(MAX_DEPTH), lambda *_: None, OPTIONS)
    assert inner.content_type == "eml"
    package = parse(with_attachments(attached(nested(MAX_DEPTH), "fwd.eml")).as_bytes())
    first = package.attachments[0]
    assert first.package.email.subject == "level 1"
    deepest = first.package.attachments[0].package.attachments[0]
    assert deepest.reason == ErrorReason.DOCUMENT_TOO_LARGE


def test_attachment_count_and_total_size_are_bounded() -> None:
    many = [
        attached(f"note {n}".encode(), f"n{n}.txt", "octet-stream")
        for n in range(MAX_ATTACHMENTS + 20)
    ]
    package = parse(with_attachments(*many).as_bytes())
    assert len(package.attachments) == MAX_ATTACHMENTS
    assert any(f"only the first {MAX_ATTACHMENTS}" in w for w in package.warnings)
    size = len(pdf("a"))
    options = ParseOptions.defaults(max_unzipped_bytes=size * 3 // 2)
    two = with_attachments(attached(pdf("a"), "a.pdf", "pdf"), attached(pdf("b"), "b.pdf", "pdf"))
    first, second = parse(two.as_bytes(), options).attachments
    assert first.package.content_type == "pdf"
    assert second.reason == ErrorReason.DOCUMENT_TOO_LARGE and "in all" in second.reason_message


def test_a_truncated_message_keeps_what_arrived() -> None:
    data = with_attachments(attached(pdf("whole"), "a.pdf", "pdf")).as_bytes()
    cut = data[: data.rindex(b"--=")]  # the closing boundary lost
    package = parse(cut)
    assert package.pages[0].text == "See attached."
    assert any("truncated" in w for w in package.warnings)


def test_damaged_messages_fail_with_a_reason_or_read_without_replacement_characters() -> None:
    """Bytes flipped (8-bit garbage in headers, boundaries, parameters) and cuts anywhere:
    every outcome is a package with no U+FFFD or a ParseFailure, never another exception."""
    message = with_attachments(
        attached(pdf("Invoice 117"), "invoice.pdf", "pdf"),
        MIMEMessage(MIMEText("inner é", "plain", "utf-8")),
        body="Hällo",
    )
    message["Subject"] = "=?utf-8?q?Gr=C3=BC=C3=9Fe?="
    data = message.as_bytes()
    rng = random.Random(7)
    outcomes = {"read": 0, "failed": 0}
    for case in range(300):
        damaged = bytearray(data[: rng.randrange(len(data) + 1)] if case % 3 == 0 else data)
        for _ in range(8 if damaged else 0):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        try:
            parse(bytes(damaged))
            outcomes["read"] += 1
        except ParseFailure as failure:
            assert failure.reason == ErrorReason.CORRUPT_DOCUMENT
            outcomes["failed"] += 1
    assert outcomes["read"] > 200, outcomes


_OUT_OF_MEMORY = """
import resource, sys
from tests.parser_svc.parsers.test_email import OPTIONS, attached, pdf, with_attachments
from tests.parser_svc.parsers.test_email_limits import word_needing_memory
from parser_svc.parsers.eml import parse_eml

data = with_attachments(
    attached(word_needing_memory(128 << 20), "big.docx"), attached(pdf("after it"), "a.pdf", "pdf")
).as_bytes()
vm_kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize:"))
limit = (vm_kb + 64 * 1024) * 1024  # 64 MB more than now: the 128 MB part cannot be read
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
package = parse_eml(data, lambda *_: None, OPTIONS)
big, after = package.attachments
print(big.reason, after.package.pages[0].text)
"""


def word_needing_memory(size: int) -> bytes:
    """A Word package whose document part inflates to `size` bytes of spaces (under the
    unzip limit: only memory stops it)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr(
            "[Content_Types].xml",
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            'relationships+xml"/><Override PartName="/word/document.xml" ContentType="'
            'application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            "</Types>",
        )
        archive.writestr(
            "_rels/.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Target="word/document.xml" Type="http://schemas.'
            'openxmlformats.org/officeDocument/2006/relationships/officeDocument"/>'
            "</Relationships>",
        )
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(size >> 24):
                member.write(b" " * (1 << 24))
    return out.getvalue()


@pytest.mark.slow  # inflates 128 MB in a process of its own
def test_an_attachment_that_runs_out_of_memory_leaves_the_message_readable() -> None:
    """Under an address-space limit, as in the parse child: the attachment that needs more
    is refused, the ones after it are still read."""
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", _OUT_OF_MEMORY],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    reason, text = done.stdout.split(" ", 1)
    assert reason == ErrorReason.DOCUMENT_TOO_LARGE
    assert text.strip() == "after it"
