"""Writes the example documents `make run` parses and the documentation's commands use
(committed in examples/; rerun to refresh): three PDFs, a Word document, scanned pages that only
OCR reads (English, German, Russian; the generated ground truth of tests/fixtures/scans.py), a
workbook and a slide deck."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import docx
import openpyxl
import pptx
import pymupdf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.fixtures.scans import scan, scans_pdf

OUT = Path(__file__).resolve().parent.parent / "examples"
LOREM = (
    "Job state lives in Redis, never in process memory, so any replica can answer any call. "
    "Every write bumps a version; watchers resume from the last version they saw."
)


def write(name: str, pages: int, title: str) -> None:
    doc = pymupdf.open()
    doc.set_metadata({"title": title, "author": "docparse examples"})
    for number in range(1, pages + 1):
        page = doc.new_page()
        page.insert_text((72, 72), f"{title}: page {number} of {pages}", fontsize=16)
        page.insert_textbox(pymupdf.Rect(72, 110, 520, 400), LOREM, fontsize=11)
        page.insert_textbox(pymupdf.Rect(72, 420, 290, 760), f"Left column, page {number}.")
        page.insert_textbox(pymupdf.Rect(310, 420, 520, 760), f"Right column, page {number}.")
    OUT.mkdir(exist_ok=True)
    doc.save(OUT / name, garbage=4, deflate=True)


def write_docx(name: str, title: str) -> None:
    """A short Word document with a heading, paragraphs and a table."""
    document = docx.Document()
    fixed = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    document.core_properties.created = document.core_properties.modified = fixed
    document.core_properties.title, document.core_properties.author = title, "docparse examples"
    document.add_heading(title, level=1)
    document.add_paragraph(LOREM)
    document.add_paragraph("Any replica answers any call; a finished job never answers not found.")
    table = document.add_table(rows=3, cols=2)
    for row, (key, value) in zip(table.rows, [("replicas", "2"), ("gateways", "1"),
                                              ("state store", "Redis")], strict=True):  # fmt: skip
        row.cells[0].text, row.cells[1].text = key, value
    OUT.mkdir(exist_ok=True)
    document.save(str(OUT / name))


def write_scans() -> None:
    """Image-only pages (no text layer): an English scan, a two-page German and Russian one."""
    OUT.mkdir(exist_ok=True)
    (OUT / "scanned-report-en.pdf").write_bytes(scan("en", 200, seed=11).pdf)
    both = scans_pdf([scan("de", 200, seed=12), scan("ru", 200, seed=13)])
    (OUT / "scanned-de-ru.pdf").write_bytes(both)


def write_xlsx(name: str) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Budget"
    sheet.append(["Item", "Q1", "Q2"])
    for item, q1, q2 in [("Servers", 1200, 1350), ("Licences", 400, 400), ("Travel", 250, 90)]:
        sheet.append([item, q1, q2])
    sheet.append(["Total", "=SUM(B2:B4)", "=SUM(C2:C4)"])
    book.properties.created = book.properties.modified = dt.datetime(2025, 1, 1)
    book.save(OUT / name)


def write_pptx(name: str) -> None:
    deck = pptx.Presentation()
    deck.core_properties.created = deck.core_properties.modified = dt.datetime(2025, 1, 1)
    for title, body in [
        ("docparse", "Documents in, reading packages out"),
        ("Formats", "PDF, scans in many languages, Word, Excel, PowerPoint"),
    ]:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(str(OUT / name))


if __name__ == "__main__":
    write("report-12-pages.pdf", 12, "Quarterly report")
    write("paper-30-pages.pdf", 30, "Replicated state")
    write("memo-1-page.pdf", 1, "Memo")
    write_docx("letter.docx", "Letter")
    write_scans()
    write_xlsx("budget.xlsx")
    write_pptx("slides.pptx")
