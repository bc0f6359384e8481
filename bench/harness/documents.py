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
    folder = work / f"one-page-{tag}"
    folder.mkdir(exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"memo-{tag}-{i}.pdf"
        path.write_bytes(make_pdf(1, f"memo {tag} {i}"))
        paths.append(path)
    return paths


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
