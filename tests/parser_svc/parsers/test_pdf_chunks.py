"""The parse child's way through a split PDF (parser_svc/parsers/pdf_chunks.py) under a
message order that real siblings produce only now and then: a sibling's last part, and the
progress of its last pages, arrive between two polls of the child. The real processes' side is
test_pdf_split.py (every corpus PDF split as read whole, progress included), where this order
once left a job's last progress one page short."""

from __future__ import annotations

import os

import pymupdf

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseOptions, pdf_split
from parser_svc.parsers.pdf_chunks import read_split
from parser_svc.parsers.pdf_pages import Reading
from parser_svc.parsers.pdf_split import Claims, Part, ReadRange


class LateSibling:
    """A sibling read in this process, whose messages come in as a real one's can: it claims
    and reads its chunk at once; a first wait for it takes its progress up to the page before
    its last, and the progress of its last page comes with its part, at the second poll after
    that wait (the first being the one the child makes to report)."""

    def __init__(self, claims: Claims, chunks: list[range], read_range: ReadRange) -> None:
        number = claims.next()
        assert number is not None
        self.number, self.pages = number, len(chunks[number])
        self.part: Part = read_range(chunks[number], lambda _d, _t, _s: None)
        self.done, self.ended, self.polls_after_wait = 0, False, -1
        self._answered = False
        self._wake, write = os.pipe()  # always readable: the child's select returns at once
        os.write(write, b"x")
        os.close(write)

    def fileno(self) -> int:
        return self._wake

    def poll(self) -> None:
        if self.polls_after_wait >= 0:
            self.polls_after_wait += 1
            if self.polls_after_wait == 2:
                self.done, self._answered = self.pages, True

    def read_some(self) -> None:
        if self.polls_after_wait < 0:
            self.done, self.polls_after_wait = self.pages - 1, 0

    def answered(self, chunk: int) -> bool:
        return self._answered and chunk == self.number

    def take(self, chunk: int) -> Part | None:
        self._answered = False
        return self.part

    def finish(self) -> None:
        self.ended = True

    def kill(self) -> None:
        if self._wake >= 0:
            os.close(self._wake)
            self._wake = -1


def _document(pages: int) -> pymupdf.Document:
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        doc.new_page().insert_text((72, 72), f"Page {number} of the document")
    return pymupdf.open(stream=doc.tobytes(), filetype="pdf")


def test_progress_ends_at_every_page_when_the_last_part_comes_after_the_last_report() -> None:
    """16 pages in two chunks: the child reads pages 1-8, the sibling 9-16, whose part and
    last page's progress are taken by the poll that finds the part, after the child's last
    report from its wait. The parse still says 16 of 16 done, and never goes back."""
    doc = _document(16)
    package = rp.ReadingPackage(content_type="pdf")
    reading = Reading.of(doc, package, ParseOptions.defaults())
    seen: list[tuple[int, int]] = []
    siblings: list[LateSibling] = []

    def fork(claims: Claims, chunks: list[range], read_range: ReadRange) -> LateSibling:
        siblings.append(LateSibling(claims, chunks, read_range))
        return siblings[-1]

    read_split(reading, [range(0, 8), range(8, 16)], 2, lambda d, t, _s: seen.append((d, t)), fork)

    assert [page.number for page in package.pages] == list(range(1, 17))
    assert siblings[0].polls_after_wait >= 2, "the sibling's part came in as scripted"
    assert seen == sorted(seen), "progress went back"
    assert seen[-1] == (16, 16)
    assert pdf_split.last_processes == 2  # the sibling's part was added, not read again
