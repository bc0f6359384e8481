"""Image documents (parser_svc/parsers/image.py): the words on the image come out of OCR for
every format, a fax's pages are pages of the right paper size, a sideways phone photo reads
upright, and hostile headers (100 megapixels of zeros, 10,000 TIFF pages) are refused or read
within a bounded memory, measured in a subprocess under the parse child's limits."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from docparse.reasons import ErrorReason
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.detect import sniff
from parser_svc.parsers.formats import parser_for
from parser_svc.parsers.image import parse_image
from parser_svc.parsers.image_frames import MAX_FRAME_PIXELS
from tests.fixtures.image_docs import (
    EXIF_ORIENTATION,
    fax_tiff,
    phone_photo,
    save,
    text_pixels,
    tiny_tiff,
    zeros_png,
)

REPO = Path(__file__).resolve().parents[3]
WORDS = ("Invoice number 4711", "Total due: 342 euros")


def parse(data: bytes, **overrides: Any) -> tuple[rp.ReadingPackage, list[tuple[int, int, str]]]:
    events: list[tuple[int, int, str]] = []
    options = ParseOptions.defaults(deployment="test", job_id="j", **overrides)
    package = parse_image(data, lambda *event: events.append(event), options)
    return package, events


def refused(data: bytes, **overrides: Any) -> ParseFailure:
    with pytest.raises(ParseFailure) as caught:
        parse(data, **overrides)
    return caught.value


def one_line(text: str) -> str:
    return " ".join(text.split())


def encoded(fmt: str) -> bytes:
    image = text_pixels(WORDS, dpi=200)
    table: dict[str, dict[str, Any]] = {
        "png": {"format": "PNG", "dpi": (200, 200)},
        "jpeg": {"format": "JPEG", "dpi": (200, 200), "quality": 85},
        "tiff-lzw": {"format": "TIFF", "dpi": (200, 200), "compression": "tiff_lzw"},
        "tiff-jpeg": {"format": "TIFF", "dpi": (200, 200), "compression": "jpeg"},
        "tiff-g3": {"format": "TIFF", "dpi": (200, 200), "compression": "group3"},
        "gif": {"format": "GIF"},
        "bmp": {"format": "BMP", "dpi": (200, 200)},
        "webp": {"format": "WEBP", "quality": 90},
    }
    if fmt == "tiff-g3":  # CCITT fax compression is for 1-bit images
        image = image.convert("L").point(lambda v: 255 if v > 150 else 0).convert("1")
    params = dict(table[fmt])
    return save(image, params.pop("format"), **params)


@pytest.mark.parametrize(
    ("fmt", "kind", "dpi"),
    [
        ("png", "png", 200),
        ("jpeg", "jpeg", 200),
        ("tiff-lzw", "tiff", 200),
        ("tiff-jpeg", "tiff", 200),
        ("tiff-g3", "tiff", 200),
        ("gif", "gif", 72),  # GIF and WebP carry no resolution: 72 dpi
        ("bmp", "bmp", 200),
        ("webp", "webp", 72),
    ],
)
def test_every_format_reads_its_words(fmt: str, kind: str, dpi: int) -> None:
    data = encoded(fmt)
    package, events = parse(data)
    assert package.content_type == kind
    assert parser_for(kind) is parse_image
    [page] = package.pages
    assert page.ocr and page.number == 1
    assert one_line(page.text) == " ".join(WORDS), page.text
    assert {block.source for block in page.blocks} == {"ocr"}
    # The page in points from the image's DPI: 360 x 140 points rendered at 200 dpi.
    width_px = round(360 * 200 / 72)
    assert page.width == pytest.approx(width_px * 72 / dpi, abs=0.5)
    # Line boxes in points on that page: the first line starts 20 points (of the drawing) in.
    scale = page.width / 360
    assert page.blocks[0].bbox.x0 == pytest.approx(20 * scale, abs=3 * scale)
    assert events[0][:2] == (0, 1) and events[-1][:2] == (1, 1)
    assert "Invoice number 4711" in to_markdown(package)
    assert "\ufffd" not in page.text and not package.warnings


def test_fax_pages_are_a4_pages_read_at_their_own_resolution(tmp_path: Path) -> None:
    """A two-page CCITT G4 fax at 204 x 98 dpi (standard resolution: pixels twice as tall as
    wide): each page is an A4 page and reads; each page is stored as a PNG."""
    letter = [
        ["Dear Ms Lee,", "the shipment of 40 chairs left Hamburg on Monday."],
        ["The invoice follows by post.", "Kind regards, John Smith"],
    ]
    data = fax_tiff(letter, 204, 98)
    package, events = parse(data, assets_dir=tmp_path)
    assert package.content_type == "tiff"
    assert [p.number for p in package.pages] == [1, 2]
    for page, lines in zip(package.pages, letter, strict=True):
        assert (page.width, page.height) == pytest.approx((595, 842), abs=1.5)
        assert page.ocr and one_line(page.text) == " ".join(lines), page.text
        [image] = page.images
        assert image.mime_type == "image/png" and image.asset_id.endswith(".png")
        stored = Image.open(tmp_path / image.asset_id)
        assert stored.size == (image.width, image.height) and stored.mode == "1"
    assert [done for done, _total, _stage in events] == [0, 1, 2]
    assert len(package.assets) == 2 and not package.warnings


def test_a_sideways_phone_photo_reads_upright(tmp_path: Path) -> None:
    lines = ["Meeting notes", "Budget approved", "Call Anna on Friday"]
    data = phone_photo(lines, orientation=6)
    stored = Image.open(io.BytesIO(data))
    assert stored.width > stored.height and stored.getexif()[EXIF_ORIENTATION] == 6
    package, _events = parse(data, assets_dir=tmp_path)
    [page] = package.pages
    assert page.height > page.width  # as the phone's viewer shows it: portrait
    assert (page.width, page.height) == pytest.approx((300, 420), abs=1)
    assert one_line(page.text) == " ".join(lines), page.text
    # The JPEG is kept as it came (viewers honour its orientation), its size as shown.
    [image] = page.images
    assert image.mime_type == "image/jpeg" and (image.width, image.height) == stored.size[::-1]
    assert (tmp_path / image.asset_id).read_bytes() == data
    assert package.metadata.extra["camera_make"] == "Examplephone"
    # Turned the other way (orientation 8) it reads too.
    other, _ = parse(phone_photo(lines, orientation=8))
    assert one_line(other.pages[0].text) == " ".join(lines)


def test_the_examples_read() -> None:
    fax, _ = parse((REPO / "examples" / "fax-letter-2-pages.tif").read_bytes())
    assert [p.number for p in fax.pages] == [1, 2]
    assert "Dear Ms Lee," in fax.pages[0].text and "John Smith" in fax.pages[1].text
    assert "Total GBP 845.00" in one_line(fax.pages[1].text)
    photo, _ = parse((REPO / "examples" / "phone-photo-sideways.jpg").read_bytes())
    assert "Budget approved" in photo.pages[0].text
    assert photo.pages[0].height > photo.pages[0].width


def test_pages_are_read_on_several_threads_in_order() -> None:
    pages = [[f"Page {n} of the scanned contract"] for n in range(1, 6)]
    frames = [text_pixels(lines, 200) for lines in pages]
    data = save(frames[0], "TIFF", dpi=(200, 200), save_all=True, append_images=frames[1:])
    one, one_events = parse(data, ocr_page_threads=1)
    two, two_events = parse(data, ocr_page_threads=2)
    assert [one_line(p.text) for p in two.pages] == [" ".join(lines) for lines in pages]
    assert two.SerializeToString(deterministic=True) == one.SerializeToString(deterministic=True)
    assert [d for d, _t, _s in two_events] == [0, 1, 2, 3, 4, 5] == [d for d, _t, _s in one_events]


def test_ocr_off_lists_the_page_with_a_warning() -> None:
    data = encoded("png")
    for overrides in ({"ocr_mode": "off"}, {"ocr": False}):
        package, events = parse(data, **overrides)
        [page] = package.pages
        assert page.text == "" and not page.blocks and not page.ocr
        assert page.width == pytest.approx(360, abs=0.5)
        assert any("needs OCR" in w for w in package.warnings), package.warnings
        assert events[-1][:2] == (1, 1)


def test_images_none_stores_nothing_and_png_stays_png(tmp_path: Path) -> None:
    data = encoded("png")
    package, _ = parse(data, images="none", assets_dir=tmp_path)
    assert not package.assets and not package.pages[0].images
    package, _ = parse(data, images="referenced", assets_dir=tmp_path)
    [asset] = package.assets
    assert asset.mime_type == "image/png" and asset.sha256 == hashlib.sha256(data).hexdigest()
    assert package.pages[0].images[0].asset_id == asset.asset_id


def test_an_animation_is_one_page_of_its_first_frame() -> None:
    frames = [text_pixels([words], 100).convert("P") for words in ("Summer sale", "Ends Sunday")]
    data = save(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=500, loop=0)
    package, _ = parse(data)
    [page] = package.pages
    assert one_line(page.text) == "Summer sale"
    assert any("animated (2 frames)" in w for w in package.warnings), package.warnings


def test_transparent_and_16_bit_images_read() -> None:
    """Black text on a transparent background, and a 16-bit grey scan."""
    grey = np.asarray(text_pixels(WORDS, 200).convert("L"))
    rgba = np.zeros((*grey.shape, 4), np.uint8)
    rgba[..., 3] = 255 - grey  # black where the text is, transparent elsewhere
    transparent = save(Image.fromarray(rgba, "RGBA"), "PNG", dpi=(200, 200))
    deep = save(Image.fromarray(grey.astype(np.uint16) * 257), "PNG", dpi=(200, 200))
    for data in (transparent, deep):
        package, _ = parse(data)
        assert one_line(package.pages[0].text) == " ".join(WORDS), package.pages[0].text


def test_language_hints_and_metadata() -> None:
    info = PngImagePlugin.PngInfo()
    info.add_text("Title", "Straßenbahn Köln")
    info.add_text("Author", "Jörg Müller")
    image = text_pixels(["Größere Änderungen am Fahrplan"], 200, size=(420, 80))
    data = save(image, "PNG", dpi=(200, 200), pnginfo=info)
    package, _ = parse(data, languages=["de"])
    assert one_line(package.pages[0].text) == "Größere Änderungen am Fahrplan"
    assert (package.metadata.title, package.metadata.author) == ("Straßenbahn Köln", "Jörg Müller")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"plain text, not an image at all", ErrorReason.UNSUPPORTED_FORMAT),
        (encoded("png")[:400], ErrorReason.CORRUPT_DOCUMENT),
        (encoded("jpeg")[:900], ErrorReason.CORRUPT_DOCUMENT),
        (encoded("tiff-lzw")[:300], ErrorReason.CORRUPT_DOCUMENT),
        (b"GIF89a" + b"\x00" * 40, ErrorReason.CORRUPT_DOCUMENT),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, ErrorReason.CORRUPT_DOCUMENT),
    ],
    ids=["not-an-image", "cut-png", "cut-jpeg", "cut-tiff", "junk-gif", "junk-png"],
)
def test_damaged_images(data: bytes, reason: ErrorReason) -> None:
    failure = refused(data)
    assert failure.reason == reason, failure.message


def test_frames_over_the_pixel_limit_are_refused_from_the_header() -> None:
    over = zeros_png(10_001, 10_000, rows=1)  # just over 100 megapixels: Pillow would decode it
    failure = refused(over)
    assert failure.reason == ErrorReason.DOCUMENT_TOO_LARGE
    assert "10001 x 10000 pixels" in failure.message and "100 megapixels" in failure.message
    huge = zeros_png(40_000, 40_000, rows=1)  # Pillow's own decompression-bomb check
    failure = refused(huge)
    assert failure.reason == ErrorReason.DOCUMENT_TOO_LARGE
    assert "1600.0 megapixels" in failure.message, failure.message
    # A TIFF whose third page claims 20000 x 20000: refused before page 1 is decoded.
    tiff = tiny_tiff(3, sizes={2: (20_000, 20_000)})
    failure = refused(tiff)
    assert failure.reason == ErrorReason.DOCUMENT_TOO_LARGE and "page 3" in failure.message
    assert MAX_FRAME_PIXELS == 100_000_000


def test_tiff_page_count_limit_loops_and_thumbnails() -> None:
    failure = refused(tiny_tiff(4), max_pages=3)
    assert failure.reason == ErrorReason.DOCUMENT_TOO_LARGE and "3 pages" in failure.message
    package, _ = parse(tiny_tiff(3), max_pages=3)
    assert [p.number for p in package.pages] == [1, 2, 3]
    looped, _ = parse(tiny_tiff(3, loop_to=0))
    assert len(looped.pages) == 3 and any("loops" in w for w in looped.warnings)
    thumbs, _ = parse(tiny_tiff(3, reduced=[1]))
    assert len(thumbs.pages) == 2 and any("thumbnails" in w for w in thumbs.warnings)


# The real parse child (python -m parser_svc.child.parse_child KIND INPUT OUTPUT CPU_S
# MEMORY_MB, default options on stdin, the default 2048 MB address space) run by a small
# parent that reports the child's events and its peak RSS (RUSAGE_CHILDREN: its only child).
PARENT = """
import json, resource, subprocess, sys
done = subprocess.run(
    [sys.executable, "-m", "parser_svc.child.parse_child", *sys.argv[1:]],
    input=b"{}", capture_output=True, timeout=120,
)
events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"exit": done.returncode, "last": events[-1], "rss_mb": rss_mb}))
"""


def run_child(data: bytes, tmp_path: Path) -> dict[str, Any]:
    """The child's last event (done or failed) with its peak RSS in MB."""
    document, output = tmp_path / "input", tmp_path / "output"
    document.write_bytes(data)
    kind = sniff(data).kind
    assert kind is not None
    args = [kind, str(document), str(output), "120", "2048"]
    done = subprocess.run(
        [sys.executable, "-c", PARENT, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert report["exit"] == 0, report
    result: dict[str, Any] = report["last"] | {"rss_mb": report["rss_mb"]}
    if result["event"] == "done":
        result["package"] = rp.ReadingPackage.FromString(output.read_bytes())
    return result


@pytest.mark.slow  # decodes 100 megapixels
def test_hostile_headers_cost_bounded_memory(tmp_path: Path) -> None:
    baseline = run_child(encoded("png"), tmp_path)
    assert baseline["event"] == "done" and baseline["pages"] == 1
    # 10,000 pages: refused after reading 5,001 directory headers, nothing decoded.
    pages = run_child(tiny_tiff(10_000), tmp_path)
    assert pages["reason"] == ErrorReason.DOCUMENT_TOO_LARGE and "5000 pages" in pages["message"]
    assert pages["rss_mb"] < baseline["rss_mb"] + 50, (pages, baseline)
    # A PNG header claiming 400 megapixels over a few KB: refused before decoding.
    bomb = run_child(zeros_png(20_000, 20_000, rows=1), tmp_path)
    assert bomb["reason"] == ErrorReason.DOCUMENT_TOO_LARGE, bomb
    assert bomb["rss_mb"] < baseline["rss_mb"] + 50, (bomb, baseline)
    # Exactly 100 megapixels of zeros (RGB, 300 MB of pixels from ~300 KB): read, blank.
    full = run_child(zeros_png(10_000, 10_000), tmp_path)
    assert full["event"] == "done" and full["pages"] == 1, full
    assert "no text was found" in " ".join(full["package"].warnings)
    # Pillow holds RGB as 4 bytes a pixel: 400 MB decoded, then one grey copy.
    assert full["rss_mb"] < baseline["rss_mb"] + 700, (full, baseline)
