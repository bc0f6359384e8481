"""RTF → ReadingPackage: one Page whose blocks are, in order, headers, the body (paragraphs and
tables as in the document), footnotes, endnotes and footers (see rtf_flow for headings, lists
and tables). Text is decoded with the document's \\ansicpg code page, each font's \\fcharset
and \\uN (skipping its \\ucN fallback characters); ignorable destinations (\\*) and the font,
colour and style tables are not text; \\info gives the metadata; PNG and JPEG pictures
(\\pict with \\pngblip / \\jpegblip) are assets.

The reader is a loop over tokens with an explicit group stack, at most MAX_DEPTH deep (deeper
nesting: CORRUPT_DOCUMENT). A file cut short (groups left open) is read up to the cut with a
warning: RTF is read front to back, so everything before the cut is exactly what it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import (
    IMAGES_NONE,
    AssetSink,
    ParseOptions,
    ProgressFn,
    TableBudget,
    corrupt,
    page_text,
    safe,
    too_large,
)
from parser_svc.parsers.rtf_flow import FLOWS, ORDER, Flow, flow_word
from parser_svc.parsers.rtf_lexer import (
    BINARY,
    CHARS,
    CLOSE,
    HEX,
    OPEN,
    SYMBOL,
    SYMBOLS,
    TEXT,
    WORD,
    Token,
    codec_for_charset,
    codec_for_codepage,
    decode,
    tokens,
)
from parser_svc.parsers.rtf_styles import INFO_FIELDS, Info, Picture, Styles

MAX_DEPTH = 1000
SKIP = "skip"  # a destination that is not text (and nothing inside it is read)
DISCARD = "discard"  # text dropped, but pictures inside are read (shape properties)
BODY = "body"
SKIPPED = frozenset(
    (
        *("colortbl", "filetbl", "revtbl", "rsidtbl", "listtable", "listoverridetable"),
        *("pgdsctbl", "xmlnstbl", "nonshppict", "fldinst", "objdata", "objclass", "datafield"),
        *("themedata", "colorschememapping", "latentstyles", "datastore", "generator"),
        *("private", "userprops", "bkmkstart", "bkmkend", "txe", "xe", "tc", "shprslt", "sn"),
        *("template", "docvar", "pnseclvl"),
    )
)
TRANSPARENT = frozenset(
    ("shppict", "shpinst", "fldrslt", "ud", "shptxt", "shp", "result", "object", "field")
)


@dataclass(slots=True)
class State:
    dest: str = BODY
    uc: int = 1
    font: int = -1
    flow: Flow | None = None
    started: bool = False  # this group opened its destination
    hidden: bool = False  # \\v: hidden text, not shown


@dataclass
class _Reader:
    options: ParseOptions
    package: rp.ReadingPackage
    assets: AssetSink
    styles: Styles = field(default_factory=Styles)
    info: Info = field(default_factory=Info)
    fonts: dict[int, str] = field(default_factory=dict)
    ansi: str = "cp1252"
    deff: int = 0
    skip: int = 0  # \uc fallback characters still to drop
    high: str = ""  # a UTF-16 high surrogate waiting for its pair
    hexbuf: bytearray = field(default_factory=bytearray)
    marker: list[str] = field(default_factory=list)
    picture: Picture | None = None
    flows: list[Flow] = field(default_factory=list)
    images: list[rp.ImageRef] = field(default_factory=list)
    lossy: bool = False
    unread_pictures: int = 0  # metafiles, bitmaps and damaged blips
    star: bool = False  # the last token was \\*

    def __post_init__(self) -> None:
        self.budget = TableBudget(self.options.max_cells)
        self.body = Flow("", self.styles.headings, self.budget)
        self.flows.append(self.body)
        self.stack: list[State] = []
        self.state = State(flow=self.body)

    def codec(self) -> str:
        font = self.state.font if self.state.font >= 0 else self.deff
        return self.fonts.get(font, self.ansi)

    def run(self, data: bytes) -> int:
        """Reads the document; the number of groups left open at the end."""
        for token in tokens(data):
            if token.kind != HEX and self.hexbuf:
                raw, self.hexbuf = bytes(self.hexbuf), bytearray()
                self.emit(self.decoded(raw))
            if token.kind == OPEN:
                self.open()
            elif token.kind == CLOSE:
                if not self.stack:
                    continue
                self.close()
                if not self.stack:
                    return 0
            elif self.state.dest == SKIP or not self.stack:  # (outside the document's group)
                continue
            elif self.skip and token.kind != BINARY:
                self.skip_fallback(token)
            elif token.kind == TEXT:
                self.text(token.data)
            elif token.kind == HEX:
                self.hexbuf += token.data
            elif token.kind == WORD:
                self.word(token.word, token.param)
            elif token.kind == SYMBOL:
                self.symbol(token.word)
            elif token.kind == BINARY and self.picture is not None and self.state.dest == "pict":
                self.picture.data += token.data
        return len(self.stack)

    def decoded(self, raw: bytes) -> str:
        text, lossy = decode(raw, self.codec())
        self.lossy = self.lossy or lossy
        return text

    def skip_fallback(self, token: Token) -> None:
        if token.kind == TEXT and len(token.data) > self.skip:
            data, self.skip = token.data[self.skip :], 0
            self.text(data)
        else:
            self.skip -= len(token.data) if token.kind == TEXT else 1

    def open(self) -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise corrupt(f"the RTF nests groups more than {MAX_DEPTH} deep")
        self.stack.append(self.state)
        parent = self.state
        self.state = State(parent.dest, parent.uc, parent.font, parent.flow, False, parent.hidden)
        self.skip, self.high = 0, ""
        if parent.dest == "stylesheet" and parent.started:  # a style of the style sheet
            self.styles.begin()

    def close(self) -> None:
        done, self.state = self.state, self.stack.pop()
        self.skip, self.high = 0, ""
        if done.dest == "stylesheet" and not done.started and self.state.started:
            self.styles.end()
        if not done.started:
            return
        if done.dest == "pict" and self.picture is not None:
            self.add_picture(self.picture)
            self.picture = None
        elif done.dest == "listtext" and self.state.flow is not None:
            self.state.flow.marker = "".join(self.marker).strip()
        elif done.dest == BODY and done.flow is not None and done.flow is not self.state.flow:
            done.flow.finish()
            if done.flow.role == "comment":
                done.flow.comment(safe("".join(self.info.fields.pop("annotation_author", []))))

    def text(self, raw: bytes) -> None:
        dest = self.state.dest
        if dest == "pict":
            if self.picture is not None:
                self.picture.hex += raw
        elif dest in (BODY, "listtext", "stylesheet") or dest.startswith("info:"):
            self.emit(self.decoded(raw))

    def emit(self, text: str) -> None:
        self.high = ""  # a high surrogate not followed by its low half is no character
        dest = self.state.dest
        if dest == BODY and self.state.flow is not None:
            if not self.state.hidden:
                self.state.flow.text(text)
        elif dest == "listtext":
            self.marker.append(text.split("\t")[0])
        elif dest == "stylesheet":
            self.styles.name(text)
        elif dest.startswith("info:"):
            self.info.add(dest[5:], text)

    def unicode(self, value: int) -> None:
        value = value + 65536 if value < 0 else value
        self.skip = self.state.uc
        if 0xD800 <= value < 0xDC00:
            self.high = chr(value)
            return
        if 0xDC00 <= value < 0xE000 and self.high:
            pair = (self.high + chr(value)).encode("utf-16", "surrogatepass")
            self.emit(pair.decode("utf-16"))
            return
        self.high = ""
        if 0xD800 <= value < 0xE000 or not 0 <= value <= 0x10FFFF:
            return  # a lone surrogate or out of range: not a character
        self.emit(chr(value))

    def start(self, dest: str, flow: Flow | None = None) -> None:
        self.state.dest, self.state.started = dest, True
        if flow is not None:
            self.state.flow = flow

    def destination(self, word: str) -> bool:
        """Starts the destination `word` names; False when it is not one."""
        if word in SKIPPED:
            self.start(SKIP)
        elif word in ("fonttbl", "stylesheet", "info"):
            self.start(word if word != "info" else DISCARD)
        elif word in INFO_FIELDS:
            self.start(f"info:{INFO_FIELDS[word]}")
        elif word in ("listtext", "pntext"):
            self.marker = []
            self.start("listtext")
        elif word == "pict":
            self.picture = Picture()
            self.start("pict")
        elif word in ("sp", "sv"):
            self.start(DISCARD)
        elif word == "atnauthor":
            self.start("info:annotation_author")
        elif word in FLOWS:
            flow = Flow(FLOWS[word], self.styles.headings, self.budget)
            self.flows.append(flow)
            self.start(BODY, flow)
        elif word in ("creatim", "revtim"):
            self.start(f"time:{word}")
        else:
            return False
        return True

    def starred(self, word: str) -> None:
        """\\*\\word: an ignorable destination, read only when this reader knows it."""
        if word not in TRANSPARENT and not self.destination(word):
            self.start(SKIP)

    def word(self, word: str, param: int | None) -> None:
        if self.star:
            self.star = False
            self.starred(word)
            return
        if self.destination(word):
            return
        dest = self.state.dest
        if dest == "fonttbl":
            self.font_word(word, param)
        elif dest == "stylesheet":
            self.styles.word(word, param)
        elif dest == "pict" and self.picture is not None:
            self.picture.word(word, param)
        elif dest.startswith("time:"):
            self.info.time(dest[5:], word, param)
        elif dest in (BODY, "listtext"):
            self.format_word(word, param)

    def symbol(self, char: str) -> None:
        if char == "*":
            self.star = True
        elif char in "\r\n":
            self.word("par", None)
        elif char in SYMBOLS and (
            self.state.dest in (BODY, "listtext", "stylesheet")
            or self.state.dest.startswith("info:")
        ):
            self.emit(SYMBOLS[char])

    def font_word(self, word: str, param: int | None) -> None:
        if word == "f" and param is not None:
            self.state.font = param
        elif word == "fcharset" and param is not None:
            codec = codec_for_charset(param)
            if codec is not None:
                self.fonts[self.state.font] = codec
        elif word == "cpg" and param is not None:
            codec = codec_for_codepage(param)
            if codec is not None:
                self.fonts[self.state.font] = codec

    def format_word(self, word: str, param: int | None) -> None:
        state, flow = self.state, self.state.flow
        if word == "u" and param is not None:
            self.unicode(param)
        elif word == "uc" and param is not None:
            state.uc = max(param, 0)
        elif word == "f" and param is not None:
            state.font = param
        elif word == "plain":
            state.font, state.hidden = -1, False
        elif word == "v":
            state.hidden = param != 0
        elif word in CHARS:
            self.emit(CHARS[word])
        elif word in ("ansicpg", "deff", "ansi", "mac", "pc", "pca"):
            self.document_word(word, param)
        elif flow is not None and state.dest == BODY:
            flow_word(flow, word, param)

    def document_word(self, word: str, param: int | None) -> None:
        if word == "ansicpg" and param is not None:
            self.ansi = codec_for_codepage(param) or self.ansi
        elif word == "deff" and param is not None:
            self.deff = param
        elif word in ("mac", "pc", "pca"):
            self.ansi = {"mac": "mac_roman", "pc": "cp437", "pca": "cp850"}[word]

    def add_picture(self, picture: Picture) -> None:
        mime = picture.mime()
        blob = picture.bytes() if mime else b""
        if not blob:
            self.unread_pictures += 1
            return
        asset_id = self.assets.add(blob, mime, picture.width, picture.height)
        if asset_id:
            self.images.append(
                rp.ImageRef(
                    asset_id=asset_id, mime_type=mime, width=picture.width, height=picture.height
                )
            )


def parse_rtf(data: bytes, progress: ProgressFn, options: ParseOptions) -> rp.ReadingPackage:
    if not data[:64].lstrip(b" \t\r\n\xef\xbb\xbf")[:5] == b"{\\rtf":
        raise corrupt("the document does not start with {\\rtf: it is not an RTF document")
    if len(data) > options.max_unzipped_bytes:
        raise too_large(
            f"the RTF document is {len(data)} bytes; the limit is {options.max_unzipped_bytes}"
        )
    progress(0, 1, "text")
    package = rp.ReadingPackage(content_type="rtf")
    assets = AssetSink(package, options)
    reader = _Reader(options, package, assets)
    open_groups = reader.run(data)
    if open_groups:
        package.warnings.append(
            f"the RTF document ends inside {open_groups} open groups (it was cut short); "
            "the text up to the cut is kept"
        )
    if reader.unread_pictures and options.images != IMAGES_NONE:
        package.warnings.append(
            f"pictures left out: {reader.unread_pictures} (not PNG or JPEG images: Windows "
            "metafiles, device-independent bitmaps, or damaged)"
        )
    if reader.lossy:
        package.warnings.append(
            "some characters could not be decoded with the document's code page and were read "
            "as Windows-1252"
        )
    _assemble(reader, package)
    assets.finish()
    progress(1, 1, "text")
    return package


def _assemble(reader: _Reader, package: rp.ReadingPackage) -> None:
    reader.info.fill(package.metadata)
    page = rp.Page(number=1)
    for flow in reader.flows:
        flow.finish()
    for flow in sorted(reader.flows, key=lambda f: ORDER.get(f.role, 1)):
        page.blocks.extend(flow.blocks)
        page.tables.extend(flow.tables)
    page.images.extend(reader.images)
    page.text = safe(page_text([b.text for b in page.blocks]))
    package.pages.append(page)
    if not page.text and not page.images:
        package.warnings.append("the document contains no text and no images")
