"""What the OpenDocument parsers (ODT, ODS, ODP) share: opening the package (the zip-bomb guard
first, then the mimetype, encryption and content.xml), metadata from meta.xml, lengths in
points, the styles a paragraph or list inherits, inline text and images as assets."""

from __future__ import annotations

import functools
import io
import posixpath
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Any

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    IMAGES_NONE,
    AssetSink,
    ParseFailure,
    ParseOptions,
    corrupt,
    mime_for_ext,
    safe,
)
from parser_svc.parsers.odf_crypto import Encryption, encrypted_parts, open_part
from parser_svc.parsers.office import check_zip, parse_xml

NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "fo": "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0",
    "xlink": "http://www.w3.org/1999/xlink",
    "dc": "http://purl.org/dc/elements/1.1/",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
    "svg": "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "manifest": "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0",
}
MIMETYPES = {
    "odt": "application/vnd.oasis.opendocument.text",
    "ods": "application/vnd.oasis.opendocument.spreadsheet",
    "odp": "application/vnd.oasis.opendocument.presentation",
}
_UNITS = {"pt": 1.0, "in": 72.0, "cm": 72 / 2.54, "mm": 72 / 25.4, "pc": 12.0, "px": 0.75}
_LENGTH = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([a-z]*)")
# What reading a damaged member raises (NotImplementedError: a compression method or zip
# version an OpenDocument package never uses, read from a damaged header).
UNPACK_ERRORS = (
    zipfile.BadZipFile,
    OSError,
    ValueError,
    EOFError,
    zlib.error,
    NotImplementedError,
)
MAX_PARENTS = 64  # a longer style:parent-style-name chain inherits nothing past it


@functools.cache
def q(name: str) -> str:
    """Clark notation of a prefixed name: q("text:p") -> "{urn:...text:1.0}p"."""
    prefix, local = name.split(":")
    return f"{{{NS[prefix]}}}{local}"


def attr(node: Any, name: str, default: str = "") -> str:
    value = node.get(q(name))
    return default if value is None else str(value)


def count(value: str | None, default: int = 1) -> int:
    """An integer attribute (a repeat count, a span), `default` when absent or unreadable."""
    try:
        return int(value) if value else default
    except ValueError:
        return default


def length_pt(value: str) -> float:
    """An ODF length ("21.001cm", "8.5in", "12pt") in points; 0 when unreadable."""
    found = _LENGTH.match(value or "")
    if found is None:
        return 0.0
    return float(found.group(1)) * _UNITS.get(found.group(2) or "pt", 0.0)


class OdfPackage:
    """An opened OpenDocument zip. `read(name)` gives a member's bytes (bounded by check_zip),
    decrypted when the package is password-protected (odf_crypto)."""

    def __init__(self, data: bytes, options: ParseOptions, kind: str, what: str) -> None:
        try:
            check_zip(data, options, what)
        except NotImplementedError as err:  # a damaged central directory's "zip version"
            raise corrupt(f"the {what} package (zip) is damaged: {err}") from err
        self.what, self.options = what, options
        self.archive = zipfile.ZipFile(io.BytesIO(data))
        self.names = set(self.archive.namelist())
        self.encrypted: dict[str, Encryption] = {}
        self.plain: dict[str, bytes] = {}
        self._check_mimetype(kind)
        try:
            manifest = self.xml("META-INF/manifest.xml")
        except ParseFailure:  # a damaged manifest is only a loss when the parts are encrypted
            manifest = None
        self.encrypted = encrypted_parts(manifest)
        # LibreOffice's whole-package encryption: the real package is inside this part.
        self.whole = self.encrypted.pop("encrypted-package", None)
        self.decrypted = bool(self.encrypted)

    def _check_mimetype(self, kind: str) -> None:
        if "mimetype" not in self.names:
            return
        try:
            with self.archive.open("mimetype") as member:
                head = member.read(200)
        except UNPACK_ERRORS as err:
            raise corrupt(f"the {self.what}'s mimetype is damaged: {err}") from err
        declared = head.decode("ascii", "replace").strip()
        if declared != MIMETYPES[kind] and not declared.startswith(MIMETYPES[kind] + "-"):
            raise ParseFailure(
                ErrorReason.UNSUPPORTED_FORMAT,
                f"the package is {declared!r}, not an OpenDocument {self.what}",
            )

    def read(self, name: str) -> bytes:
        if name in self.plain:
            return self.plain[name]
        try:
            raw = self.archive.read(name)
        except UNPACK_ERRORS as err:
            raise corrupt(f"the {self.what}'s part {name} is damaged: {err}") from err
        spec = self.encrypted.get(name)
        if spec is None or name == "META-INF/manifest.xml":
            return raw
        limit = self.options.max_unzipped_bytes
        self.plain[name] = open_part(raw, spec, self.options.password, limit, self.what)
        return self.plain[name]

    def open(self, name: str) -> Any:
        """A member as a file to stream (its decrypted bytes when it is encrypted)."""
        if name in self.encrypted:
            return io.BytesIO(self.read(name))
        return self.archive.open(name)

    def xml(self, name: str) -> Any:
        """A part's XML root; None when the part is absent."""
        if name not in self.names:
            return None
        data = self.read(name)
        try:
            return parse_xml(data)
        except Exception as err:
            raise corrupt(f"the {self.what}'s {name} is not well-formed XML: {err}") from err


def open_odf(data: bytes, options: ParseOptions, kind: str, what: str) -> OdfPackage:
    """The package of an OpenDocument file, the inner one when the whole is encrypted."""
    odf = OdfPackage(data, options, kind, what)
    if odf.whole is not None:
        raw = odf.read("encrypted-package")
        limit = options.max_unzipped_bytes
        odf = OdfPackage(
            open_part(raw, odf.whole, options.password, limit, what), options, kind, what
        )
        if odf.whole is not None:
            raise corrupt(f"the {what}'s encrypted package holds another encrypted package")
        odf.decrypted = True
    if "content.xml" not in odf.names:
        raise corrupt(f"the OpenDocument {what} has no content.xml")
    return odf


def fill_metadata(meta: Any, package: rp.ReadingPackage) -> None:
    """Title, author, subject and the rest from meta.xml's office:meta."""
    if meta is None:
        return
    node = meta.find(q("office:meta"))
    if node is None:
        return

    def text(name: str) -> str:
        found = node.find(q(name))
        return "" if found is None else safe((found.text or "").strip())

    m = package.metadata
    m.title, m.subject = text("dc:title"), text("dc:subject")
    m.author = text("meta:initial-creator") or text("dc:creator")
    m.creator = text("meta:generator")
    keywords = [safe((k.text or "").strip()) for k in node.findall(q("meta:keyword"))]
    extra = {
        "keywords": ", ".join(k for k in keywords if k),
        "comments": text("dc:description"),
        "last_modified_by": text("dc:creator"),
        "created": text("meta:creation-date"),
        "modified": text("dc:date"),
        "language": text("dc:language"),
    }
    for key, value in extra.items():
        if value:
            m.extra[key] = value


@dataclass
class Styles:
    """Named styles (styles.xml's office:styles and office:automatic-styles, then content.xml's
    automatic styles), by family and name; and list styles by name."""

    nodes: dict[tuple[str, str], Any] = field(default_factory=dict)
    lists: dict[str, Any] = field(default_factory=dict)

    def load(self, root: Any) -> None:
        if root is None:
            return
        for group in ("office:styles", "office:automatic-styles", "office:master-styles"):
            container = root.find(q(group))
            if container is None:
                continue
            for node in container:
                name = attr(node, "style:name")
                if node.tag == q("style:style"):
                    self.nodes[(attr(node, "style:family"), name)] = node
                elif node.tag == q("text:list-style"):
                    self.lists[name] = node

    def chain(self, family: str, name: str) -> list[Any]:
        """The style and its parents, nearest first."""
        out: list[Any] = []
        while name and len(out) < MAX_PARENTS:
            node = self.nodes.get((family, name))
            if node is None:
                break
            out.append(node)
            name = attr(node, "style:parent-style-name")
        return out

    def names(self, family: str, name: str) -> list[str]:
        """The style's name and its parents' (display names too, and a parent the document
        names without defining it), lower-case."""
        out: list[str] = [name.lower()] if name else []
        for node in self.chain(family, name):
            out.extend(
                n.lower()
                for n in (attr(node, "style:display-name"), attr(node, "style:parent-style-name"))
                if n
            )
        return out

    def list_style(self, family: str, name: str) -> str:
        """The list style a paragraph style names (style:list-style-name), through parents."""
        for node in self.chain(family, name):
            found = attr(node, "style:list-style-name")
            if found:
                return found
        return ""


_SPACE, _TAB, _BREAK = q("text:s"), q("text:tab"), q("text:line-break")
# Inline content that is not the paragraph's text: notes (their bodies are read as note blocks),
# annotations (comments), frames (images, text boxes), ruby annotations, change-tracking marks.
_NOT_TEXT = frozenset(
    q(n)
    for n in (
        "text:note",
        "office:annotation",
        "office:annotation-end",
        "draw:frame",
        "draw:a",
        "draw:custom-shape",
        "draw:g",
        "text:ruby-text",
        "text:tracked-changes",
        "text:soft-page-break",
    )
)


def inline_text(node: Any) -> str:
    """The text of a paragraph (text:p, text:h) as shown: spans and links read, text:s as
    spaces, tabs and line breaks kept; notes, annotations and frames left out."""
    parts: list[str] = []
    _inline(node, parts)
    return safe("".join(parts))


def _inline(node: Any, parts: list[str]) -> None:
    if node.text:
        parts.append(node.text)
    for child in node:
        tag = child.tag
        if tag == _SPACE:
            parts.append(" " * min(max(count(attr(child, "text:c"), 1), 1), 1000))
        elif tag == _TAB:
            parts.append("\t")
        elif tag == _BREAK:
            parts.append("\n")
        elif tag not in _NOT_TEXT and isinstance(tag, str):
            _inline(child, parts)
        if child.tail:
            parts.append(child.tail)


def image_ref(frame: Any, odf: OdfPackage, assets: AssetSink) -> rp.ImageRef | None:
    """The first embedded image of a draw:frame as an asset; None when there is none or it is
    not kept (images "none", no asset store, over the limits, a link to an outside file)."""
    options = assets.options
    if options.images == IMAGES_NONE or options.assets_dir is None:
        return None
    for image in frame.iter(q("draw:image")):
        href = attr(image, "xlink:href")
        name = posixpath.normpath(href.removeprefix("./")) if href else ""
        if not name or name.startswith("..") or name not in odf.names:
            continue
        mime = mime_for_ext(posixpath.splitext(name)[1])
        if mime == "application/octet-stream":  # an embedded object's preview (no image type)
            continue
        try:
            blob = odf.read(name)
        except ParseFailure:  # a damaged picture costs the picture, not the document
            return None
        width, height = _pixel_size(blob)
        asset_id = assets.add(blob, mime, width, height)
        if asset_id:
            return rp.ImageRef(asset_id=asset_id, mime_type=mime, width=width, height=height)
        return None
    return None


def _pixel_size(blob: bytes) -> tuple[int, int]:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(blob)) as image:
            return int(image.size[0]), int(image.size[1])
    except (UnidentifiedImageError, OSError, ValueError):
        return 0, 0


def frame_bbox(node: Any) -> rp.BoundingBox | None:
    """A drawing object's box (svg:x, svg:y, svg:width, svg:height) in points."""
    x, y = attr(node, "svg:x"), attr(node, "svg:y")
    width, height = attr(node, "svg:width"), attr(node, "svg:height")
    if not (x and y and width and height):
        return None
    x0, y0 = length_pt(x), length_pt(y)
    return rp.BoundingBox(x0=x0, y0=y0, x1=x0 + length_pt(width), y1=y0 + length_pt(height))


def page_size(styles_root: Any) -> tuple[float, float]:
    """The first master page's size in points, from its page layout in styles.xml."""
    if styles_root is None:
        return 0.0, 0.0
    master = styles_root.find(f"{q('office:master-styles')}/{q('style:master-page')}")
    layout_name = attr(master, "style:page-layout-name") if master is not None else ""
    for layout in styles_root.iter(q("style:page-layout")):
        if layout_name and attr(layout, "style:name") != layout_name:
            continue
        props = layout.find(q("style:page-layout-properties"))
        if props is not None:
            return length_pt(attr(props, "fo:page-width")), length_pt(attr(props, "fo:page-height"))
    return 0.0, 0.0
