"""Outlook MSG: compound files built here (cfb_writer.py) with the MAPI properties Outlook
writes: headers from the properties and from the transport headers, Unicode and 8-bit
(code page) strings, plain and HTML bodies, attachments by value and a message attached."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import olefile  # type: ignore[import-untyped]
import pymupdf
import pytest

from docparse.reasons import ErrorReason
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.detect import detect_type
from parser_svc.parsers.msg import parse_msg
from tests.parser_svc.parsers.cfb_writer import compound_file, fixed_props

OPTIONS = ParseOptions.defaults()
PT_LONG, PT_BOOLEAN, PT_SYSTIME = 0x0003, 0x000B, 0x0040


def parse(data: bytes) -> rp.ReadingPackage:
    package = parse_msg(data, lambda *_: None, OPTIONS)
    assert "\ufffd" not in str(package)
    return package


def strings(prefix: str, values: dict[int, str | bytes], ansi: str = "") -> dict[str, bytes]:
    """Property streams: str values as Unicode (001F), or 8-bit (001E) in `ansi`; bytes as
    binary (0102)."""
    out: dict[str, bytes] = {}
    for prop, value in values.items():
        if isinstance(value, bytes):
            out[f"{prefix}__substg1.0_{prop:04X}0102"] = value
        elif ansi:
            out[f"{prefix}__substg1.0_{prop:04X}001E"] = value.encode(ansi) + b"\0"
        else:
            out[f"{prefix}__substg1.0_{prop:04X}001F"] = value.encode("utf-16-le")
    return out


def filetime(when: datetime) -> bytes:
    delta = when - datetime(1601, 1, 1, tzinfo=UTC)
    return struct.pack("<Q", int(delta.total_seconds() * 10_000_000))


def long(value: int) -> bytes:
    return struct.pack("<i", value)


def message_streams(
    prefix: str,
    header: int,
    props: dict[int, str | bytes],
    fixed: dict[int, bytes] | None = None,
    recipients: list[tuple[str, str, int]] = (),  # type: ignore[assignment]
    attachments: list[dict[str, bytes]] = (),  # type: ignore[assignment]
    ansi: str = "",
) -> dict[str, bytes]:
    out = strings(prefix, props, ansi)
    out[f"{prefix}__properties_version1.0"] = fixed_props(header, fixed or {})
    for n, (name, smtp, kind) in enumerate(recipients):
        folder = f"{prefix}__recip_version1.0_#{n:08X}/"
        out |= strings(folder, {0x3001: name, 0x39FE: smtp})
        out[f"{folder}__properties_version1.0"] = fixed_props(8, {0x0C150000 | PT_LONG: long(kind)})
    for n, streams in enumerate(attachments):
        folder = f"{prefix}__attach_version1.0_#{n:08X}/"
        out |= {folder + path: data for path, data in streams.items()}
    return out


def pdf(text: str) -> bytes:
    document = pymupdf.open()  # type: ignore[no-untyped-call]
    document.new_page().insert_text((72, 72), text)
    data: bytes = document.tobytes()  # type: ignore[no-untyped-call]
    return data


def attachment(filename: str, data: bytes, mime: str, hidden: bool = False) -> dict[str, bytes]:
    out = strings("", {0x3707: filename, 0x3704: filename[:8], 0x370E: mime, 0x3701: data})
    fixed = {0x37050000 | PT_LONG: long(1)}
    if hidden:
        fixed[0x7FFE0000 | PT_BOOLEAN] = b"\x01"
    out["__properties_version1.0"] = fixed_props(8, fixed)
    return out


def sent_message() -> bytes:
    transport = (
        "Received: from mx.example.com\r\n"
        "From: =?utf-8?q?Ren=C3=A9e_Dupont?= <renee@example.fr>\r\n"
        "To: Bob <bob@example.com>\r\n"
        "Date: Wed, 4 Mar 2026 09:00:00 -0500\r\n"
        "Message-ID: <outlook-1@example.fr>\r\n"
        "Subject: Devis\r\n"
    )
    embedded = message_streams(
        "__substg1.0_3701000D/",
        24,
        {0x0037: "Ancien devis", 0x1000: "Texte du message joint.", 0x0C1A: "Paul"},
    )
    attach_embedded = embedded | strings("", {0x3707: "Ancien devis.msg"})
    attach_embedded["__properties_version1.0"] = fixed_props(8, {0x37050000 | PT_LONG: long(5)})
    return compound_file(
        message_streams(
            "",
            32,
            {
                0x0037: "Devis n° 42",
                0x0C1A: "Renée Dupont",
                0x0C1F: "/O=EXCHANGE/OU=FIRST/CN=RECIPIENTS/CN=RDUPONT",
                0x0E04: "Bob",
                0x1000: "Bonjour Bob,\r\n\r\nVoici le devis.\r\nCordialement",
                0x007D: transport,
            },
            fixed={0x3FFD0000 | PT_LONG: long(65001)},
            recipients=[("Bob", "bob@example.com", 1), ("Chloé", "chloe@example.fr", 2)],
            attachments=[
                attachment("Devis 42.pdf", pdf("Devis 42: 1 200,00 EUR"), "application/pdf"),
                attach_embedded,
                attachment("logo.bin", bytes(range(256)) * 4, "image/png", hidden=True),
            ],
        )
    )


def test_the_fixture_is_a_compound_file_olefile_reads() -> None:
    data = sent_message()
    ole = olefile.OleFileIO(data)
    assert ole.exists("__substg1.0_0037001F")
    assert ole.exists("__attach_version1.0_#00000001/__substg1.0_3701000D/__substg1.0_0037001F")
    assert detect_type(data) == "msg"


def test_a_sent_message_reads_its_transport_headers() -> None:
    package = parse(sent_message())
    e = package.email
    assert package.content_type == "msg"
    assert e.sender == "Renée Dupont <renee@example.fr>"  # the SMTP address, not Exchange's
    assert list(e.to) == ["Bob <bob@example.com>"]
    assert list(e.cc) == ["Chloé <chloe@example.fr>"]  # from the recipient table
    assert e.subject == "Devis n° 42"
    assert e.date == "2026-03-04T09:00:00-05:00"
    assert e.message_id == "<outlook-1@example.fr>"
    assert package.metadata.title == "Devis n° 42"
    blocks = [b.text for b in package.pages[0].blocks]
    assert blocks == ["Bonjour Bob,", "Voici le devis.\nCordialement"]


def test_attachments_by_value_and_a_message_attached() -> None:
    pdf_part, embedded, logo = parse(sent_message()).attachments
    assert (pdf_part.filename, pdf_part.declared_type) == ("Devis 42.pdf", "application/pdf")
    assert "Devis 42: 1 200,00 EUR" in pdf_part.package.pages[0].text
    assert embedded.filename == "Ancien devis.msg"
    assert embedded.package.content_type == "msg"
    assert embedded.package.email.subject == "Ancien devis"
    assert embedded.package.pages[0].text == "Texte du message joint."
    assert logo.inline and logo.reason == ErrorReason.UNSUPPORTED_FORMAT
    markdown = to_markdown(parse(sent_message()))
    assert "## Attachment 2: Ancien devis.msg\n\n# Ancien devis\n\n**From:** Paul" in markdown


def test_a_draft_with_8bit_strings_in_its_code_page_and_an_html_body() -> None:
    html = "<html><body><h1>Отчёт</h1><ul><li>пункт один</li></ul></body></html>"
    sent = datetime(2026, 3, 5, 8, 30, tzinfo=UTC)
    data = compound_file(
        message_streams(
            "",
            32,
            {
                0x0037: "Отчёт за март",
                0x0C1A: "Иван",
                0x5D01: "ivan@example.ru",
                0x1000: "Отчёт\nпункт один",  # noqa: RUF001
                0x1013: html.encode("cp1251"),
            },
            fixed={0x3FFD0000 | PT_LONG: long(1251), 0x00390000 | PT_SYSTIME: filetime(sent)},
            recipients=[("Ольга", "olga@example.ru", 1), ("Архив", "archive@example.ru", 3)],
            ansi="cp1251",
        )
    )
    package = parse(data)
    e = package.email
    assert (e.subject, e.sender) == ("Отчёт за март", "Иван <ivan@example.ru>")
    assert (list(e.to), list(e.bcc)) == (
        ["Ольга <olga@example.ru>"],
        ["Архив <archive@example.ru>"],
    )
    assert e.date == "2026-03-05T08:30:00+00:00"
    page = package.pages[0]  # the HTML has structure: it is the body
    assert [(b.role, b.text) for b in page.blocks if b.role] == [
        ("heading", "Отчёт"),
        ("list_item", "пункт один"),
    ]


@pytest.mark.parametrize(
    "data",
    [
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600,  # a header and nothing else
        compound_file({"WordDocument": b"x" * 100}),  # an OLE file with no message in it
    ],
)
def test_damaged_or_foreign_compound_files_are_corrupt(data: bytes) -> None:
    with pytest.raises(ParseFailure) as failure:
        parse_msg(data, lambda *_: None, OPTIONS)
    assert failure.value.reason == ErrorReason.CORRUPT_DOCUMENT


def test_a_truncated_message_is_corrupt_not_a_crash() -> None:
    data = sent_message()
    with pytest.raises(ParseFailure) as failure:
        parse_msg(data[: len(data) // 2], lambda *_: None, OPTIONS)
    assert failure.value.reason == ErrorReason.CORRUPT_DOCUMENT


def test_damaged_compound_files_fail_with_corrupt_document_never_another_error() -> None:
    """Cuts at every 97th byte and 300 files with bytes flipped: a package without U+FFFD or
    CORRUPT_DOCUMENT, whatever olefile meets."""
    import random

    data = sent_message()
    rng = random.Random(3)
    cases = [data[:cut] for cut in range(0, len(data), 97)]
    for _ in range(300):
        flipped = bytearray(data)
        for _ in range(5):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        cases.append(bytes(flipped))
    read = 0
    for case in cases:
        try:
            parse(case)
            read += 1
        except ParseFailure as failure:
            assert failure.reason == ErrorReason.CORRUPT_DOCUMENT
    assert 0 < read < len(cases)


# [MS-OXRTFCP] 3.1.1's example: LZFu-compressed "{\rtf1\ansi\ansicpg1252\pard hello world}\r\n"
LZFU_HELLO = bytes.fromhex(
    "2d0000002b0000004c5a4675f1c5c7a703000a00726370673132354232"
    "0af32068656c090020627705b06c647d0a800fa0"
)


def rtf_only(compressed: bytes) -> bytes:
    return compound_file(message_streams("", 32, {0x0037: "RTF only", 0x1009: compressed}))


def test_a_body_in_compressed_rtf_only_is_decompressed_and_read() -> None:
    assert parse(rtf_only(LZFU_HELLO)).pages[0].text == "hello world"
    rtf = b"{\\rtf1\\ansi {\\b Agenda}\\par Budget \\'fcberarbeiten\\par}"
    stored = struct.pack("<IIII", len(rtf) + 12, len(rtf), 0x414C454D, 0) + rtf  # "MELA"
    assert parse(rtf_only(stored)).pages[0].text == "Agenda\n\nBudget überarbeiten"


def test_compressed_rtf_that_cannot_be_read_leaves_a_warning() -> None:
    unknown = struct.pack("<IIII", 20, 20, 0x12345678, 0) + b"x" * 20
    huge = struct.pack("<IIII", 20, 0xFFFFFFF0, 0x75465A4C, 0) + b"x" * 20
    for compressed in (unknown, huge):
        package = parse(rtf_only(compressed))
        assert package.pages[0].text == ""
        assert any("RTF body cannot be read" in w for w in package.warnings)


def test_an_embedded_ole_object_is_listed_not_read_as_a_message() -> None:
    ole_object = {
        "__substg1.0_3701000D/CONTENTS": b"not a message" * 10,
        "__substg1.0_3701000D/\x01Ole": b"\x01\x00\x00\x02" + b"\0" * 16,
        "__properties_version1.0": fixed_props(8, {0x37050000 | PT_LONG: long(6)}),
    } | strings("", {0x370E: "application/x-oleobject"})
    data = compound_file(message_streams("", 32, {0x0037: "Has object"}, attachments=[ole_object]))
    (attachment,) = parse(data).attachments
    assert attachment.reason == ErrorReason.UNSUPPORTED_FORMAT
    assert attachment.declared_type == "application/x-oleobject"
    assert "OLE object" in attachment.reason_message and attachment.size_bytes > 0


def test_messages_attached_inside_messages_stop_at_the_depth_limit() -> None:
    from parser_svc.parsers.mail_parts import MAX_DEPTH

    levels = MAX_DEPTH + 1
    streams: dict[str, bytes] = {}
    prefix = ""
    for level in range(1, levels + 1):
        streams |= message_streams(prefix, 32 if level == 1 else 24, {0x0037: f"level {level}"})
        if level < levels:
            attach = f"{prefix}__attach_version1.0_#00000000/"
            streams[f"{attach}__properties_version1.0"] = fixed_props(
                8, {0x37050000 | PT_LONG: long(5)}
            )
            prefix = f"{attach}__substg1.0_3701000D/"
    package = parse(compound_file(streams))
    subjects = []
    while package.attachments and package.attachments[0].HasField("package"):
        subjects.append(package.email.subject)
        package = package.attachments[0].package
    subjects.append(package.email.subject)
    assert subjects == [f"level {n}" for n in range(1, MAX_DEPTH + 1)]
    assert package.attachments[0].reason == ErrorReason.DOCUMENT_TOO_LARGE
    assert package.attachments[0].filename == f"level {MAX_DEPTH + 1}.msg"
