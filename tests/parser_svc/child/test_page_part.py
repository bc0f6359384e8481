"""A draft page part (child/draft_pages.page_part) is put together from the page's and its
assets' own serializations: its bytes are those of the one-page ReadingPackage it stands for,
serialized deterministically, which is what a retried attempt and the final parts are compared
by (their sha256)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.draft_pages import page_part
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions
from tests import fixtures
from tests.fixtures.drawings import repeated_images_pdf
from tests.helpers import make_pdf


def _as_message(package: rp.ReadingPackage, page: rp.Page) -> bytes:
    shown = {image.asset_id for image in page.images}
    part = rp.ReadingPackage(content_type=package.content_type)
    part.pages.append(page)
    part.assets.extend(asset for asset in package.assets if asset.asset_id in shown)
    return part.SerializeToString(deterministic=True)


@pytest.mark.parametrize(
    ("document", "with_images"),
    [
        pytest.param(fixtures.pdf_with_table_and_image, True, id="table-and-image"),
        pytest.param(repeated_images_pdf, True, id="images-shown-again"),
        pytest.param(lambda: make_pdf(3, "words " * 400), False, id="long-text-pages"),
    ],
)
def test_a_page_part_is_the_one_page_package_serialized(
    document: Callable[[], bytes], with_images: bool, tmp_path: Path
) -> None:
    options = ParseOptions.defaults(assets_dir=tmp_path / "assets")
    package = parse("pdf", document(), lambda *_: None, options)
    assert package.pages
    assets = 0
    for page in package.pages:
        data = page_part(package, page)
        assert data == _as_message(package, page)
        part = rp.ReadingPackage.FromString(data)
        assert list(part.pages) == [page]
        assert part.content_type == "pdf"
        assert {a.asset_id for a in part.assets} == {i.asset_id for i in page.images}
        assets += len(part.assets)
    assert (assets > 0) == with_images
