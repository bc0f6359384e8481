"""The upload page shows a finished document's structure, in a real browser (headless
Chromium, as tests/gateway/test_browser.py drives it): drop a Word file and a PDF, each with a
heading, a list and a table, wait for their rows to end, press "Read", and the page holds the
headings as h1/h2, the list items as li and the table's cells as th/td; the "Page furniture"
toggle brings the running header and footer in. Document text that looks like markup
("<script>", "<img onerror=...>") shows as that text: no element of it, nothing run. Skips
where Chromium cannot be had, except in CI."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docx
import pymupdf as untyped_pymupdf
import pytest

from docparse.local.stack import LocalStack
from tests.conftest import make_stack
from tests.gateway.test_browser import DROP, chromium, page  # noqa: F401  (fixtures)

pymupdf: Any = untyped_pymupdf  # its functions have no annotations

SCRIPT = "<script>window.pwned = 1</script>"
IMG = '<img src=x onerror="window.pwned = 2">'

BOTH_DONE = """(names) => names.every((name) => [...document.querySelectorAll("li.file")].some(
  (row) => row.querySelector(".name").textContent === name
    && row.dataset.state === "STATE_SUCCEEDED"))"""

# The rendering shown under a row: headings, list items, table cells, furniture, and what a
# script smuggled in as text would have left (elements, handler attributes, a global).
STRUCTURE = """(row) => {
  const article = row.querySelector("article.document");
  const texts = (selector) => [...article.querySelectorAll(selector)].map((n) => n.textContent);
  return {
    headings: [...article.querySelectorAll("h1, h2, h3, h4, h5, h6")].map(
      (h) => [h.localName, h.textContent]),
    items: [...article.querySelectorAll("li")].map((li) => li.firstChild.textContent),
    nested: texts("li > ul > li, li > ol > li"),
    head: texts("thead th"),
    cells: [...article.querySelectorAll("tbody tr")].map(
      (tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)),
    paragraphs: texts("p"),
    header: texts("header"),
    footer: texts("footer"),
    tags: [...new Set([...article.querySelectorAll("*")].map((n) => n.localName))].sort(),
    handlers: [...article.querySelectorAll("*")].flatMap(
      (n) => [...n.attributes].map((a) => a.name)).filter((a) => a.startsWith("on")),
    pwned: window.pwned === undefined ? null : String(window.pwned),
  };
}"""

FIGURES = """(row) => {
  const images = [...row.querySelectorAll("article.document img")];
  return images.length > 0 && images.every((img) => img.complete && img.naturalWidth > 0)
    ? images.map((img) => new URL(img.src).pathname) : null;
}"""


def word_file() -> bytes:
    """Headings 1 and 2, a nested bullet list and a numbered item, a 3x2 table, a running
    header and footer, and text that looks like markup."""
    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = "Running head of the field guide"
    document.sections[0].footer.paragraphs[0].text = "Field guide footer"
    document.add_heading("Field guide", level=1)
    document.add_paragraph(f"Beware {SCRIPT} and {IMG} here.")
    document.add_heading("Birds", level=2)
    document.add_paragraph("Owls", style="List Bullet")
    document.add_paragraph("Barn owl", style="List Bullet 2")
    document.add_paragraph("Wrens", style="List Bullet")
    document.add_paragraph("Count them", style="List Number")
    table = document.add_table(rows=3, cols=2)
    for r, row in enumerate([["Bird", "Count"], ["Owl", "3"], ["<b>Wren</b>", "5"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pdf_file() -> bytes:
    """A large bold title, a smaller bold heading, three bulleted lines and a ruled table whose
    first row is bold."""
    document = pymupdf.open()
    page_ = document.new_page()
    page_.insert_text((72, 72), "Woodland survey", fontsize=24, fontname="hebo")
    page_.insert_text((72, 112), "Birds of the northern woods, counted in May.", fontsize=11)
    page_.insert_text((72, 142), "Owls and their calls", fontsize=16, fontname="hebo")
    for i, item in enumerate(("Barn owl", "Tawny owl", "Little owl")):
        page_.insert_text((80, 170 + 18 * i), "\u2022", fontsize=11)
        page_.insert_text((95, 170 + 18 * i), item, fontsize=11)
    for r, row in enumerate([["Bird", "Count"], ["Owl", "3"], ["Wren", "5"]]):
        for c, value in enumerate(row):
            cell = pymupdf.Rect(72 + 120 * c, 240 + 20 * r, 192 + 120 * c, 260 + 20 * r)
            page_.draw_rect(cell, color=(0, 0, 0), width=0.8)
            font = "hebo" if r == 0 else "helv"
            page_.insert_text((cell.x0 + 5, cell.y1 - 6), value, fontsize=11, fontname=font)
    data: bytes = document.tobytes()
    return data


def figure_pdf() -> bytes:
    """A heading, a ruled table and a JPEG photo (its bytes stored as they are)."""
    document = pymupdf.open()
    page_ = document.new_page()
    page_.insert_text((72, 72), "Site photo", fontsize=24, fontname="hebo")
    pixels = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 80, 60), False)
    pixels.set_rect(pixels.irect, (40, 120, 200))
    jpeg = pixels.tobytes("jpeg")
    page_.insert_image(pymupdf.Rect(72, 100, 232, 220), stream=jpeg)
    data: bytes = document.tobytes()
    return data


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(tmp_path_factory.mktemp("browser-read"), replicas=1, gateways=1) as running:
        yield running


def read(row: Any, furniture: bool = False) -> dict[str, Any]:
    """What the row's document view shows once its rendering (with or without furniture) is in."""
    done = f'article.document[aria-busy="false"][data-furniture="{str(furniture).lower()}"]'
    row.locator(done).wait_for(timeout=30_000)
    shown: dict[str, Any] = row.evaluate(STRUCTURE)
    return shown


def test_the_page_shows_headings_lists_and_tables_as_text(
    stack: LocalStack,
    page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    problems: list[str] = []

    def console(message: Any) -> None:
        if message.type == "error":
            problems.append(message.text)

    page.on("console", console)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    answer = page.goto(f"http://{stack.http_addresses[0]}/")
    # The page's own policy stands: its scripts only, no inline script or handler attribute.
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "default-src 'self';" in policy, policy
    page.evaluate(DROP, ["guide.docx", list(word_file())])
    page.evaluate(DROP, ["survey.pdf", list(pdf_file())])
    page.wait_for_function(BOTH_DONE, arg=["guide.docx", "survey.pdf"], timeout=90_000)

    guide = page.locator("li.file", has_text="guide.docx")
    guide.get_by_role("button", name="Read").click()
    shown = read(guide)
    assert shown["headings"] == [["h1", "Field guide"], ["h2", "Birds"]]
    assert shown["items"] == ["Owls", "Barn owl", "Wrens", "Count them"]
    assert shown["nested"] == ["Barn owl"]
    assert shown["cells"] == [["Bird", "Count"], ["Owl", "3"], ["<b>Wren</b>", "5"]]
    # Markup in the document's text is text: no element, attribute or script of it.
    assert f"Beware {SCRIPT} and {IMG} here." in shown["paragraphs"]
    assert not {"script", "img", "b"} & set(shown["tags"]), shown["tags"]
    assert shown["handlers"] == [] and shown["pwned"] is None
    assert shown["header"] == [] and shown["footer"] == []  # page furniture left out

    guide.get_by_label("Page furniture").check()
    kept = read(guide, furniture=True)
    assert kept["header"] == ["Running head of the field guide"]
    assert kept["footer"] == ["Field guide footer"]
    assert kept["headings"] == shown["headings"] and kept["cells"] == shown["cells"]
    guide.get_by_label("Page furniture").uncheck()
    assert read(guide)["header"] == []

    row = page.locator("li.file", has_text="survey.pdf")
    row.get_by_role("button", name="Read").click()
    survey = read(row)
    assert survey["headings"] == [["h1", "Woodland survey"], ["h2", "Owls and their calls"]]
    assert survey["items"] == ["Barn owl", "Tawny owl", "Little owl"]
    assert survey["head"] == ["Bird", "Count"]
    assert survey["cells"] == [["Owl", "3"], ["Wren", "5"]]

    page.screenshot(path=str(tmp_path / "read.png"), full_page=True)
    assert not problems, problems


def test_the_documents_images_load_from_its_assets(
    stack: LocalStack,
    page: Any,  # noqa: F811
) -> None:
    """The rendering's relative image links ("assets/<id>") become the job's asset URLs."""
    page.goto(f"http://{stack.http_addresses[0]}/")
    page.evaluate(DROP, ["figure.pdf", list(figure_pdf())])
    page.wait_for_function(BOTH_DONE, arg=["figure.pdf"], timeout=90_000)
    row = page.locator("li.file", has_text="figure.pdf")
    row.get_by_role("button", name="Read").click()
    shown = read(row)
    assert shown["headings"] == [["h1", "Site photo"]]
    job_id = row.get_attribute("data-job-id")
    row.locator("article.document img").first.scroll_into_view_if_needed()  # loaded lazily
    found = page.wait_for_function(FIGURES, arg=row.element_handle(), timeout=30_000)
    paths = found.json_value()
    assert len(paths) == 1 and paths[0].startswith(f"/v1/jobs/{job_id}/assets/"), paths
