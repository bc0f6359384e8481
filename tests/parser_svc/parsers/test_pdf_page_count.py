"""The page count read at submit without mupdf (parser_svc/parsers/pdf_page_count.py): what
mupdf reads for every way a writer lays out a PDF, None (never a wrong count, never a hang)
for what it does not follow, and the same or None for every real PDF of the corpus."""

from __future__ import annotations

import functools
import re
import resource
import time
import zlib
from pathlib import Path

import pymupdf
import pytest

from parser_svc.parsers.pdf_objects import MAX_INFLATED
from parser_svc.parsers.pdf_page_count import page_count
from tests.helpers import CORPUS

AES = {"encryption": pymupdf.PDF_ENCRYPT_AES_256, "user_pw": "u", "owner_pw": "o"}


def _document(pages: int) -> pymupdf.Document:
    doc = pymupdf.open()  # type: ignore[no-untyped-call]
    for number in range(pages):
        doc.new_page().insert_text((72, 72), f"page {number + 1}")  # type: ignore[no-untyped-call]
    return doc


def _mupdf_count(data: bytes) -> int:
    return int(pymupdf.open(stream=data).page_count)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(
    "layout",
    [
        {},  # a cross-reference table
        {"use_objstms": True},  # a cross-reference stream, objects in object streams
        {"use_objstms": True, "compression_effort": 100},
        {"garbage": 4, "deflate": True},
        AES,  # encrypted: the structure is not
    ],
    ids=["table", "object-streams", "object-streams-compressed", "garbage-collected", "aes"],
)
@pytest.mark.parametrize("pages", [1, 7, 300])
def test_each_layout_gives_mupdfs_count(layout: dict[str, object], pages: int) -> None:
    data = _document(pages).tobytes(**layout)  # type: ignore[no-untyped-call]
    assert page_count(data) == _mupdf_count(data) == pages


def test_an_incremental_update_that_adds_pages_is_counted_from_the_newest_trailer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "grown.pdf"
    _document(3).save(path)  # type: ignore[no-untyped-call]
    doc = pymupdf.open(path)  # type: ignore[no-untyped-call]
    for _ in range(4):
        doc.new_page()  # type: ignore[no-untyped-call]
    doc.save(path, incremental=True, encryption=pymupdf.PDF_ENCRYPT_KEEP)  # type: ignore[no-untyped-call]
    doc.close()  # type: ignore[no-untyped-call]
    data = path.read_bytes()
    assert data.count(b"startxref") == 2  # two sections: the reader follows /Prev
    assert page_count(data) == _mupdf_count(data) == 7


def _predicted(data: bytes, filters: list[int]) -> bytes:
    """`data` (pymupdf's object-stream layout: the xref stream is the last object) with that
    stream's rows PNG-predicted, row i with filters[i % len(filters)] (0 none, 1 Sub, 2 Up),
    and Flate: the stream stays where startxref points."""
    at = int(re.findall(rb"startxref\s+(\d+)", data)[-1])
    head_end = data.index(b"stream\n", at)
    head = data[at:head_end].decode("latin-1")
    widths = [int(w) for w in re.search(r"/W\[(\d+) (\d+) (\d+)\]", head).groups()]  # type: ignore[union-attr]
    length = int(re.search(r"/Length (\d+)", head).group(1))  # type: ignore[union-attr]
    rows = data[head_end + 7 : head_end + 7 + length]
    width, out, previous = sum(widths), bytearray(), bytes(sum(widths))
    for index in range(len(rows) // width):
        row, kind = rows[index * width : (index + 1) * width], filters[index % len(filters)]
        left = bytes(1) + row[:-1]
        base = {0: bytes(width), 1: left, 2: previous}[kind]
        out += bytes([kind]) + bytes((a - b) & 0xFF for a, b in zip(row, base, strict=True))
        previous = row
    packed = zlib.compress(bytes(out))
    params = f"/Filter/FlateDecode/DecodeParms<</Predictor 12/Columns {width}>>"
    new_head = re.sub(r"/Length \d+", f"/Length {len(packed)}{params}", head)
    tail = f"\nendstream\nendobj\n\nstartxref\n{at}\n%%EOF\n".encode()
    return data[:at] + new_head.encode("latin-1") + b"stream\n" + packed + tail


@pytest.mark.parametrize("filters", [[2], [0, 2, 2], [2, 1, 0]], ids=["up", "none-up", "sub"])
def test_a_png_predicted_cross_reference_stream_is_read(filters: list[int]) -> None:
    data = _predicted(_document(40).tobytes(use_objstms=True), filters)  # type: ignore[no-untyped-call]
    assert page_count(data) == _mupdf_count(data) == 40


def _catalog_key(pages: int, key: str, value: str) -> bytes:
    """A PDF of `pages` pages whose catalog has `key` (before /Pages, as it is written)."""
    doc = _document(pages)
    catalog = doc.pdf_catalog()  # type: ignore[no-untyped-call]
    doc.xref_set_key(catalog, key, value)  # type: ignore[no-untyped-call]
    return bytes(doc.tobytes())  # type: ignore[no-untyped-call]


@functools.cache
def _hostile() -> dict[str, bytes]:
    good = _document(3).tobytes()  # type: ignore[no-untyped-call]
    at = int(re.findall(rb"startxref\s+(\d+)", good)[-1])
    loop = good.replace(b"trailer\n<<", b"trailer\n<</Prev %d" % at)
    deep = b"%PDF-1.7\n1 0 obj\n" + b"[" * 100_000 + b"\nendobj\nstartxref\n9\n%%EOF\n"
    bomb = zlib.compress(bytes(MAX_INFLATED * 4))
    inflating = (
        b"%PDF-1.7\n1 0 obj\n<</Type/XRef/Size 2/W[1 4 1]/Root 1 0 R/Filter/FlateDecode/Length "
        + str(len(bomb)).encode()
        + b">>\nstream\n"
        + bomb
        + b"\nendstream\nendobj\nstartxref\n9\n%%EOF\n"
    )
    count = re.sub(rb"/Count \d+", b"/Count 99999999999", good)
    # A catalog read before its /Pages: a string of 8 MB (unterminated: written by hand, the
    # offsets after it moved along), an array of a million numbers (written by mupdf).
    string = _catalog_key(3, "Lang", "(short)").replace(b"(short)", b"(" + b"x" * (8 << 20))
    string = re.sub(rb"startxref\s+\d+", b"startxref\n%d" % string.rindex(b"xref\n0 "), string)
    array = _catalog_key(3, "AA", "[" + "1 " * 1_000_000 + "]")
    return {
        "truncated": good[: len(good) // 2],
        "no-startxref": good.replace(b"startxref", b"startxrex"),
        "startxref-past-the-end": re.sub(rb"startxref\s+\d+", b"startxref\n99999999", good),
        "prev-loop": loop,
        "deep-nesting": deep,
        "inflation-bomb": inflating,
        "absurd-count": count,
        "endless-string": string,
        "million-item-array": array,
        "empty": b"",
    }


@pytest.mark.parametrize("name", list(_hostile()))
def test_what_it_does_not_follow_answers_none_quickly_and_in_bounded_memory(name: str) -> None:
    data = _hostile()[name]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.process_time()
    # A /Prev chain back to itself is followed once: the sections read give the count.
    assert page_count(data) == (3 if name == "prev-loop" else None)
    assert time.process_time() - started < 1.0  # a stall bound, not a benchmark
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024


CORPUS_PDFS = sorted(CORPUS.glob("*_pdf/*.pdf"))


@pytest.mark.skipif(not CORPUS_PDFS, reason=f"the shared corpus is absent ({CORPUS})")
def test_every_corpus_pdf_gives_mupdfs_count_or_none() -> None:
    files = CORPUS_PDFS
    known = 0
    for path in files:
        data = path.read_bytes()
        count = page_count(data)
        if count is None:
            continue
        known += 1
        assert count == _mupdf_count(data), path.name  # mupdf opens what it can count
    # Every undamaged text PDF of the corpus is counted (the damaged ones need mupdf's repair).
    texts = [path for path in files if path.parent.name == "text_pdf"]
    assert texts and all(page_count(path.read_bytes()) for path in texts)
    assert known >= len(texts)
