"""EPUB (2 and 3) → ReadingPackage: META-INF/container.xml names the package document (OPF);
its metadata gives the title, author (dc:creator), language, publisher, and its spine the
reading order. Each spine item that is a content document (XHTML, HTML) is one Page, numbered
in spine order, read by the HTML block reader (`html_page.read_body`): headings, lists,
tables, code, quotes; the images it shows are the book's files, stored as assets.

Bounded before reading: the zip-bomb guard (`office.check_zip`: declared sizes against
options.max_unzipped_bytes), spine items against options.max_pages, each chapter's tags against
html_page.MAX_ELEMENTS. A book whose content documents are encrypted (DRM: META-INF/
encryption.xml naming them) is UNSUPPORTED_FORMAT; encrypted fonts (font obfuscation) are not
content and do not matter.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from typing import Any
from urllib.parse import unquote, urldefrag

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    AssetSink,
    ParseFailure,
    ParseOptions,
    ProgressFn,
    TableBudget,
    corrupt,
    mime_for_ext,
    safe,
    too_large,
)
from parser_svc.parsers.html_page import (
    MAX_ELEMENTS,
    MAX_TABLE_CELLS,
    count_tags,
    page_title,
    parse_tree,
    read_body,
)
from parser_svc.parsers.office import check_zip, parse_xml
from parser_svc.parsers.text_charset import declared_charset, decode_text

CONTAINER = "META-INF/container.xml"
ENCRYPTION = "META-INF/encryption.xml"
CONTENT_TYPES = ("application/xhtml+xml", "text/html", "application/x-dtbook+xml")
_DC = "{http://purl.org/dc/elements/1.1/}"
_XENC_CIPHER = "{http://www.w3.org/2001/04/xmlenc#}CipherReference"
_FONT_TYPES = (".ttf", ".otf", ".woff", ".woff2")


def _read(archive: zipfile.ZipFile, name: str) -> bytes | None:
    try:
        return archive.read(name)
    except KeyError:
        return None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise corrupt(f"the EPUB's {name} is damaged: {err}") from err


def _refuse_drm(archive: zipfile.ZipFile) -> None:
    data = _read(archive, ENCRYPTION)
    if data is None:
        return
    uris = [ref.get("URI", "") for ref in parse_xml(data).iter(_XENC_CIPHER)]
    content = [u for u in uris if not unquote(u).lower().endswith(_FONT_TYPES)]
    if content:
        raise ParseFailure(
            ErrorReason.UNSUPPORTED_FORMAT,
            f"the EPUB is encrypted (DRM): {len(content)} of its files, such as "
            f"{unquote(content[0])!r}, can only be read by the reading system it was sold "
            "for; remove the protection or submit an unprotected copy",
        )


def _package_path(archive: zipfile.ZipFile) -> str:
    data = _read(archive, CONTAINER)
    if data is None:
        raise corrupt(f"the EPUB has no {CONTAINER} (it does not say where its content is)")
    try:
        root = parse_xml(data)
    except Exception as err:
        raise corrupt(f"the EPUB's {CONTAINER} is damaged: {err}") from err
    for element in root.iter("{*}rootfile"):
        path = element.get("full-path")
        if path:
            return unquote(path)
    raise corrupt(f"the EPUB's {CONTAINER} names no package document")


def _metadata(opf: Any, package: rp.ReadingPackage) -> None:
    def first(name: str) -> str:
        element = next(opf.iter(f"{_DC}{name}"), None)
        return safe(" ".join("".join(element.itertext()).split())) if element is not None else ""

    package.metadata.title = first("title")
    creators = [" ".join("".join(e.itertext()).split()) for e in opf.iter(f"{_DC}creator")]
    package.metadata.author = safe("; ".join(c for c in creators if c))
    package.metadata.subject = first("description")[:2000]
    for name in ("language", "publisher", "date", "identifier"):
        value = first(name)
        if value:
            package.metadata.extra[name] = value


def _spine(opf: Any, base: str) -> list[str]:
    """The paths (in the zip) of the spine's content documents, in reading order."""
    manifest = {}
    for item in opf.iter("{*}item"):
        href, media = item.get("href"), item.get("media-type", "")
        if item.get("id") and href:
            manifest[item.get("id")] = (
                posixpath.normpath(posixpath.join(base, unquote(href))),
                media,
            )
    paths = []
    for ref in opf.iter("{*}itemref"):
        path, media = manifest.get(ref.get("idref", ""), ("", ""))
        if path and (media in CONTENT_TYPES or path.lower().endswith((".xhtml", ".html", ".htm"))):
            paths.append(path)
    return paths


class _Images:
    """The book's images named by a chapter's <img src> / <image href>, relative to it."""

    def __init__(self, archive: zipfile.ZipFile, chapter: str, names: set[str]) -> None:
        self.archive, self.chapter, self.names = archive, chapter, names

    def __call__(self, src: str) -> tuple[bytes, str] | None:
        href = urldefrag(src)[0]
        if not href or "://" in href:
            return None
        path = posixpath.normpath(posixpath.join(posixpath.dirname(self.chapter), unquote(href)))
        if path not in self.names:
            return None
        mime = mime_for_ext(posixpath.splitext(path)[1])
        if not mime.startswith("image/"):
            return None
        data = _read(self.archive, path)
        return (data, mime) if data else None


def _chapter_text(raw: bytes, path: str) -> str:
    """A chapter's characters; one that is no text is damage to the book (CORRUPT_DOCUMENT)."""
    try:
        return decode_text(raw, f"EPUB chapter {path!r}", declared=declared_charset(raw)).text
    except ParseFailure as err:
        raise corrupt(err.message) from err


def parse_epub(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    check_zip(data, options, "EPUB book")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as err:
        raise corrupt(f"the EPUB (zip) is damaged: {err}") from err
    with archive:
        _refuse_drm(archive)
        opf_path = _package_path(archive)
        opf_data = _read(archive, opf_path)
        if opf_data is None:
            raise corrupt(f"the EPUB's package document {opf_path!r} is missing")
        try:
            opf = parse_xml(opf_data)
        except Exception as err:
            raise corrupt(f"the EPUB's package document is damaged: {err}") from err
        package = rp.ReadingPackage(content_type="epub")
        _metadata(opf, package)
        chapters = _spine(opf, posixpath.dirname(opf_path))
        if not chapters:
            raise corrupt("the EPUB's spine lists no content documents")
        if len(chapters) > options.max_pages:
            raise too_large(
                f"the EPUB has {len(chapters)} chapters (spine items); the limit is "
                f"{options.max_pages}"
            )
        _chapters(archive, chapters, package, progress, options)
    return package


def _chapters(
    archive: zipfile.ZipFile,
    chapters: list[str],
    package: rp.ReadingPackage,
    progress: ProgressFn,
    options: ParseOptions,
) -> None:
    names = set(archive.namelist())
    assets = AssetSink(package, options)
    budget = TableBudget(min(options.max_cells, MAX_TABLE_CELLS))
    total = len(chapters)
    missing = 0
    progress(0, total, "text")
    for number, path in enumerate(chapters, start=1):
        page = package.pages.add(number=number)
        raw = _read(archive, path) if path in names else None
        if raw is None:
            missing += 1
        elif count_tags(raw, MAX_ELEMENTS) > MAX_ELEMENTS:
            raise too_large(f"chapter {path!r} has more than {MAX_ELEMENTS} elements")
        else:
            text = _chapter_text(raw, path)
            root = parse_tree(text, f"EPUB chapter {path!r}")
            package.metadata.title = package.metadata.title or page_title(root)
            read_body(root, page, assets, budget, _Images(archive, path, names))
        progress(number, total, "text")
    assets.finish()
    if missing:
        package.warnings.append(f"{missing} chapters the spine lists are missing from the EPUB")
    if not any(page.text for page in package.pages) and not package.assets:
        package.warnings.append("the EPUB contains no text and no images")
