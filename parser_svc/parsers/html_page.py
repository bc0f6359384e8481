"""HTML / XHTML page → ReadingPackage: one Page whose blocks come from the markup
(`html_blocks.py`), the <title> and <meta> author, description, keywords into the metadata.

Read with lxml's HTML parser (libxml2): no network, no DTD, no entities but HTML's own, comments
and processing instructions dropped. The characters: `text_charset.decode_text` (BOM, then the
page's declared charset, then detection). Bounded before parsing: a page of more than
MAX_ELEMENTS tags is DOCUMENT_TOO_LARGE (the count of "<" bounds the element count), so the
tree a page can make is bounded whatever its size; nesting past MAX_NESTING levels (where
libxml2 would stop reading, the rest lost) is DOCUMENT_TOO_LARGE; past html_blocks.MAX_DEPTH
it is read as text.
"""

from __future__ import annotations

import re
from typing import Any

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    AssetSink,
    ParseOptions,
    ProgressFn,
    TableBudget,
    corrupt,
    safe,
    too_large,
)
from parser_svc.parsers.html_blocks import HtmlBlocks, strip_dropped
from parser_svc.parsers.html_images import ImageSource
from parser_svc.parsers.html_tables import local
from parser_svc.parsers.text_charset import declared_charset, decode_text

MAX_ELEMENTS = 1_000_000
# The deepest nesting libxml2 builds (with XML_PARSE_HUGE); deeper: DOCUMENT_TOO_LARGE.
MAX_NESTING = 2048
# Grid cells of a page's tables (covered cells of merged ones included), at most.
MAX_TABLE_CELLS = 2_000_000
_TAG_START = re.compile(rb"<[A-Za-z]")
_META_NAMES = {"author": "author", "description": "subject", "generator": "creator"}
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


def count_tags(data: bytes, limit: int) -> int:
    """Tags in `data`, counted up to `limit` + 1 (a bound on the elements a parse makes)."""
    count = 0
    for _ in _TAG_START.finditer(data):
        count += 1
        if count > limit:
            break
    return count


def parse_tree(text: str, what: str) -> Any:
    """The document tree of HTML or XHTML text (lxml's HTML parser, safely)."""
    from lxml import etree  # type: ignore[import-untyped]

    parser = etree.HTMLParser(
        encoding="utf-8",
        remove_comments=True,
        remove_pis=True,
        no_network=True,
        # libxml2 stops at 256 levels without it (the rest of the page silently lost; old pages
        # of unclosed <font> tags nest that deep), at MAX_NESTING with it: refused below.
        huge_tree=True,
        compact=True,
    )
    body = _XML_DECLARATION.sub("", text, count=1)
    if "\x00" in body:  # past the binary check's sample; libxml2 would stop at it
        body = body.replace("\x00", "")
    data = body.encode("utf-8")
    del body
    try:
        root = etree.fromstring(data, parser)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError) as err:
        raise corrupt(f"the {what} cannot be read as HTML: {err}") from err
    if any(error.type_name == "ERR_RESOURCE_LIMIT" for error in parser.error_log):
        raise too_large(f"the {what} nests elements deeper than {MAX_NESTING} levels")
    if root is None:
        raise corrupt(f"the {what} holds no HTML elements")
    return root


def page_title(root: Any) -> str:
    """The page's <title> (in its head: an SVG drawing's <title> is not the page's)."""
    for element in root.iter("{*}title"):
        parent = element.getparent()
        if parent is not None and local(parent) == "head":
            return safe(" ".join("".join(element.itertext()).split()))
    return ""


def html_metadata(root: Any, package: rp.ReadingPackage) -> None:
    """<title>, <meta name=author/description/generator/keywords>, <html lang>."""
    package.metadata.title = package.metadata.title or page_title(root)
    for element in root.iter("{*}meta"):
        name = (element.get("name") or "").strip().lower()
        content = safe(" ".join((element.get("content") or "").split()))
        if not content:
            continue
        if name in _META_NAMES and not getattr(package.metadata, _META_NAMES[name]):
            setattr(package.metadata, _META_NAMES[name], content)
        elif name == "keywords":
            package.metadata.extra["keywords"] = content
    lang = root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang")
    if lang:
        package.metadata.extra["language"] = safe(lang.strip())


def read_body(
    root: Any,
    page: rp.Page,
    assets: AssetSink,
    budget: TableBudget,
    images: ImageSource | None = None,
) -> None:
    """The blocks, tables and images of a parsed page's body into `page`."""
    body = next(root.iter("{*}body"), None)
    strip_dropped(root)
    reader = HtmlBlocks(page, assets, budget, images)
    reader.read(body if body is not None else root)
    reader.finish()


def parse_html(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    progress(0, 1, "text")
    if count_tags(data, MAX_ELEMENTS) > MAX_ELEMENTS:
        raise too_large(f"the HTML page has more than {MAX_ELEMENTS} elements")
    decoded = decode_text(data, "HTML page", declared=declared_charset(data))
    encoding = decoded.encoding
    root = parse_tree(decoded.text, "HTML page")
    del decoded  # the text: the tree holds it now
    package = rp.ReadingPackage(content_type="html")
    html_metadata(root, package)
    package.metadata.extra["charset"] = encoding
    page = package.pages.add(number=1)
    assets = AssetSink(package, options)
    read_body(root, page, assets, TableBudget(min(options.max_cells, MAX_TABLE_CELLS)))
    assets.finish()
    if not page.text and not page.images:
        package.warnings.append("the HTML page has no visible text")
    progress(1, 1, "text")
    return package
