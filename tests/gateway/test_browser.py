"""The upload page in a real browser: headless Chromium (Debian's package) driven by Playwright
with that executable (Playwright never downloads a browser here). Files go in by drag and drop
and by the file picker; the test waits on the DOM until every progress bar is full, then checks
what each row says against the service, and leaves a screenshot in the test's tmp dir.

Needs /usr/bin/chromium (`make browser-deps` installs it on Debian as root; so does this test
when it can). Without it the test skips with the reason — except under CI, where it must run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from docparse.local.stack import LocalStack
from tests import fixtures
from tests.conftest import make_stack
from tests.helpers import make_pdf

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the browser test must run in CI: {reason}")
    pytest.skip(reason)


def _find_chromium() -> str | None:
    for candidate in (
        os.environ.get("DOCPARSE_CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    found = _find_chromium()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        _unavailable("no chromium, and it cannot be installed here (needs apt-get and root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = [["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]]
    for step in steps:
        done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            _unavailable(f"{' '.join(step)} failed: {done.stderr.strip()[-500:]}")
    found = _find_chromium()
    if not found:
        _unavailable("apt-get installed chromium, yet no chromium executable was found")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("browser"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_PARSE_PAGE_DELAY_MS": "40"},  # bars visibly move
    ) as running:
        yield running


@pytest.fixture
def page(chromium: str, tmp_path: Path) -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is missing (make setup installs it)")
    with sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh profile every run
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1000, "height": 1100},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


# Every row is final and its bar full: the condition the test waits on (no sleeps).
ALL_DONE = """(count) => {
  const rows = [...document.querySelectorAll("li.file")];
  return rows.length === count && rows.every((row) => {
    const bar = row.querySelector("progress");
    return row.dataset.terminal === "true" && bar.hasAttribute("value") && bar.value === bar.max;
  });
}"""

ROWS = """() => [...document.querySelectorAll("li.file")].map((row) => ({
  name: row.querySelector(".name").textContent,
  state: row.dataset.state,
  jobId: row.dataset.jobId || "",
  badge: row.querySelector(".badge").textContent,
  units: row.querySelector(".units").textContent,
  outcome: row.querySelector(".outcome").textContent,
  links: [...row.querySelectorAll(".actions a")].map((a) => a.getAttribute("href")),
}))"""

DROP = """([name, bytes]) => {
  const data = new DataTransfer();
  data.items.add(new File([new Uint8Array(bytes)], name, { type: "application/pdf" }));
  const zone = document.getElementById("dropzone");
  const init = { dataTransfer: data, bubbles: true, cancelable: true };
  zone.dispatchEvent(new DragEvent("dragover", init));
  zone.dispatchEvent(new DragEvent("drop", init));
}"""


def test_upload_page_shows_every_file_to_the_end(
    stack: LocalStack, page: Any, tmp_path: Path
) -> None:
    base = f"http://{stack.http_addresses[0]}"
    problems: list[str] = []
    # The one failed request expected: the batch refused for letter.doc (400), retried without it.
    expected = "the server responded with a status of 400"
    page.on(
        "console",
        lambda m: m.type == "error" and expected not in m.text and problems.append(m.text),
    )
    page.on("pageerror", lambda exc: problems.append(str(exc)))

    page.goto(f"{base}/")
    assert page.title() == "docparse"
    assert page.get_by_role("heading", name="docparse").is_visible()
    assert page.get_by_text("Nothing uploaded yet.").is_visible()

    # One file dropped on the zone ...
    page.evaluate(DROP, ["dropped.pdf", list(make_pdf(3, "dropped"))])
    # ... and several picked with the file chooser (its label is the visible control).
    picked = {
        "report.pdf": make_pdf(12, "report"),
        "letter.docx": fixtures.docx_full(),
        "numbers.xlsx": fixtures.xlsx_typed(),
        "deck.pptx": fixtures.pptx_full(),
        "secret.pdf": fixtures.encrypted_pdf("hunter2"),  # FAILED: PASSWORD_REQUIRED
        "letter.doc": fixtures.wordperfect(),  # refused at upload: not a Word file
    }
    with page.expect_file_chooser() as chooser:
        page.get_by_text("Choose files…").click()
    chooser.value.set_files(
        [
            {"name": name, "mimeType": "application/octet-stream", "buffer": data}
            for name, data in picked.items()
        ]
    )

    page.wait_for_function(ALL_DONE, arg=1 + len(picked), timeout=90_000, polling=100)
    rows = {row["name"]: row for row in page.evaluate(ROWS)}
    assert set(rows) == {"dropped.pdf", *picked}

    succeeded = ["dropped.pdf", "report.pdf", "letter.docx", "numbers.xlsx", "deck.pptx"]
    for name in succeeded:
        row = rows[name]
        assert (row["state"], row["badge"]) == ("STATE_SUCCEEDED", "Done"), row
        job = json.loads(page.request.get(f"{base}/v1/jobs/{row['jobId']}").text())
        chars = int(job["result"]["char_count"])
        assert chars > 0 and row["outcome"] == f"{chars:,} characters", (row, job["result"])
        assert f"/v1/jobs/{row['jobId']}/result?format=text" in row["links"]
    assert rows["report.pdf"]["units"] == "12 / 12 pages"
    assert rows["dropped.pdf"]["units"] == "3 / 3 pages"
    assert rows["numbers.xlsx"]["units"].endswith("sheets")
    assert rows["deck.pptx"]["units"].endswith("slides")

    secret = rows["secret.pdf"]
    assert (secret["state"], secret["badge"]) == ("STATE_FAILED", "Failed")
    assert secret["outcome"].startswith("PASSWORD_REQUIRED: ")
    refused = rows["letter.doc"]
    assert (refused["state"], refused["badge"]) == ("REJECTED", "Rejected")
    assert (
        refused["outcome"].startswith("UNSUPPORTED_FORMAT: ")
        and "WordPerfect" in refused["outcome"]
    )

    summaries = page.locator(".batch .summary").all_inner_texts()
    assert sorted(summaries) == ["1 of 1 done", "5 of 5 done · 1 failed"]
    # The result link serves the text the parser found ("report N of 12" atop every page is
    # page furniture, left out); the Page link the same document as HTML, page by page.
    text_link, html_link = rows["report.pdf"]["links"][:2]
    assert "job state lives in Redis" in page.request.get(f"{base}{text_link}").text()
    assert html_link.endswith("?format=html")
    html = page.request.get(f"{base}{html_link}").text()
    assert '<section data-page="12">' in html and "job state lives in Redis" in html

    shot = tmp_path / "upload-page.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000
    assert not problems, problems
