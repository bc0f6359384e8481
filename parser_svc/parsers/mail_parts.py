"""What EML and MSG share: the package's headers and body page, and the attachments, each
parsed as a package of its own (`formats.parse_detected`) or listed with the reason it was not.

Bounded by construction, across the whole tree of messages inside messages: at most
MAX_DEPTH levels of nesting, MAX_ATTACHMENTS attachments per message and MAX_PARSED in all,
and attachment bytes in all within `options.max_unzipped_bytes` (each attachment is parsed
with the budget left as its own limit, so a zip bomb attached is refused by check_zip). A
message attached as a file (an .eml or .msg sniffed as one) counts as nesting too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import lxml.html  # type: ignore[import-untyped]

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    ParseFailure,
    ParseOptions,
    ProgressFn,
    describe_error,
    is_out_of_memory,
    too_large,
)
from parser_svc.parsers.formats import parse_detected, parser_for
from parser_svc.parsers.mail_text import text_page

MAX_DEPTH = 3  # the submitted message is level 1
MAX_ATTACHMENTS = 100
MAX_PARSED = 300
# Roles an HTML body's blocks have when the HTML says more than its text does.
_STRUCTURE = {"title", "heading", "list_item", "table"}


@dataclass
class _Tree:
    """The tree of messages being parsed in this process (one parse at a time per child)."""

    depth: int = 0
    budget: int = 0
    parsed: int = 0


_TREE = _Tree()


@contextmanager
def nesting(options: ParseOptions) -> Iterator[int]:
    """Enters one message level; the outermost sets the tree's byte budget. A message deeper
    than MAX_DEPTH is DOCUMENT_TOO_LARGE."""
    if _TREE.depth >= MAX_DEPTH:
        raise too_large(f"messages nest deeper than {MAX_DEPTH} levels; deeper ones are not read")
    if _TREE.depth == 0:
        _TREE.budget, _TREE.parsed = options.max_unzipped_bytes, 0
    _TREE.depth += 1
    try:
        yield _TREE.depth
    finally:
        _TREE.depth -= 1


@dataclass
class Headers:
    sender: str = ""
    to: list[str] = field(default_factory=list)
    cc: list[str] = field(default_factory=list)
    bcc: list[str] = field(default_factory=list)
    subject: str = ""
    date: str = ""
    message_id: str = ""
    reply_to: str = ""
    in_reply_to: str = ""


def new_package(content_type: str, headers: Headers) -> rp.ReadingPackage:
    package = rp.ReadingPackage(content_type=content_type)
    e = package.email
    e.sender, e.subject, e.date = headers.sender, headers.subject, headers.date
    e.to.extend(headers.to)
    e.cc.extend(headers.cc)
    e.bcc.extend(headers.bcc)
    e.message_id, e.reply_to, e.in_reply_to = (
        headers.message_id,
        headers.reply_to,
        headers.in_reply_to,
    )
    package.metadata.title = headers.subject
    package.metadata.author = headers.sender
    if headers.date:
        package.metadata.extra["date"] = headers.date
    return package


def _html_package(html: str, options: ParseOptions) -> rp.ReadingPackage | None:
    """The HTML body through the HTML parser (UTF-8 with a byte-order mark, which outranks a
    charset the HTML itself declares: the MIME charset already decoded it); None when it
    refuses the body (a text/html part with no element in it)."""
    try:
        parse_html = parser_for("html")
        data = b"\xef\xbb\xbf" + html.replace("\x00", "").encode(
            "utf-8"
        )  # HTML reads NUL as U+FFFD
        return parse_html(data, lambda *_: None, options)
    except ParseFailure:
        return None


def _html_text(html: str) -> str:
    """The text of an HTML body the HTML parser refuses: block elements on lines."""
    try:
        root = lxml.html.document_fromstring(html)
    except Exception:  # lxml's ParserError for an empty or bodiless document
        return ""
    for bad in root.xpath("//script|//style|//head"):
        bad.drop_tree()
    for element in root.iter("p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6"):
        element.tail = (
            "\n\n" + (element.tail or "") if element.tag != "br" else "\n" + (element.tail or "")
        )
    return str(root.text_content())


def _structured(page: rp.Page) -> bool:
    return bool(page.tables) or any(b.role in _STRUCTURE for b in page.blocks)


def body_page(
    package: rp.ReadingPackage, plain: str | None, html: str | None, options: ParseOptions
) -> None:
    """Adds the body as ONE page. Only one of plain and HTML: that one. Both (an alternative):
    the HTML when it has structure (headings, lists, tables: what plain text flattens), else the
    plain text, which keeps the author's line breaks that HTML-to-text guesses at."""
    page: rp.Page | None = None
    if html is not None and html.strip():
        parsed = _html_package(html, options)
        if parsed is not None and parsed.pages:
            merged = _one_page(parsed)
            if plain is None or not plain.strip() or _structured(merged):
                page = merged
                package.assets.extend(parsed.assets)
                package.warnings.extend(parsed.warnings)
        elif plain is None or not plain.strip():
            page = text_page(_html_text(html))
    if page is None:
        page = text_page(plain or "")
    page.number = 1
    package.pages.append(page)
    if not page.text.strip():
        package.warnings.append("the message has no body text")


def _one_page(parsed: rp.ReadingPackage) -> rp.Page:
    if len(parsed.pages) == 1:
        return parsed.pages[0]
    page = rp.Page(number=1)
    for other in parsed.pages:
        page.blocks.extend(other.blocks)
        page.tables.extend(other.tables)
        page.images.extend(other.images)
    page.text = "\n\n".join(p.text for p in parsed.pages if p.text)
    return page


@dataclass
class Part:
    """An attachment as the message declares it. `nested`: for a message inside the message,
    its parser (called one level down); else the bytes are sniffed."""

    filename: str
    declared_type: str
    data: bytes
    inline: bool = False
    nested: Callable[[bytes, ProgressFn, ParseOptions], rp.ReadingPackage] | None = None


def _refuse(attachment: rp.Attachment, failure: ParseFailure) -> None:
    attachment.reason = failure.reason.name
    attachment.reason_message = failure.message


def _parse_one(part: Part, attachment: rp.Attachment, options: ParseOptions) -> None:
    if len(part.data) > _TREE.budget:
        _refuse(attachment, too_large(_over_budget(len(part.data), options)))
        return
    if _TREE.parsed >= MAX_PARSED:
        _refuse(attachment, too_large(f"over {MAX_PARSED} attachments in all: not read"))
        return
    _TREE.budget -= len(part.data)
    _TREE.parsed += 1
    # the budget left as its limit; a page selection is the submitted document's, not its parts'
    limited = replace(options, max_unzipped_bytes=max(_TREE.budget, 0), pages="")
    parse = part.nested or parse_detected
    try:
        attachment.package.CopyFrom(parse(part.data, lambda *_: None, limited))
    except ParseFailure as failure:
        _refuse(attachment, failure)
    except RecursionError:
        _refuse(attachment, ParseFailure(ErrorReason.CORRUPT_DOCUMENT, "it nests too deeply"))
    except MemoryError:  # its allocations are freed as the parse unwinds: the message goes on
        _refuse(attachment, too_large("reading it needs more memory than the parse may use"))
    except Exception as err:  # a library choking on the attachment: the message still reads
        if is_out_of_memory(err):
            raise
        message = f"the parser cannot read this attachment: {describe_error(err)}"
        _refuse(attachment, ParseFailure(ErrorReason.CORRUPT_DOCUMENT, message))


def _over_budget(size: int, options: ParseOptions) -> str:
    return (
        f"the attachments come to more than the limit of {options.max_unzipped_bytes} bytes "
        f"in all; this one ({size} bytes) is not read"
    )


def capped(package: rp.ReadingPackage, parts: list[Part], progress: ProgressFn) -> list[Part]:
    """The attachments that are read (the first MAX_ATTACHMENTS, a warning for the rest);
    reports 0 of the parts done (the body, then each attachment)."""
    if len(parts) > MAX_ATTACHMENTS:
        package.warnings.append(
            f"the message has {len(parts)} attachments; only the first {MAX_ATTACHMENTS} are read"
        )
        parts = parts[:MAX_ATTACHMENTS]
    progress(0, 1 + len(parts), "text")
    return parts


def add_attachments(
    package: rp.ReadingPackage, parts: list[Part], progress: ProgressFn, options: ParseOptions
) -> None:
    """Lists and parses the attachments (`capped` ones): the body is part 1 of the progress."""
    total = 1 + len(parts)
    progress(1, total, "text")
    for number, part in enumerate(parts, 1):
        attachment = package.attachments.add(
            number=number,
            filename=part.filename,
            declared_type=part.declared_type,
            size_bytes=len(part.data),
            sha256=hashlib.sha256(part.data).hexdigest(),
            inline=part.inline,
        )
        _parse_one(part, attachment, options)
        progress(1 + number, total, "text")
