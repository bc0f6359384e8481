"""Some pages of a package (docparse/package_pages.py, page_ranges.of_pages): cutting the
serialized bytes gives what decoding, restricting and serializing gives, and a page set is
named in a form that can be passed back as `pages`."""

from __future__ import annotations

import random

import pytest

from docparse import page_ranges
from docparse.package_pages import TruncatedPackage, cut_serialized, joined
from docparse.v1 import reading_package_pb2 as rp


def restricted(package: rp.ReadingPackage, selection: page_ranges.Selection) -> rp.ReadingPackage:
    """The oracle cut_serialized is held to: the decoded `package` with only the selected
    pages and the records of the assets they show; sheets, slides and attachments left out;
    document-wide fields kept."""
    pages = [page for page in package.pages if page_ranges.selects(selection, page.number)]
    shown = {image.asset_id for page in pages for image in page.images}
    assets = [asset for asset in package.assets if asset.asset_id in shown]
    for name in ("pages", "assets", "sheets", "slides", "attachments"):
        package.ClearField(name)
    package.pages.extend(pages)
    package.assets.extend(assets)
    return package


def _package(pages: int, seed: int) -> rp.ReadingPackage:
    rng = random.Random(seed)
    package = rp.ReadingPackage(content_type="pdf", parser_version="test", decrypted=True)
    package.metadata.title = "a title"
    package.warnings.append("a warning")
    package.document_page_count = pages
    for number in range(1, pages + 1):
        page = package.pages.add(number=number, width=612, height=792)
        page.blocks.add(text=f"page {number} " + "word " * rng.randrange(1, 300))
        for _ in range(rng.randrange(0, 3)):
            asset_id = f"{rng.getrandbits(128):032x}.png"
            page.images.add(asset_id=asset_id)
            package.assets.add(asset_id=asset_id, mime_type="image/png", size_bytes=3)
    package.sheets.add(name="not a page").rows.add().cells.add(string_value="x" * 5000)
    package.slides.add(number=1)
    return package


@pytest.mark.parametrize("seed", range(20))
def test_cutting_the_bytes_is_restricting_the_package(seed: int) -> None:
    rng = random.Random(seed)
    package = _package(rng.randrange(1, 40), seed)
    data = package.SerializeToString(deterministic=True)
    spec = ",".join(
        f"{a}-{a + rng.randrange(0, 5)}" if rng.random() < 0.5 else f"{a}-"
        for a in sorted(rng.sample(range(1, 50), rng.randrange(1, 4)))
    )
    selection = page_ranges.parse(spec)
    expected = restricted(rp.ReadingPackage.FromString(data), selection)
    assert cut_serialized(data, selection) == expected.SerializeToString(deterministic=True)
    cut = rp.ReadingPackage.FromString(cut_serialized(data, selection))
    assert [p.number for p in cut.pages] == [
        p.number for p in package.pages if page_ranges.selects(selection, p.number)
    ]
    assert {a.asset_id for a in cut.assets} == {i.asset_id for p in cut.pages for i in p.images}
    assert not cut.sheets and not cut.slides and cut.metadata.title == "a title"


def test_cut_short_bytes_are_refused() -> None:
    data = _package(3, 1).SerializeToString(deterministic=True)
    with pytest.raises(TruncatedPackage):
        cut_serialized(data[:-7], page_ranges.parse("1"))


def test_page_parts_join_in_page_order_with_each_asset_once() -> None:
    package = _package(6, 3)
    package.pages[2].images.add(asset_id=package.assets[0].asset_id)  # shown twice
    parts = []
    for page in reversed(package.pages):
        part = rp.ReadingPackage(content_type="pdf")
        part.pages.append(page)
        shown = {i.asset_id for i in page.images}
        part.assets.extend(a for a in package.assets if a.asset_id in shown)
        parts.append(part.SerializeToString())
    together = joined(parts)
    assert [p.number for p in together.pages] == [1, 2, 3, 4, 5, 6]
    ids = [a.asset_id for a in together.assets]
    assert len(ids) == len(set(ids)) == len({a.asset_id for a in package.assets})


def test_a_page_set_is_named_as_a_selection_that_can_be_passed_back() -> None:
    assert page_ranges.of_pages([]) == ""
    assert page_ranges.of_pages([3, 1, 2, 5, 9, 8, 2]) == "1-3,5,8-9"
    scattered = range(1, 400, 2)  # 200 gaps: the first MAX_PARTS ranges are named
    named = page_ranges.of_pages(scattered)
    assert page_ranges.parse(named) == [(n, n) for n in range(1, 128, 2)]
