"""The upload page shows a finished document's images, in a real browser (headless Chromium,
as tests/gateway/test_browser.py drives it): drop an image-bearing PDF, wait for its row to end,
press
"Images", and every image of the package is on the page, loaded (decoded, with its pixel size)
from GET /v1/jobs/{id}/assets/{asset_id}. Skips where Chromium cannot be had, except in CI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2, reading_package_pb2
from tests import fixtures
from tests.conftest import make_stack
from tests.gateway.test_browser import DROP, chromium, page  # noqa: F401  (fixtures)
from tests.helpers import stub

ONE_DONE = """() => {
  const row = document.querySelector("li.file");
  return row && row.dataset.state === "STATE_SUCCEEDED" ? row.dataset.jobId : null;
}"""

IMAGES_LOADED = """(count) => {
  const images = [...document.querySelectorAll("li.file .images img")];
  return images.length === count && images.every((img) => img.complete && img.naturalWidth > 0);
}"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(tmp_path_factory.mktemp("browser-images"), replicas=1, gateways=1) as running:
        yield running


def test_the_page_shows_a_documents_images(
    stack: LocalStack,
    page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    base = f"http://{stack.http_addresses[0]}"
    failed: list[str] = []  # image loads that failed (the page closes its finished
    # batch's event stream itself, which the browser reports as an aborted request)
    page.on(
        "requestfailed",
        lambda request: "/assets/" in request.url and failed.append(request.url),
    )
    page.goto(base + "/")
    data = fixtures.pdf_with_table_and_image()
    page.evaluate(DROP, ["table.pdf", list(data)])
    job_id = page.wait_for_function(ONE_DONE, timeout=90_000).json_value()

    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        result = b"".join(
            m.chunk for m in s.GetResult(parser_service_pb2.GetResultRequest(job_id=job_id))
        )
    assets = reading_package_pb2.ReadingPackage.FromString(result).assets
    assert assets

    page.get_by_role("button", name="Images").click()
    page.wait_for_function(IMAGES_LOADED, arg=len(assets), timeout=30_000)
    shown = page.evaluate(
        """() => [...document.querySelectorAll("li.file .images img")].map((img) => ({
          src: new URL(img.src).pathname, width: img.naturalWidth, height: img.naturalHeight,
        }))"""
    )
    assert [image["src"] for image in shown] == [
        f"/v1/jobs/{job_id}/assets/{asset.asset_id}" for asset in assets
    ]
    for image, asset in zip(shown, assets, strict=True):
        if asset.width:
            assert (image["width"], image["height"]) == (asset.width, asset.height)
    assert not failed, failed
    page.screenshot(path=str(tmp_path / "images.png"), full_page=True)
