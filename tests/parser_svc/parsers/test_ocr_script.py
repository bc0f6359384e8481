"""OCR without a language hint finds a document's script once, cheaply (parser_svc/parsers/
ocr_script.py), and reads each page once with the right models; a PDF page whose text layer has
any glyph without a Unicode mapping (U+FFFD) is read by OCR; a fax (CCITT G4, 1-bit, 204x98 or
204x196 DPI: pixels twice as tall as wide) embedded in a PDF reads its words."""

from __future__ import annotations

import io
import re

import pymupdf
import pytest
from PIL import Image

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions, ocr
from parser_svc.parsers.ocr_script import line_piece, text_bands
from tests.fixtures.scans import PAGE_H, PAGE_W, TEXTS, cer, scan

pytestmark = pytest.mark.skipif(not ocr.installed_models(), reason="tesseract is not installed")

# The script each generated language is written in, and the models that read it.
SCRIPTS = {
    "en": "Latin",
    "de": "Latin",
    "fr": "Latin",
    "es": "Latin",
    "ru": "Cyrillic",
    "zh": "Han",
    "ja": "Japanese",
    "ar": "Arabic",
}


def read(data: bytes, **options: object) -> rp.ReadingPackage:
    opts = ParseOptions.defaults(job_id="t", deployment="test", **options)
    return parse("pdf", data, lambda *_: None, opts)


def page_image(data: bytes) -> object:
    """The page as the PDF parser renders it for OCR (150 DPI, grey)."""
    import numpy as np

    page = pymupdf.open(stream=data, filetype="pdf")[0]
    pix = page.get_pixmap(dpi=150, colorspace=pymupdf.csGRAY, alpha=False)
    return np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width)


@pytest.mark.parametrize("language", sorted(SCRIPTS))
def test_the_script_of_a_page_is_guessed_from_a_piece_of_one_line(language: str) -> None:
    for seed in (0, 5):
        image = page_image(scan(language, 200, seed).pdf)
        script = SCRIPTS[language]
        wanted = tuple(m for m in ocr.SCRIPT_MODELS[script] if m in ocr.installed_models())
        assert ocr.guess_models(image) == wanted, (language, seed)


def test_a_page_without_text_lines_has_no_guess() -> None:
    import numpy as np

    blank = np.full((400, 300), 255, dtype=np.uint8)
    assert text_bands(blank) == [] and line_piece(blank) is None
    assert ocr.guess_models(blank) == ()


def test_the_piece_is_whole_words_of_one_line() -> None:
    image = page_image(scan("en", 200, 0).pdf)
    bands = text_bands(image)
    assert len(bands) == len(TEXTS["en"])  # one band per line of the page
    piece = line_piece(image)
    assert piece is not None
    text, confidence = ocr._tesseract_line(piece, ("eng",))
    line = TEXTS["en"][len(TEXTS["en"]) // 2]
    assert confidence > 0.85 and text.startswith(" ".join(line.split()[:4])), text


@pytest.mark.slow  # OCR of a five-page scan
def test_a_document_is_read_in_its_script_page_after_page() -> None:
    doc = pymupdf.open()
    pages = [scan("ru", 200, 10), scan("ru", 200, 11), scan("es", 200, 12), scan("ru", 200, 13)]
    for page in pages:
        doc.insert_pdf(pymupdf.open(stream=page.pdf, filetype="pdf"))
    package = read(doc.tobytes(), ocr_page_threads=1)
    for page, out in zip(pages, package.pages, strict=True):
        assert out.ocr and cer(page.truth, out.text, page.language) <= 0.035, out.text
    assert not re.search("[\u0400-\u04ff]", package.pages[2].text)  # no Cyrillic look-alikes


def unmapped_glyphs_pdf(html: str, chars: str) -> bytes:
    """A text PDF (`html`) whose fonts' ToUnicode maps leave out the glyphs of `chars` (as
    subsetting tools sometimes write them): text extraction gives U+FFFD for them, the page
    shows them."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_W, height=PAGE_H)
    page.insert_htmlbox(
        pymupdf.Rect(60, 70, PAGE_W - 60, PAGE_H - 70), f"<p style='font-size:14pt'>{html}</p>"
    )
    gone = {ord(c) for c in chars}
    for xref, *_ in page.get_fonts(full=True):
        cmap_xref = int(doc.xref_get_key(xref, "ToUnicode")[1].split()[0])
        kept = []
        for line in doc.xref_stream(cmap_xref).decode().splitlines():
            found = re.fullmatch(r"<([0-9a-f]+)> <([0-9a-f]+)> <([0-9a-f]{4})>", line.strip())
            single = re.fullmatch(r"<[0-9a-f]+> <([0-9a-f]{4})>", line.strip())
            if single and int(single.group(1), 16) in gone:
                continue
            if not found:
                kept.append(line)
                continue
            low, high, first = (int(g, 16) for g in found.groups())
            kept += [
                f"<{code:04x}> <{code:04x}> <{first + code - low:04x}>"
                for code in range(low, high + 1)
                if first + code - low not in gone
            ]
        doc.update_stream(cmap_xref, "\n".join(kept).encode())
    data: bytes = doc.tobytes()
    return data


TEXT = "Invoice 4711 was paid on Tuesday by the northern office in Leeds."


def test_a_page_with_a_few_unmapped_glyphs_is_read_by_ocr() -> None:
    data = unmapped_glyphs_pdf(TEXT, "y")  # 2 of 55 characters: no Unicode for "y"
    layer = pymupdf.open(stream=data, filetype="pdf")[0].get_text(flags=0)
    assert layer.count("\ufffd") == 2  # what the text layer gives
    package = read(data)
    page = package.pages[0]
    assert page.ocr
    assert "\ufffd" not in page.text and all("\ufffd" not in b.text for b in page.blocks)
    assert "Tuesday by the northern office" in page.text, page.text
    assert cer(TEXT, page.text, "en") <= 0.02, page.text
    warning = next(w for w in package.warnings if "read by OCR" in w)
    assert "2 of" in warning and "letters without a Unicode mapping" in warning


def test_a_lone_symbol_without_unicode_keeps_the_text_layer() -> None:
    # A symbol font's glyph (a span of its own, as displayed maths' large braces and arrows):
    # OCR would read it no better, so the page keeps its text, without the U+FFFD.
    html = "Invoice 4711: total <span style='font-family:monospace'>\u2192</span> paid."
    data = unmapped_glyphs_pdf(html, "\u2192")
    assert "\ufffd" in pymupdf.open(stream=data, filetype="pdf")[0].get_text(flags=0)
    package = read(data)
    page = package.pages[0]
    assert not page.ocr and page.text == "Invoice 4711: total  paid."
    assert all("\ufffd" not in b.text for b in page.blocks)
    assert not package.warnings


def test_without_ocr_the_unmapped_glyphs_are_dropped_with_a_warning() -> None:
    package = read(unmapped_glyphs_pdf(TEXT, "y"), ocr=False)
    page = package.pages[0]
    assert not page.ocr and "Tuesda b the northern office" in page.text
    assert "\ufffd" not in page.text and all("\ufffd" not in b.text for b in page.blocks)
    assert any("needs OCR, which is disabled" in w for w in package.warnings)


def fax_pdf(lines: tuple[str, ...], xdpi: int, ydpi: int, size: int = 10) -> bytes:
    """A one-page PDF of a fax as a fax machine's software writes it: the page scanned at
    `xdpi` x `ydpi` to 1 bit, stored as a CCITT group 4 image, shown at its physical size."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_W, height=PAGE_H)
    html = "".join(f"<p style='margin:0 0 8pt 0; font-size:{size}pt'>{t}</p>" for t in lines)
    page.insert_htmlbox(pymupdf.Rect(60, 70, PAGE_W - 60, PAGE_H - 70), html)
    pix = page.get_pixmap(matrix=pymupdf.Matrix(xdpi / 72, ydpi / 72), colorspace=pymupdf.csGRAY)
    grey = Image.frombytes("L", (pix.width, pix.height), pix.samples)
    bits = grey.point(lambda v: 255 if v > 160 else 0).convert("1")
    tiff = io.BytesIO()  # one strip: its bytes are the image's CCITT data as a PDF holds it
    bits.save(tiff, format="TIFF", compression="group4", tiffinfo={278: bits.height})
    stored = Image.open(tiff)
    (offset,), (length,) = stored.tag_v2[273], stored.tag_v2[279]
    g4 = tiff.getvalue()[offset : offset + length]

    fax = pymupdf.open()
    width, height = bits.size
    shown = fax.new_page(width=width / xdpi * 72, height=height / ydpi * 72)
    blank = io.BytesIO()
    Image.new("1", (width, height), 1).save(blank, format="PNG")
    xref = shown.insert_image(shown.rect, stream=blank.getvalue(), keep_proportion=False)
    fax.update_stream(xref, g4, compress=False)
    fax.xref_set_key(xref, "Filter", "/CCITTFaxDecode")
    fax.xref_set_key(xref, "DecodeParms", f"<</K -1/Columns {width}/Rows {height}/BlackIs1 true>>")
    fax.xref_set_key(xref, "BitsPerComponent", "1")
    fax.xref_set_key(xref, "ColorSpace", "/DeviceGray")
    data: bytes = fax.tobytes()
    return data


@pytest.mark.parametrize("ydpi", [98, 196])
def test_a_fax_in_a_pdf_reads_its_words(ydpi: int) -> None:
    lines = TEXTS["en"]
    data = fax_pdf(lines, 204, ydpi)
    image = pymupdf.open(stream=data, filetype="pdf")[0].get_images(full=True)[0]
    assert image[2:5] == (1686, {98: 1147, 196: 2293}[ydpi], 1)  # 1-bit, non-square pixels
    page = read(data).pages[0]
    assert page.ocr
    assert cer("\n".join(lines), page.text, "en") <= 0.01, page.text
    assert "asked the finance team to review invoice 4711." in page.text
