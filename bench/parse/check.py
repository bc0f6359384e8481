"""The parse benchmark checks what it timed: every package a stack made is downloaded through
the gateway (the SDK's `Client.result`) and held against raw pymupdf on the same file. The
page count must be equal, and each page's characters within a tolerance of raw get_text's;
a mismatch fails the run, naming the file and the page.

Characters are counted after NFKC (ligatures such as "ﬀ" are two letters on both sides),
without whitespace (line breaks, joined lines, blank lines between blocks) and without Unicode
control, format and private-use characters (the package drops control characters such as the
\\x12/\\x13 that TeX fonts without a Unicode map give get_text).

The tolerance, measured on the shared corpus (text_pdf/, 8 files, 229 pages) and the generated
inputs (the book, the one-page memos, the tests' PDFs): every page equal but on one file,
GeoTopo-komprimiert.pdf, where the package leaves out the glyphs of TeX's maths extension font
(CMEX10: brace pieces, big sums and integrals that get_text reports as ASCII letters such as
"z{|}", "X", "Z"): at most 4.6% of a page fewer (29 of 628). So a page read from its text layer
may differ by 6% of raw's characters, or 10 characters on a short page. A page the package
read by OCR (its text layer unusable) is compared with the text layer loosely, 40%: OCR reads
mathematics differently (29% fewer on that file's page 92 in one measured run); a page whose
layer has no text at all (a scan) cannot be compared by characters and is only counted."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from docparse.client import Client
from docparse.v1 import reading_package_pb2 as rp

TEXT_TOLERANCE = 0.06
TEXT_SLACK = 10
OCR_TOLERANCE = 0.40


def page_chars(text: str) -> int:
    """Characters of a page's text as compared: NFKC, no whitespace, no control characters."""
    return sum(
        1
        for ch in unicodedata.normalize("NFKC", text)
        if not ch.isspace() and unicodedata.category(ch)[0] != "C"
    )


@functools.lru_cache(maxsize=512)
def raw_page_chars(path: Path) -> tuple[int, ...]:
    """Raw pymupdf get_text of each page of the file, counted by `page_chars`."""
    with pymupdf.open(path) as doc:  # type: ignore[no-untyped-call]
        return tuple(page_chars(page.get_text()) for page in doc)


@dataclass
class Tally:
    """What the checks saw: packages, pages, pages read by OCR, pages not comparable by
    characters (no text layer), the largest difference on a text-layer page (a share of
    raw's characters) and every mismatch found."""

    packages: int = 0
    pages: int = 0
    ocr_pages: int = 0
    uncomparable_pages: int = 0
    worst_text_page: float = 0.0
    worst_where: str = ""
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "packages": self.packages,
            "pages": self.pages,
            "ocr_pages": self.ocr_pages,
            "uncomparable_pages": self.uncomparable_pages,
            "worst_text_page_diff": round(self.worst_text_page, 4),
            "worst_text_page": self.worst_where,
            "mismatches": len(self.problems),
        }


def check_package(
    name: str, raw: tuple[int, ...], package: rp.ReadingPackage, tally: Tally
) -> None:
    """Adds the package of file `name` to `tally`, with a line per mismatch against `raw`."""
    tally.packages += 1
    if len(package.pages) != len(raw):
        tally.problems.append(f"{name}: {len(package.pages)} pages in the package, raw {len(raw)}")
        return
    for page, raw_chars in zip(package.pages, raw, strict=True):
        tally.pages += 1
        chars = page_chars(page.text)
        tally.ocr_pages += page.ocr
        if raw_chars == 0 and page.ocr:
            tally.uncomparable_pages += 1
            continue
        allowed = raw_chars * (OCR_TOLERANCE if page.ocr else TEXT_TOLERANCE)
        if not page.ocr:
            allowed = max(allowed, TEXT_SLACK)
            share = abs(chars - raw_chars) / max(raw_chars, 1)
            if share > tally.worst_text_page:
                tally.worst_text_page, tally.worst_where = share, f"{name} page {page.number}"
        if abs(chars - raw_chars) > allowed:
            how = "by OCR" if page.ocr else "from its text layer"
            tally.problems.append(
                f"{name} page {page.number} (read {how}): {chars} characters in the package, "
                f"raw get_text {raw_chars} (allowed ±{allowed:.0f})"
            )


def check_jobs(
    address: str, api_key: str, made: Iterable[tuple[Path, str]], tally: Tally | None = None
) -> Tally:
    """Downloads the package of every (file, job id) through the gateway at `address` and
    checks it (`check_package`), adding to `tally` (a new one unless given)."""
    tally = tally if tally is not None else Tally()
    with Client(address, api_key=api_key, timeout_s=120) as client:
        for path, job_id in made:
            package = client.result(job_id)
            check_package(path.name, raw_page_chars(path), package, tally)
    return tally


class PackageMismatch(SystemExit):
    """Ends the benchmark with exit status 1 and the mismatches on stderr."""

    def __init__(self, where: str, problems: list[str]) -> None:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(
            f"bench_parse: packages {where} do not match raw pymupdf "
            f"({len(problems)} mismatches):\n  {shown}{more}"
        )
