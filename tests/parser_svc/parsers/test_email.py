"""EML: headers decoded in any charset, the body chosen and decoded, attachments parsed as
packages of their own (or listed with their reason); and how the renderers and the chunker
show an e-mail. Fixtures are built here with the email package and pymupdf. (Limits and
hostile input: test_email_limits.py; MSG: test_email_msg.py.)"""

from __future__ import annotations

from email.mime.application import MIMEApplication
from email.mime.base import MIMEBase
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

import pymupdf
import pytest

from docparse.reasons import ErrorReason
from docparse.render import to_text
from docparse.render_html import to_html
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.eml import parse_eml

OPTIONS = ParseOptions.defaults()


def parse(data: bytes, options: ParseOptions = OPTIONS) -> rp.ReadingPackage:
    package = parse_eml(data, lambda *_: None, options)
    assert "\ufffd" not in str(package), "a decodable message gave U+FFFD"
    return package


def pdf(text: str) -> bytes:
    document = pymupdf.open()  # type: ignore[no-untyped-call]
    document.new_page().insert_text((72, 72), text)
    data: bytes = document.tobytes()  # type: ignore[no-untyped-call]
    return data


def raw_message(headers: str, body: bytes) -> bytes:
    return headers.replace("\n", "\r\n").encode() + b"\r\n\r\n" + body


def with_attachments(*parts: MIMEBase, body: str = "See attached.") -> MIMEMultipart:
    message = MIMEMultipart("mixed")
    message["From"] = "ann@example.com"
    message["Subject"] = "parts"
    message.attach(MIMEText(body, "plain", "utf-8"))
    for part in parts:
        message.attach(part)
    return message


def attached(data: bytes, filename: str, subtype: str = "octet-stream") -> MIMEApplication:
    part = MIMEApplication(data, subtype)
    part.add_header("Content-Disposition", "attachment", filename=filename)
    return part


def test_headers_are_decoded_whatever_their_charset() -> None:
    headers = (
        "From: =?iso-8859-1?q?J=F6rg_M=FCller?= <jorg@example.de>\n"
        'To: "Lee, Ann" <ann@example.com>, =?utf-8?b?5p2O5piO?= <li@example.cn>\n'
        "Cc: bob@example.com\n"
        "Reply-To: Desk <desk@example.com>\n"
        "Subject: =?koi8-r?b?8NLJ18XU?= =?utf-8?q?=E2=82=AC_report?=\n"
        "Date: Tue, 3 Mar 2026 10:15:00 +0100\n"
        "Message-ID: <m1@example.de>\n"
        "In-Reply-To: <m0@example.com>\n"
        "MIME-Version: 1.0\n"
        "Content-Type: text/plain; charset=us-ascii"
    )
    package = parse(raw_message(headers, b"Hi."))
    e = package.email
    assert e.sender == "Jörg Müller <jorg@example.de>"
    assert list(e.to) == ['"Lee, Ann" <ann@example.com>', "李明 <li@example.cn>"]
    assert list(e.cc) == ["bob@example.com"]
    assert e.subject == "Привет€ report"
    assert e.date == "2026-03-03T10:15:00+01:00"
    assert (e.message_id, e.in_reply_to) == ("<m1@example.de>", "<m0@example.com>")
    assert e.reply_to == "Desk <desk@example.com>"
    assert (package.metadata.title, package.metadata.author) == (e.subject, e.sender)
    assert package.content_type == "eml"
    assert [b.text for b in package.pages[0].blocks] == ["Hi."]


def test_raw_8bit_headers_and_an_unreadable_date() -> None:
    headers = "From: Zoë <zoe@example.com>\nSubject: café\nDate: sometime next week"
    package = parse(raw_message(headers, b"x"))
    assert package.email.sender == "Zoë <zoe@example.com>"
    assert package.email.subject == "café"
    assert package.email.date == "sometime next week"  # as written, not dropped


@pytest.mark.parametrize(
    ("charset", "encoding"),
    [("windows-1252", "quoted-printable"), ("utf-8", "base64"), ("iso-8859-15", "8bit")],
)
def test_plain_body_in_any_charset_and_transfer_encoding(charset: str, encoding: str) -> None:
    text = "Grüße aus Köln: 5 €.\n\nZweiter Absatz,\nzwei Zeilen."
    body = text.encode(charset)
    if encoding == "quoted-printable":
        import quopri

        body = quopri.encodestring(body)
    elif encoding == "base64":
        import base64

        body = base64.encodebytes(body)
    headers = (
        "From: a@example.com\nSubject: s\nMIME-Version: 1.0\n"
        f"Content-Type: text/plain; charset={charset}\nContent-Transfer-Encoding: {encoding}"
    )
    page = parse(raw_message(headers, body)).pages[0]
    assert [b.text for b in page.blocks] == [
        "Grüße aus Köln: 5 €.",
        "Zweiter Absatz,\nzwei Zeilen.",
    ]
    assert page.text == "Grüße aus Köln: 5 €.\n\nZweiter Absatz,\nzwei Zeilen."


@pytest.mark.parametrize("declared", ["utf-8", "x-unknown-charset", "unknown-8bit", ""])
def test_mislabelled_charsets_fall_back_without_replacement_characters(declared: str) -> None:
    """Latin-1 bytes declared as UTF-8, as a charset Python does not know, or not declared."""
    charset = f"; charset={declared}" if declared else ""
    headers = f"From: a@example.com\nSubject: s\nContent-Type: text/plain{charset}"
    package = parse(raw_message(headers, "Müller zahlt 5 Mark für Käse.".encode("latin-1")))
    assert package.pages[0].text == "Müller zahlt 5 Mark für Käse."


def alternative(plain: str, html: str, charset: str = "utf-8") -> bytes:
    message = MIMEMultipart("alternative")
    message["From"] = "a@example.com"
    message["Subject"] = "alt"
    message.attach(MIMEText(plain, "plain", charset))
    message.attach(MIMEText(html, "html", charset))
    return message.as_bytes()


def test_alternative_with_structured_html_reads_the_html() -> None:
    html = (
        "<html><body><h1>Quarterly figures</h1><p>Dear team,</p>"
        "<table><tr><th>Region</th><th>Sales</th></tr><tr><td>Nord</td><td>12</td></tr></table>"
        "<ul><li>first</li><li>second</li></ul></body></html>"
    )
    package = parse(alternative("Quarterly figures\nRegion Sales\nNord 12", html, "iso-8859-1"))
    page = package.pages[0]
    headings = [(b.text, b.level) for b in page.blocks if b.role in ("heading", "title")]
    assert headings == [("Quarterly figures", 1)]
    assert [list(r.cells) for r in page.tables[0].rows] == [["Region", "Sales"], ["Nord", "12"]]
    assert [b.text for b in page.blocks if b.role == "list_item"] == ["first", "second"]


def test_alternative_with_flat_html_reads_the_plain_text() -> None:
    plain = "Hello Jörg,\n\nthe meeting moves to 3pm.\nRoom 4.\n\nAnn"
    html = "<div>Hello Jörg,<br><br>the meeting moves to 3pm.<br>Room 4.<br><br>Ann</div>"
    page = parse(alternative(plain, html)).pages[0]
    assert [b.text for b in page.blocks] == [
        "Hello Jörg,",
        "the meeting moves to 3pm.\nRoom 4.",
        "Ann",
    ]


def test_an_html_only_body_in_a_legacy_charset() -> None:
    html = (
        "<html><head><meta charset='utf-8'></head>"
        "<body><h2>Счёт</h2><p>Оплатите до пятницы.</p></body></html>"
    )
    message = MIMEText(html, "html", "koi8-r")  # the meta charset lies: the MIME one wins
    message["From"] = "a@example.com"
    page = parse(message.as_bytes()).pages[0]
    assert "Счёт" in page.text and "Оплатите до пятницы." in page.text
    assert any(b.role == "heading" and b.text == "Счёт" for b in page.blocks)


def test_a_pdf_attachment_is_parsed_as_its_own_package() -> None:
    data = pdf("Invoice 2026-117: total 1,250.00 EUR")
    part = MIMEApplication(data, "pdf")
    part.add_header(
        "Content-Disposition", "attachment", filename=("utf-8", "", "Récapitulatif 117.pdf")
    )
    package = parse(with_attachments(part).as_bytes())
    assert [b.text for b in package.pages[0].blocks] == ["See attached."]
    (attachment,) = package.attachments
    assert attachment.number == 1
    assert attachment.filename == "Récapitulatif 117.pdf"
    assert attachment.declared_type == "application/pdf"
    assert attachment.size_bytes == len(data) and not attachment.inline
    import hashlib

    assert attachment.sha256 == hashlib.sha256(data).hexdigest()
    assert attachment.reason == ""
    assert attachment.package.content_type == "pdf"
    assert "Invoice 2026-117: total 1,250.00 EUR" in attachment.package.pages[0].text


def test_an_rfc2047_filename() -> None:
    part = MIMEApplication(pdf("x"), "pdf")
    part.add_header(
        "Content-Disposition", 'attachment; filename="=?utf-8?b?0J7RgtGH0ZHRgi5wZGY=?="'
    )
    package = parse(with_attachments(part).as_bytes())
    assert package.attachments[0].filename == "Отчёт.pdf"


def test_attachments_that_cannot_be_read_leave_the_message_readable() -> None:
    truncated = pdf("cut short")[:300]
    package = parse(
        with_attachments(
            attached(bytes(range(256)) * 8, "blob.bin"),
            attached(truncated, "cut.pdf", "pdf"),
        ).as_bytes()
    )
    first, second = package.attachments
    assert first.reason == ErrorReason.UNSUPPORTED_FORMAT and first.reason_message
    assert not first.HasField("package")
    assert second.reason == ErrorReason.CORRUPT_DOCUMENT
    assert package.pages[0].text == "See attached."


def test_progress_counts_the_body_and_each_attachment() -> None:
    calls: list[tuple[int, int]] = []
    data = with_attachments(
        attached(pdf("a"), "a.pdf", "pdf"), attached(b"zz" * 50, "b.bin")
    ).as_bytes()
    parse_eml(data, lambda done, total, stage: calls.append((done, total)), OPTIONS)
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]


def test_an_inline_image_is_an_inline_attachment_stored_as_an_asset(tmp_path: Path) -> None:
    from email.encoders import encode_base64

    related = MIMEMultipart("related")
    related["From"] = "a@example.com"
    related.attach(MIMEText('<p>Logo:</p><img src="cid:logo">', "html", "utf-8"))
    image = MIMEBase("image", "png")
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 8, 8), False)  # type: ignore[no-untyped-call]
    png: bytes = pixmap.tobytes("png")  # type: ignore[no-untyped-call]
    image.set_payload(png)
    encode_base64(image)
    image.add_header("Content-ID", "<logo>")
    related.attach(image)
    options = ParseOptions.defaults(assets_dir=tmp_path, ocr=False)
    package = parse(related.as_bytes(), options)
    assert package.pages[0].text.startswith("Logo:")
    (attachment,) = package.attachments
    assert attachment.inline and attachment.declared_type == "image/png"
    assert attachment.package.content_type == "png"
    (asset,) = attachment.package.assets
    assert (tmp_path / asset.asset_id).read_bytes() == png  # the same assets_dir as the message


def test_content_that_is_not_a_message_is_corrupt() -> None:
    with pytest.raises(ParseFailure) as failure:
        parse_eml(b"\r\n\r\njust a body, no headers", lambda *_: None, OPTIONS)
    assert failure.value.reason == ErrorReason.CORRUPT_DOCUMENT


def invoice_mail() -> rp.ReadingPackage:
    message = with_attachments(
        attached(pdf("Invoice 117 total 99 EUR"), "invoice.pdf", "pdf"),
        attached(b"\x00\x01garbage" * 30, "data.bin"),
        body="Please find the invoice attached.",
    )
    message["To"] = "Bob <bob@example.com>"
    message["Date"] = "Tue, 3 Mar 2026 10:15:00 +0100"
    return parse(message.as_bytes())


def test_renderings_show_headers_body_and_each_attachment() -> None:
    package = invoice_mail()
    markdown = to_markdown(package)
    assert markdown.startswith(
        "# parts\n\n**From:** ann@example.com  \n**To:** Bob <bob@example.com>  \n"
        "**Date:** 2026-03-03T10:15:00+01:00\n\nPlease find the invoice attached.\n\n"
        "## Attachment 1: invoice.pdf\n\n"
    )
    assert "Invoice 117 total 99 EUR" in markdown
    assert "## Attachment 2: data.bin\n\nNot read (UNSUPPORTED_FORMAT): " in markdown
    text = to_text(package)
    assert text.startswith("From: ann@example.com\nTo: Bob <bob@example.com>\n")
    assert (
        "Subject: parts\n\nPlease find the invoice attached.\n\f\nAttachment 1: invoice.pdf" in text
    )
    html = to_html(package)
    assert "<dt>To</dt><dd>Bob &lt;bob@example.com&gt;</dd>" in html
    assert '<article data-attachment="1">\n<h2>Attachment 1: invoice.pdf</h2>' in html
    assert '<p data-role="reason">Not read (UNSUPPORTED_FORMAT)' in html


def test_chunks_carry_the_subject_and_each_attachment_as_headings() -> None:
    from docparse.chunks import to_chunks

    chunks = to_chunks(invoice_mail(), max_chars=400)
    assert chunks[0].heading_path == ("parts",)
    assert chunks[0].text.startswith("parts\n\nFrom: ann@example.com\nTo: Bob <bob@example.com>")
    assert "Please find the invoice attached." in chunks[0].text
    pdf_chunk = next(c for c in chunks if "Invoice 117 total 99 EUR" in c.text)
    assert pdf_chunk.heading_path[0] == "Attachment 1: invoice.pdf"
    assert any(
        c.text.startswith("Attachment 2: data.bin\n\nNot read (UNSUPPORTED_FORMAT)") for c in chunks
    )


def test_a_message_of_attachments_only_has_an_empty_body_page() -> None:
    message = MIMEMultipart("mixed")
    message["From"] = "scanner@example.com"
    message.attach(attached(pdf("Scan 1"), "scan.pdf", "pdf"))
    package = parse(message.as_bytes())
    assert len(package.pages) == 1 and package.pages[0].text == ""
    assert "the message has no body text" in package.warnings
    assert "Scan 1" in package.attachments[0].package.pages[0].text


def test_format_flowed_text_has_its_soft_line_breaks_joined() -> None:
    body = (
        b"Thanks for the figures, the totals \r\nlook right to me.\r\n\r\n"
        b"> Could you check the \r\n> totals?\r\n>> Sent from the \r\n>> road\r\n-- \r\nAnn"
    )
    headers = "From: a@example.com\nContent-Type: text/plain; charset=utf-8; format=flowed"
    assert [b.text for b in parse(raw_message(headers, body)).pages[0].blocks] == [
        "Thanks for the figures, the totals look right to me.",
        "> Could you check the totals?\n>> Sent from the road\n--\nAnn",
    ]
    fixed = raw_message(headers.replace("; format=flowed", ""), body)
    assert parse(fixed).pages[0].blocks[0].text == (
        "Thanks for the figures, the totals\nlook right to me."
    )


@pytest.mark.parametrize("html", [b"<p>Total:\x00 12 EUR</p>", b"<!-- nothing but a comment -->"])
def test_odd_html_bodies_read_without_replacement_characters(html: bytes) -> None:
    headers = "From: a@example.com\nContent-Type: text/html; charset=utf-8"
    package = parse(raw_message(headers, html))  # parse() checks for U+FFFD
    assert package.pages[0].text in ("Total: 12 EUR", "")


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("Привет =?utf-8?q?caf=C3=A9?= мир", "Привет café мир"),  # raw UTF-8 beside a word
        ("=?x-bogus?q?caf=E9?= au lait", "café au lait"),  # a charset nobody knows
        ("=?UTF-8*en?Q?hello_there?=", "hello there"),  # RFC 2231 language suffix
        ("=?utf-8?q?a?= =?utf-8?q?b?=\n =?utf-8?q?c?=", "abc"),  # folded: the space goes
        ("=?utf-8?q?a?= and =?utf-8?q?b?=", "a and b"),
    ],
)
def test_encoded_words_in_odd_company(raw: str, decoded: str) -> None:
    package = parse(raw_message(f"From: a@example.com\nSubject: {raw}", b"x"))
    assert package.email.subject == decoded
