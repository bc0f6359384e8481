"""Markdown as a reader (or an LLM pipeline) gets it: heading roles as headings, list items as
items, and each table once, as a Markdown table where it stands in the document (a Word
table's text once came twice, as text and as the table). Documents are parsed by the parse
child's own entry point and rendered by docparse.render, as the HTTP API and CLI do."""

from __future__ import annotations

from docparse.render import to_markdown, to_text
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions
from tests import fixtures
from tests.fixtures.scans import scan


def parsed(kind: str, data: bytes) -> rp.ReadingPackage:
    return parse(kind, data, lambda *_: None, ParseOptions.defaults(job_id="md", deployment="test"))


def test_a_word_document_has_headings_items_and_each_table_once() -> None:
    package = parsed("docx", fixtures.docx_full())
    markdown = to_markdown(package)
    lines = markdown.splitlines()
    assert "# Annual report" in lines  # a level-1 heading is `#`
    assert "- First bullet point" in lines
    assert "The board approved the budget for the northern plant." in lines
    assert markdown.count("Ada") == 1 and markdown.count("Score") == 1, markdown
    table = lines.index("| Name | Score |")
    assert lines[table + 1 : table + 3] == ["| --- | --- |", "| Ada | 97 |"]
    # In its place: after the list item it follows in the body, not at the end.
    assert lines.index("- First bullet point") < table
    assert not any(line.startswith("<!-- page") for line in lines)  # Word has no pages
    # Its running header and footer are page furniture: out of Markdown and text, unless kept.
    assert "ACME Corp confidential header" not in markdown
    assert "Page footer text" not in to_text(package)
    kept = to_markdown(package, furniture=True)
    assert "ACME Corp confidential header" in kept and "Page footer text" in kept
    assert "Ada\t97" in to_text(package)  # the plain text keeps the table's text


def test_a_slide_shows_its_title_once_and_its_table_once() -> None:
    markdown = to_markdown(parsed("pptx", fixtures.pptx_full()))
    assert markdown.count("Roadmap 2025") == 1, markdown
    # The slide break is a comment, the slide's title its heading (no "Slide 1" heading).
    assert "<!-- slide 1 -->\n\n# Roadmap 2025\n" in markdown, markdown
    assert "Slide 1" not in markdown
    assert markdown.count("Milestone") == 1 and "| Milestone | Date |" in markdown, markdown
    assert markdown.index("Ship the parser service") < markdown.index("| Milestone | Date |")


def test_a_pdf_table_replaces_the_text_inside_its_rules() -> None:
    package = parsed("pdf", fixtures.pdf_with_table_and_image())
    assert package.pages[0].tables
    markdown = to_markdown(package)
    cells = [cell for row in fixtures.TABLE for cell in row]
    for cell in cells:
        assert markdown.count(cell) == 1, (cell, markdown)
    assert "| " + " | ".join(fixtures.TABLE[0]) + " |" in markdown
    assert markdown.index("Sales by region") < markdown.index("| " + fixtures.TABLE[0][0])


def test_pages_without_roles_or_tables_are_their_text() -> None:
    page = scan("en", dpi=200, seed=21)
    package = parse(
        "pdf", page.pdf, lambda *_: None, ParseOptions.defaults(job_id="md", deployment="test")
    )
    assert package.pages[0].ocr
    assert package.pages[0].text in to_markdown(package)  # OCR lines stay lines
