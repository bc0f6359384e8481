"""The upload page shows a running document's pages as they are read, in a real browser
(headless Chromium, as tests/gateway/test_browser.py drives it): drop a long PDF parsed slowly,
and while its row still says Running the page already holds pages marked draft; once the job
ends every page is there, final, with the text of the package's Markdown. Skips where Chromium
cannot be had, except in CI."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from docparse.local.stack import LocalStack
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.draft_pages import page_part
from tests.conftest import make_stack
from tests.gateway.test_browser import DROP, chromium, page  # noqa: F401  (fixtures)
from tests.gateway.test_http import request
from tests.helpers import make_pdf

PAGES = 20

# Drafts on the page while the row is still running: what the test waits for first.
DRAFTS_WHILE_RUNNING = """() => {
  const row = document.querySelector("li.file");
  if (!row || row.dataset.state !== "STATE_RUNNING") return null;
  const drafts = row.querySelectorAll('.live-page[data-final="false"]');
  return drafts.length ? row.dataset.jobId : null;
}"""

ALL_FINAL = """(count) => {
  const row = document.querySelector("li.file");
  const pages = [...row.querySelectorAll(".live-page")];
  return row.dataset.state === "STATE_SUCCEEDED" && pages.length === count &&
    pages.every((page) => page.dataset.final === "true");
}"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("browser-pages"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_PARSE_PAGE_DELAY_MS": "200"},  # seconds of Running to watch
    ) as running:
        yield running


def test_the_page_shows_pages_while_the_document_is_read(
    stack: LocalStack,
    page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    base = f"http://{stack.http_addresses[0]}"
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto(base + "/")
    page.evaluate(DROP, ["slow.pdf", list(make_pdf(PAGES, "slow"))])

    job_id = page.wait_for_function(DRAFTS_WHILE_RUNNING, timeout=60_000, polling=50).json_value()
    drafts = page.locator('li.file .live-page[data-final="false"]')
    assert drafts.first.locator(".draft-mark").inner_text() == "draft"

    page.screenshot(path=str(tmp_path / "drafts.png"), full_page=True)
    page.wait_for_function(ALL_FINAL, arg=PAGES, timeout=90_000, polling=100)
    shown = page.evaluate(
        """() => [...document.querySelectorAll("li.file .live-page")].map((page) => ({
          number: Number(page.dataset.page), text: page.querySelector(".page-text").textContent,
        }))"""
    )
    assert [item["number"] for item in shown] == list(range(1, PAGES + 1))
    reply = request(stack.http_addresses[0], "GET", f"/v1/jobs/{job_id}/result?format=proto")
    package = rp.ReadingPackage.FromString(reply.body)
    for item, final in zip(shown, package.pages, strict=True):
        part = rp.ReadingPackage.FromString(page_part(package, final))
        assert item["text"] == to_markdown(part), item["number"]
    assert hashlib.sha256(reply.body).hexdigest() == reply.headers["ETag"].strip('"')
    assert page.locator(".live-pages .live-status").inner_text() == f"{PAGES} pages"

    # "Read" on the finished row puts the document in the pages' place.
    page.get_by_role("button", name="Read").click()
    page.wait_for_selector('article.document[aria-busy="false"]', timeout=30_000)
    assert page.locator(".live-pages").count() == 0
    page.screenshot(path=str(tmp_path / "pages.png"), full_page=True)
    assert not problems, problems
