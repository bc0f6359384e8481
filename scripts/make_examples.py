"""Writes the example documents `make run` parses (committed in examples/; rerun to refresh)."""

from __future__ import annotations

from pathlib import Path

import pymupdf

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


if __name__ == "__main__":
    write("report-12-pages.pdf", 12, "Quarterly report")
    write("paper-30-pages.pdf", 30, "Replicated state")
    write("memo-1-page.pdf", 1, "Memo")
