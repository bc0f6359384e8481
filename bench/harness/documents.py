"""Input documents: the shared corpus (../shared/corpus) when present, else generated ones.
Every PDF is made by the tests' makers (tests.helpers.make_pdf, tests.fixtures) except the
book, which only the benchmarks read."""

from __future__ import annotations

import random
from pathlib import Path

import pymupdf

from bench.harness.output import ROOT
from tests import fixtures
from tests.helpers import make_pdf

CORPUS = ROOT.parent / "shared" / "corpus"


def text_pdfs(work: Path) -> list[Path]:
    found = sorted((CORPUS / "text_pdf").glob("*.pdf"))
    if found:
        return found
    paths = []
    for i in range(6):
        path = work / f"generated-{i}.pdf"
        path.write_bytes(make_pdf(40, f"generated {i}"))
        paths.append(path)
    return paths


def scanned_pdfs(work: Path) -> list[Path]:
    found = sorted((CORPUS / "scanned_pdf").glob("*.pdf"))
    if found:
        return found
    path = work / "scan.pdf"
    path.write_bytes(fixtures.image_only_pdf())
    return [path]


def big_xlsx(work: Path) -> Path:
    """The 1,000,000-cell workbook."""
    big = CORPUS / "xlsx" / "styles_1M.xlsx"
    return big if big.is_file() else fixtures.big_xlsx(work / "big.xlsx")


def one_page_pdfs(work: Path, count: int, tag: str) -> list[Path]:
    """`count` one-page PDFs, each unlike the others and unlike the fork server's warm-up page
    (parser_svc/parsers/pdf.py warm_up: one base-14 paragraph and a 2x3 ruled table):
    `one_page_pdf(seed)` with a seed from `tag` and the index."""
    folder = work / f"one-page-{tag}"
    folder.mkdir(exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"memo-{tag}-{i}.pdf"
        path.write_bytes(one_page_pdf(f"{tag}-{i}", i))
        paths.append(path)
    return paths


# Base-14 fonts by their pymupdf names, and TrueType fonts a Debian machine has (embedded as a
# subset, as most real PDFs carry their fonts; skipped where absent).
_BASE14 = ("helv", "tiro", "cour", "hebo", "tiit", "cobo", "heit", "tibo")
_TRUETYPE = tuple(
    path
    for path in (
        Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
        Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"),
        Path("/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"),
    )
    if path.is_file()
)
_SIZES = ((595, 842), (612, 792), (420, 595), (612, 1008))  # A4, Letter, A5, Legal


def one_page_pdf(seed: str, index: int) -> bytes:
    """One page: a title and 1-9 paragraphs of 20-140 words in one of 8 base-14 fonts (every
    third page an embedded TrueType font when the machine has one), at 8-12 pt on one of four
    page sizes; a ruled table of 3-6 rows and 2-5 columns on every third page, a picture (a
    generated gradient, 80-240 pt wide) on every fourth."""
    rng = random.Random(seed)

    def words(n: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(n))

    doc = pymupdf.open()  # type: ignore[no-untyped-call]
    width, height = _SIZES[rng.randrange(len(_SIZES))]
    page = doc.new_page(width=width, height=height)
    font, fontfile = rng.choice(_BASE14), None
    if _TRUETYPE and index % 3 == 1:
        font, fontfile = "F0", str(_TRUETYPE[index % len(_TRUETYPE)])
        page.insert_font(fontname=font, fontfile=fontfile)  # type: ignore[no-untyped-call]
    size = rng.choice((8.0, 9.0, 10.0, 11.0, 12.0))
    title = f"{words(rng.randint(2, 7)).title()} ({seed})"
    page.insert_text((50, 60), title, fontsize=size + 6, fontname=font, fontfile=fontfile)
    y = 85.0
    if index % 3 == 0:
        y = _ruled_table(page, rng, y, width)
    if index % 4 == 1:
        y = _picture(page, rng, y)
    for _ in range(rng.randint(1, 9)):
        if y > height - 80:
            break
        text = words(rng.randint(20, 140)).capitalize() + "."
        box = pymupdf.Rect(50, y, width - 50, height - 40)  # type: ignore[no-untyped-call]
        left = page.insert_textbox(box, text, fontsize=size, fontname=font, fontfile=fontfile)
        if left < 0:  # it did not fit: the page is full
            break
        y = box.y1 - left + size
    if fontfile:
        doc.subset_fonts()
    data: bytes = doc.tobytes(garbage=3, deflate=True)  # type: ignore[no-untyped-call]
    return data


def _ruled_table(page: pymupdf.Page, rng: random.Random, top: float, width: float) -> float:
    """A grid of ruled cells, each a word or a number; returns the y below it."""
    rows, cols = rng.randint(3, 6), rng.randint(2, 5)
    cell_w, cell_h = (width - 100) / cols, 18.0
    for r in range(rows + 1):
        page.draw_line((50, top + r * cell_h), (50 + cols * cell_w, top + r * cell_h))
    for c in range(cols + 1):
        page.draw_line((50 + c * cell_w, top), (50 + c * cell_w, top + rows * cell_h))
    for r in range(rows):
        for c in range(cols):
            text = rng.choice(_WORDS) if r == 0 or c == 0 else f"{rng.uniform(0, 999):.1f}"
            page.insert_text((54 + c * cell_w, top + r * cell_h + 13), text, fontsize=9)
    return top + rows * cell_h + 16


def _picture(page: pymupdf.Page, rng: random.Random, top: float) -> float:
    """A generated RGB gradient picture; returns the y below it."""
    w, h = rng.randint(40, 120), rng.randint(30, 90)
    shift = rng.randrange(256)
    samples = bytes(
        value
        for y in range(h)
        for x in range(w)
        for value in ((x * 255 // w) ^ shift, (y * 255 // h), (x + y + shift) % 256)
    )
    pix = pymupdf.Pixmap(pymupdf.csRGB, w, h, samples, False)  # type: ignore[no-untyped-call]
    rect = pymupdf.Rect(50, top, 50 + 2 * w, top + 2 * h)  # type: ignore[no-untyped-call]
    png = pix.tobytes("png")  # type: ignore[no-untyped-call]
    page.insert_image(rect, stream=png)  # type: ignore[no-untyped-call]
    return rect.y1 + 12


_TEXT = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there one all we their has been if more when will would "
    "who so no out up into do time can only other new some could these two may first then any "
    "like now my such make over our even most me state after also made many before must through "
    "back years where much your way well down should because each just those people how too "
    "little us good very world long here between both life being under never day same another "
    "know while last might great old year off come since against go came right used take three"
)
_WORDS = _TEXT.split()


def book_pdf(pages: int, seed: int = 7) -> bytes:
    """A book-like PDF: running text in justified paragraphs, chapter and section headings,
    running heads with page numbers, and footnotes under a short rule on 40% of the pages."""
    rng = random.Random(seed)

    def words(n: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(n))

    doc = pymupdf.open()  # type: ignore[no-untyped-call]
    chapter = 0
    for number in range(1, pages + 1):
        page = doc.new_page(width=420, height=630)
        page.insert_text((40, 30), "A Generated Book", fontsize=8, fontname="helv")
        page.insert_text((370, 30), str(number), fontsize=8, fontname="helv")
        y = 50.0
        if number % 12 == 1:
            chapter += 1
            title = f"Chapter {chapter}. {words(3).title()}"
            page.insert_text((40, y + 20), title, fontsize=16, fontname="hebo")
            y += 40
        notes = rng.random() < 0.4
        bottom = 520 if notes else 590
        while y < bottom - 40:
            if rng.random() < 0.15:
                heading = f"{chapter}.{rng.randint(1, 9)} {words(4).title()}"
                page.insert_text((40, y + 12), heading, fontsize=11, fontname="hebo")
                y += 22
            paragraph = words(rng.randint(60, 110)).capitalize() + "."
            box = pymupdf.Rect(40, y, 380, min(y + 110, bottom))  # type: ignore[no-untyped-call]
            page.insert_textbox(box, paragraph, fontsize=9.5, fontname="tiro", align=3)
            y += 115
        if notes:
            page.draw_line((40, 530), (160, 530), width=0.5)
            footnotes = f"1 {words(30)}.\n2 {words(20)}."
            notes_box = pymupdf.Rect(40, 535, 380, 600)  # type: ignore[no-untyped-call]
            page.insert_textbox(notes_box, footnotes, fontsize=7)
    data: bytes = doc.tobytes(garbage=3, deflate=True)  # type: ignore[no-untyped-call]
    return data
