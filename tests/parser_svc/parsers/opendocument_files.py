"""OpenDocument packages written by hand for the tests, laid out as LibreOffice writes them
(mimetype stored first, content.xml, styles.xml, meta.xml, META-INF/manifest.xml), and the
XML fragments the tests share."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import zipfile
import zlib

import pytest
from PIL import Image

from parser_svc.parsers import ParseFailure, ParseOptions

NS = " ".join(
    f'xmlns:{prefix}="{uri}"'
    for prefix, uri in {
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
        "officeooo": "http://openoffice.org/2009/office",
        "calcext": "urn:org:documentfoundation:names:experimental:calc:xmlns:calcext:1.0",
    }.items()
)
KINDS = {
    "odt": ("application/vnd.oasis.opendocument.text", "text"),
    "ods": ("application/vnd.oasis.opendocument.spreadsheet", "spreadsheet"),
    "odp": ("application/vnd.oasis.opendocument.presentation", "presentation"),
}
A4_STYLES = (
    '<office:automatic-styles><style:page-layout style:name="pm1">'
    '<style:page-layout-properties fo:page-width="21cm" fo:page-height="29.7cm"/>'
    "</style:page-layout></office:automatic-styles><office:master-styles>"
    '<style:master-page style:name="Standard" style:page-layout-name="pm1"/>'
    "</office:master-styles>"
)


def odf(
    kind: str,
    body: str,
    auto: str = "",
    styles: str = "",
    meta: str = "",
    files: dict[str, bytes] | None = None,
    mimetype: str = "",
) -> bytes:
    """An OpenDocument package as LibreOffice lays it out."""
    mime, element = KINDS[kind]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), mimetype or mime, zipfile.ZIP_STORED)
        archive.writestr(
            "content.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {NS} '
            f'office:version="1.3"><office:automatic-styles>{auto}</office:automatic-styles>'
            f"<office:body><office:{element}>{body}</office:{element}></office:body>"
            "</office:document-content>",
        )
        archive.writestr(
            "styles.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><office:document-styles {NS}>{styles}'
            "</office:document-styles>",
        )
        archive.writestr(
            "meta.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta {NS}>'
            f"<office:meta>{meta}</office:meta></office:document-meta>",
        )
        archive.writestr(
            "META-INF/manifest.xml",
            '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:'
            f'manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-type='
            f'"{mime}"/></manifest:manifest>',
        )
        for name, data in (files or {}).items():
            archive.writestr(name, data)
    return out.getvalue()


def options(**overrides: object) -> ParseOptions:
    return ParseOptions.defaults(job_id="job1", deployment="test", **overrides)


def nothing(done: int, total: int, stage: str) -> None:
    pass


def failure(parser: object, data: bytes, **overrides: object) -> ParseFailure:
    with pytest.raises(ParseFailure) as caught:
        parser(data, nothing, options(**overrides))  # type: ignore[operator]
    return caught.value


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "teal").save(out, "PNG")
    return out.getvalue()


def p(text: str, style: str = "") -> str:
    return (
        f'<text:p text:style-name="{style}">{text}</text:p>'
        if style
        else f"<text:p>{text}</text:p>"
    )


def items(*texts: str) -> str:
    return "".join(
        f"<text:list-item>{t if t.startswith('<') else p(t)}</text:list-item>" for t in texts
    )


LIST_STYLES = (
    '<style:style style:name="P1" style:family="paragraph" style:parent-style-name="Title"/>'
    '<text:list-style style:name="N"><text:list-level-style-number text:level="1" '
    'style:num-format="1" style:num-suffix="."/><text:list-level-style-number text:level="2" '
    'style:num-format="1" style:num-suffix="." text:display-levels="2"/>'
    '<text:list-level-style-number text:level="3" style:num-format="i" style:num-prefix="(" '
    'style:num-suffix=")"/></text:list-style>'
    '<text:list-style style:name="B"><text:list-level-style-bullet text:level="1" '
    'text:bullet-char="•"/><text:list-level-style-bullet text:level="2" text:bullet-char="◦"/>'
    "</text:list-style>"
)


def cell(value_type: str, attrs: str, shown: str, extra: str = "") -> str:
    return (
        f'<table:table-cell office:value-type="{value_type}" {attrs} {extra}>'
        f"{p(shown)}</table:table-cell>"
    )


def frame(cls: str, x: float, y: float, inner: str) -> str:
    kind = f'presentation:class="{cls}" ' if cls else ""
    return (
        f'<draw:frame {kind}svg:x="{x}cm" svg:y="{y}cm" svg:width="10cm" svg:height="2cm">'
        f"{inner}</draw:frame>"
    )


# --- password protection, as LibreOffice writes it --------------------------------------------

MANIFEST_NS = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"
LOEXT_NS = "urn:org:documentfoundation:names:experimental:office:xmlns:loext:1.0"


def _deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _seal(packed: bytes, password: str, rounds: int, blowfish: bool) -> tuple[bytes, str]:
    """A deflated part encrypted, and its manifest:encryption-data."""
    from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
    from cryptography.hazmat.decrepit.ciphers.modes import CFB
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    secret = password.encode("utf-8")
    salt = os.urandom(16)
    if blowfish:  # OpenOffice.org before 3.4
        iv, start, size, names = os.urandom(8), hashlib.sha1(secret).digest(), 16, "SHA1"
        key = hashlib.pbkdf2_hmac("sha1", start, salt, rounds, size)
        sealed = Cipher(Blowfish(key), CFB(iv)).encryptor().update(packed)
        check = ("SHA1/1K", hashlib.sha1(packed[:1024]).digest(), "Blowfish CFB")
    else:
        iv, start, size = os.urandom(16), hashlib.sha256(secret).digest(), 32
        names = "http://www.w3.org/2000/09/xmldsig#sha256"
        key = hashlib.pbkdf2_hmac("sha1", start, salt, rounds, size)
        pad = 16 - len(packed) % 16
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        sealed = encryptor.update(packed + os.urandom(pad - 1) + bytes([pad]))
        check = (
            "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0#sha256-1k",
            hashlib.sha256(packed[:1024]).digest(),
            "http://www.w3.org/2001/04/xmlenc#aes256-cbc",
        )
    data = (
        f'<manifest:encryption-data manifest:checksum-type="{check[0]}" manifest:checksum='
        f'"{_b64(check[1])}"><manifest:algorithm manifest:algorithm-name="{check[2]}" '
        f'manifest:initialisation-vector="{_b64(iv)}"/><manifest:start-key-generation '
        f'manifest:start-key-generation-name="{names}" manifest:key-size="{len(start)}"/>'
        f'<manifest:key-derivation manifest:key-derivation-name="PBKDF2" manifest:key-size='
        f'"{size}" manifest:iteration-count="{rounds}" manifest:salt="{_b64(salt)}"/>'
        "</manifest:encryption-data>"
    )
    return sealed, data


def encrypt_parts(data: bytes, password: str, rounds: int = 1000, blowfish: bool = False) -> bytes:
    """`data` (a package) with content.xml, styles.xml and meta.xml each deflated and encrypted:
    AES-256-CBC with a PBKDF2-HMAC-SHA1 key from the password's SHA-256 (ODF 1.2), or Blowfish
    CFB with a SHA-1 start key (`blowfish`: OpenOffice.org before 3.4)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    entries, members = [], {}
    for name in ("content.xml", "styles.xml", "meta.xml"):
        plain = source.read(name)
        members[name], encryption = _seal(_deflate(plain), password, rounds, blowfish)
        entries.append(
            f'<manifest:file-entry manifest:full-path="{name}" manifest:media-type="text/xml" '
            f'manifest:size="{len(plain)}">{encryption}</manifest:file-entry>'
        )
    mime = source.read("mimetype").decode("ascii")
    members["META-INF/manifest.xml"] = (
        f'<manifest:manifest xmlns:manifest="{MANIFEST_NS}"><manifest:file-entry '
        f'manifest:full-path="/" manifest:media-type="{mime}"/>{"".join(entries)}'
        "</manifest:manifest>"
    ).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), mime, zipfile.ZIP_STORED)
        for info in source.infolist():
            if info.filename != "mimetype":
                archive.writestr(info.filename, members.get(info.filename, source.read(info)))
    return out.getvalue()


def encrypt_whole(data: bytes, password: str, memory_kib: int = 64) -> bytes:
    """`data` (a package) inside another, deflated and encrypted whole (AES-256-GCM with an
    Argon2id key), as LibreOffice 7.6 and later write password-protected files."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

    salt, iv = os.urandom(16), os.urandom(12)
    start = hashlib.sha256(password.encode("utf-8")).digest()
    key = Argon2id(salt=salt, length=32, iterations=1, lanes=1, memory_cost=memory_kib).derive(
        start
    )
    sealed = AESGCM(key).encrypt(iv, _deflate(data), None)
    mime = zipfile.ZipFile(io.BytesIO(data)).read("mimetype").decode("ascii")
    manifest = (
        f'<manifest:manifest xmlns:manifest="{MANIFEST_NS}" xmlns:loext="{LOEXT_NS}">'
        f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{mime}"/>'
        '<manifest:file-entry manifest:full-path="encrypted-package" manifest:media-type="">'
        "<manifest:encryption-data><manifest:algorithm manifest:algorithm-name="
        f'"http://www.w3.org/2009/xmlenc11#aes256-gcm" manifest:initialisation-vector="{_b64(iv)}"'
        "/><manifest:start-key-generation manifest:start-key-generation-name="
        '"http://www.w3.org/2000/09/xmldsig#sha256" manifest:key-size="32"/>'
        '<manifest:key-derivation manifest:key-derivation-name="urn:org:documentfoundation:'
        f'names:experimental:office:manifest:argon2id" manifest:key-size="32" manifest:salt='
        f'"{_b64(salt)}" loext:argon2-iterations="1" loext:argon2-memory="{memory_kib}" '
        'loext:argon2-lanes="1"/></manifest:encryption-data></manifest:file-entry>'
        "</manifest:manifest>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), mime, zipfile.ZIP_STORED)
        archive.writestr("META-INF/manifest.xml", manifest)
        archive.writestr("encrypted-package", sealed)
    return out.getvalue()
