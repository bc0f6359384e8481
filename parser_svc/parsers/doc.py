"""DOC (Word 6.0/95 and 97-2003) → ReadingPackage with antiword.

antiword is a system tool (`apt-get install antiword`; `make setup` installs it on Debian when it
can). Without it a DOC ends FAILED with UNSUPPORTED_FORMAT naming what is missing. When antiword
refuses a valid file (it will not read very small documents), the text is read from the
document's piece table instead, with a warning. Encrypted DOCs are decrypted with msoffcrypto
(RC4 / CryptoAPI) first. Like DOCX, the document is one Page; metadata comes from the OLE
SummaryInformation stream.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    ParseFailure,
    ParseOptions,
    ProgressFn,
    corrupt,
    page_text,
    safe,
)
from parser_svc.parsers.office import decrypt

FIB_MAGIC_97 = 0xA5EC
FIB_MAGIC_WORD6 = 0xA5DC  # Word 6.0 (nFib 101-103) and Word 95 (nFib 104)
ANTIWORD_TIMEOUT_S = 120


def antiword_path(configured: str = "") -> str | None:
    """The program `configured` names (ParseOptions.antiword, from DOCPARSE_ANTIWORD), or
    antiword on PATH; None if it is not there."""
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("antiword")


def parse_doc(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    import olefile  # type: ignore[import-untyped]

    progress(0, 1, "text")
    package = rp.ReadingPackage(content_type="doc")
    try:
        with olefile.OleFileIO(data) as ole:
            word = ole.openstream("WordDocument").read()
            meta = ole.get_metadata()
    except Exception as err:
        raise corrupt(f"the Word document cannot be opened: {type(err).__name__}: {err}") from err
    if len(word) < 0x20:
        raise corrupt("the Word document's main stream is truncated")
    ident, flags = struct.unpack_from("<H", word, 0)[0], struct.unpack_from("<H", word, 0xA)[0]
    if flags & 0x0100:  # fEncrypted
        data = decrypt(data, options.password, "Word document")
        package.decrypted = True
    for name in ("title", "subject", "author"):
        value = getattr(meta, name, None)
        if value:
            setattr(package.metadata, name, safe(_decode(value)))
    if getattr(meta, "creating_application", None):
        package.metadata.creator = safe(_decode(meta.creating_application))
    tool = antiword_path(options.antiword)
    if tool is None:
        raise ParseFailure(
            ErrorReason.UNSUPPORTED_FORMAT,
            "Word 97-2003 (.doc) documents need antiword, which is not installed on this "
            "worker (apt-get install antiword)",
        )
    text, problem = _antiword(tool, data)
    if problem and ident == FIB_MAGIC_WORD6:
        # Old is not corrupt: a Word 6.0/95 file antiword cannot read is read here, or named.
        text = _word6_text(word, problem)
        package.warnings.append(
            f"antiword could not read this {_word6_version(word)} document ({problem}); the "
            "text was read from its main stream"
        )
    elif problem:
        fallback = _piece_table_text(data) if ident == FIB_MAGIC_97 else ""
        if not fallback.strip():
            raise corrupt(f"antiword cannot read this document: {problem}")
        package.warnings.append(
            f"antiword could not read this document ({problem}); the text was read from its "
            "piece table"
        )
        text = fallback
    page = rp.Page(number=1)
    paragraphs = [safe(p.strip()) for p in text.replace("\r", "\n").split("\n\n")]
    paragraphs = [p for p in paragraphs if p]
    for paragraph in paragraphs:
        page.blocks.append(rp.TextBlock(text=paragraph, source="text"))
    page.text = page_text(paragraphs)
    package.pages.append(page)
    if not page.text:
        package.warnings.append("the document contains no text")
    progress(1, 1, "text")
    return package


def _decode(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("cp1252", "replace")
    return str(value)


def _antiword(tool: str, data: bytes) -> tuple[str, str]:
    """(text, "") or ("", what antiword said)."""
    with tempfile.TemporaryDirectory(prefix="docparse-doc-") as tmp:
        path = Path(tmp) / "input.doc"
        path.write_bytes(data)
        try:
            done = subprocess.run(
                [tool, "-m", "UTF-8.txt", "-w", "0", str(path)],
                capture_output=True,
                timeout=ANTIWORD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return "", f"antiword took longer than {ANTIWORD_TIMEOUT_S} s"
    out = done.stdout.decode("utf-8", "replace")
    err = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode != 0 or (not out.strip() and err):
        return "", (err or out.strip() or f"exit status {done.returncode}")[:300]
    return out, ""


def _word6_version(word: bytes) -> str:
    return "Word 95" if struct.unpack_from("<H", word, 2)[0] >= 104 else "Word 6.0"


def _word6_text(word: bytes, problem: str) -> str:
    """The main text of a fully saved Word 6.0/95 document: cp1252 bytes from fcMin, ccpText
    long. A fast-saved one (pieces) is UNSUPPORTED_FORMAT naming the version; text that lies
    beyond the stream is CORRUPT_DOCUMENT."""
    version = _word6_version(word)
    flags = struct.unpack_from("<H", word, 0xA)[0]
    if flags & 0x0004:  # fComplex: fast-saved, the text is in pieces
        raise ParseFailure(
            ErrorReason.UNSUPPORTED_FORMAT,
            f"a {version} document saved with fast save: antiword could not read it "
            f"({problem}), and docparse reads {version} text only from fully saved files "
            "(open and save it again, or convert it to DOCX)",
        )
    fc_min = struct.unpack_from("<I", word, 0x18)[0]
    ccp_text = struct.unpack_from("<i", word, 0x34)[0]
    if fc_min < 0x20 or ccp_text < 0 or fc_min + ccp_text > len(word):
        raise corrupt(
            f"the {version} document is damaged: its text ({ccp_text} characters at "
            f"{fc_min}) lies beyond its main stream ({len(word)} bytes)"
        )
    return _clean_word_text(word[fc_min : fc_min + ccp_text].decode("cp1252", "replace"))


def _piece_table_text(data: bytes) -> str:
    """The main text of a Word 97+ document from its piece table (the CLX in the table stream):
    each piece is cp1252 ("compressed") or UTF-16 text in the WordDocument stream."""
    import olefile

    try:
        with olefile.OleFileIO(data) as ole:
            word = ole.openstream("WordDocument").read()
            flags = struct.unpack_from("<H", word, 0xA)[0]
            table_name = "1Table" if flags & 0x0200 else "0Table"
            table = ole.openstream(table_name).read()
        ccp_text = struct.unpack_from("<i", word, 0x4C)[0]
        fc_clx, lcb_clx = struct.unpack_from("<II", word, 0x1A2)
        clx = table[fc_clx : fc_clx + lcb_clx]
        i = 0
        while i < len(clx) and clx[i] == 1:  # skip Prc entries
            i += 3 + struct.unpack_from("<H", clx, i + 1)[0]
        if i >= len(clx) or clx[i] != 2:
            return ""
        lcb = struct.unpack_from("<I", clx, i + 1)[0]
        plc = clx[i + 5 : i + 5 + lcb]
        count = (lcb - 4) // 12
        cps = struct.unpack_from(f"<{count + 1}i", plc, 0)
        parts = []
        for k in range(count):
            fc = struct.unpack_from("<I", plc, (count + 1) * 4 + k * 8 + 2)[0]
            length = cps[k + 1] - cps[k]
            if fc & 0x40000000:
                start = (fc & 0x3FFFFFFF) // 2
                parts.append(word[start : start + length].decode("cp1252", "replace"))
            else:
                parts.append(word[fc : fc + 2 * length].decode("utf-16-le", "replace"))
        text = "".join(parts)[: max(ccp_text, 0)]
    except Exception:
        return ""
    return _clean_word_text(text)


def _clean_word_text(text: str) -> str:
    """Drops field codes (keeps their results) and maps Word's control characters."""
    out = []
    depth = 0
    in_code = []
    for ch in text:
        if ch == "\x13":
            depth += 1
            in_code.append(True)
        elif ch == "\x14" and in_code:
            in_code[-1] = False
        elif ch == "\x15" and in_code:
            in_code.pop()
            depth -= 1
        elif in_code and in_code[-1]:
            continue
        elif ch in "\r\x0c":
            out.append("\n\n")
        elif ch == "\x0b":
            out.append("\n")
        elif ch == "\x07":
            out.append("\t")
        elif ch >= " " or ch == "\t":
            out.append(ch)
    return "".join(out)
