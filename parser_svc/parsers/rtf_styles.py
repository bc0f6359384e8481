"""What an RTF document declares beside its text: the style sheet (which paragraph styles are
headings: "heading N" / "title" names or \\outlinelevelN, through \\sbasedon), the \\info
group (metadata) and \\pict pictures (PNG and JPEG blips, as hex or \\bin data)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import safe

INFO_FIELDS = {
    "title": "title",
    "subject": "subject",
    "author": "author",
    "manager": "manager",
    "company": "company",
    "operator": "last_modified_by",
    "category": "category",
    "keywords": "keywords",
    "doccomm": "comments",
}
_HEADING = re.compile(r"heading\s*(\d+)$")
_NOT_HEX = re.compile(rb"[^0-9a-fA-F]")
MAX_BASED_ON = 64


@dataclass
class _Entry:
    number: int = 0
    name: list[str] = field(default_factory=list)
    outline: int | None = None
    based_on: int | None = None
    paragraph: bool = True


@dataclass
class Styles:
    """The paragraph styles of \\stylesheet; `headings` maps a style number to (role, level)
    once the style sheet has been read (the dict is shared with the flows that use it)."""

    headings: dict[int, tuple[str, int]] = field(default_factory=dict)
    entries: dict[int, _Entry] = field(default_factory=dict)
    current: _Entry | None = None

    def begin(self) -> None:
        self.current = _Entry()

    def word(self, word: str, param: int | None) -> None:
        entry = self.current
        if entry is None:
            return
        if word == "s" and param is not None:
            entry.number = param
        elif word in ("cs", "ds", "ts", "tsrowd"):
            entry.paragraph = False
        elif word == "outlinelevel" and param is not None:
            entry.outline = param
        elif word == "sbasedon" and param is not None:
            entry.based_on = param

    def name(self, text: str) -> None:
        if self.current is not None:
            self.current.name.append(text)

    def end(self) -> None:
        entry, self.current = self.current, None
        if entry is not None and entry.paragraph:
            self.entries[entry.number] = entry
            self._resolve()

    def _resolve(self) -> None:
        self.headings.clear()
        for number in self.entries:
            found = self._kind(number)
            if found is not None:
                self.headings[number] = found

    def _kind(self, number: int) -> tuple[str, int] | None:
        seen = 0
        entry = self.entries.get(number)
        while entry is not None and seen < MAX_BASED_ON:
            name = "".join(entry.name).strip().rstrip(";").strip().lower()
            heading = _HEADING.match(name)
            if name == "title":
                return "title", 1
            if heading:
                return "heading", int(heading.group(1))
            if entry.outline is not None and entry.outline < 9:
                return "heading", max(entry.outline, 0) + 1
            if entry.based_on is None or entry.based_on == entry.number:
                return None
            entry = self.entries.get(entry.based_on)
            seen += 1
        return None


@dataclass
class Info:
    fields: dict[str, list[str]] = field(default_factory=dict)
    times: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, name: str, text: str) -> None:
        self.fields.setdefault(name, []).append(text)

    def time(self, which: str, word: str, param: int | None) -> None:
        if word in ("yr", "mo", "dy", "hr", "min", "sec") and param is not None:
            self.times.setdefault(which, {})[word] = param

    def fill(self, metadata: rp.DocumentMetadata) -> None:
        for name, parts in self.fields.items():
            value = safe("".join(parts).strip())
            if not value:
                continue
            if name in ("title", "author", "subject"):
                setattr(metadata, name, value)
            else:
                metadata.extra[name] = value
        for which, key in (("creatim", "created"), ("revtim", "modified")):
            t = self.times.get(which)
            if t and t.get("yr"):
                metadata.extra[key] = (
                    f"{t['yr']:04d}-{t.get('mo', 1):02d}-{t.get('dy', 1):02d}"
                    f"T{t.get('hr', 0):02d}:{t.get('min', 0):02d}:{t.get('sec', 0):02d}"
                )


@dataclass
class Picture:
    kind: str = ""
    hex: bytearray = field(default_factory=bytearray)
    data: bytes = b""
    width: int = 0
    height: int = 0

    def word(self, word: str, param: int | None) -> None:
        if word == "pngblip":
            self.kind = "png"
        elif word == "jpegblip":
            self.kind = "jpeg"
        elif word in ("emfblip", "wmetafile", "macpict", "dibitmap", "wbitmap", "pmmetafile"):
            self.kind = "other"

    def mime(self) -> str:
        return {"png": "image/png", "jpeg": "image/jpeg"}.get(self.kind, "")

    def bytes(self) -> bytes:
        """The picture's bytes (\\bin data, else the hex digits), and its pixel size read from
        the image header; b"" when they are not a readable image."""
        blob = self.data
        if not blob:
            digits = _NOT_HEX.sub(b"", self.hex)
            blob = bytes.fromhex(digits[: len(digits) // 2 * 2].decode("ascii"))
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(blob)) as image:
                self.width, self.height = image.size
        except (UnidentifiedImageError, OSError, ValueError):
            return b""
        return blob
