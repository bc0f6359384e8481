"""Each format beyond PDF and Office through a real stack (gateway → parser_svc → queue → parse
child → result), named by a misleading file name, read back through the SDK and rendered as a
user reads it: the example documents `make run` shows, each with a phrase it must contain."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from docparse.client import Client
from docparse.local.stack import LocalStack
from docparse.render_markdown import to_markdown
from docparse.v1 import job_pb2
from tests.conftest import make_stack

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

# example -> (content type, a phrase its Markdown shows)
EXPECTED = {
    "book.epub": ("epub", "Chapter 1 — The Light on Skarv Point"),
    "inventory.ods": ("ods", "Galvanised bucket 10 l"),
    "invoice-mail.eml": ("eml", "Rechnung 2026-0117"),
    "memo.rtf": ("rtf", "Canal House, 14 Wharf Road"),
    "minutes.odt": ("odt", "# Riverside Community Garden"),
    "notice.html": ("html", "# Planned water supply interruption"),
    "orders.csv": ("csv", "| Bäckerei Sommer | München |"),
    "pitch.odp": ("odp", "Seedbox: fresh herbs"),
    "readme.md": ("markdown", "tidewatch downloads tide predictions"),
    "release-notes.txt": ("text", "Offline-Karten für ganz Österreich"),
    "fax-letter-2-pages.tif": ("tiff", "oak chairs"),
    "phone-photo-sideways.jpg": ("jpeg", "Team meeting"),
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = make_stack(tmp_path_factory.mktemp("formats-stack"), replicas=1, gateways=1)
    s.start()
    yield s
    s.stop()


def test_every_example_of_a_new_format_is_listed_here() -> None:
    old = {".pdf", ".docx", ".xlsx", ".pptx"}
    examples = {p.name for p in EXAMPLES.iterdir() if p.suffix not in old}
    assert examples == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_example_parses_through_the_stack(stack: LocalStack, name: str) -> None:
    content_type, phrase = EXPECTED[name]
    with Client(stack.gateway_addresses[0]) as client:
        # The name says PDF: the type comes from the bytes.
        answer = client.submit(f"{Path(name).stem}.pdf", (EXAMPLES / name).read_bytes())
        job = list(client.watch(answer.job.job_id))[-1]
        assert job.state == job_pb2.STATE_SUCCEEDED, job.error
        assert job.content_type == content_type
        assert job.result.page_count >= 1 and job.result.char_count > 0
        package = client.result(job.job_id)
    markdown = to_markdown(package)
    assert package.content_type == content_type
    assert phrase in markdown, markdown[:2000]
    assert "\ufffd" not in markdown


def test_an_email_attachment_is_its_own_package(stack: LocalStack) -> None:
    with Client(stack.gateway_addresses[0]) as client:
        job = client.parse((EXAMPLES / "invoice-mail.eml").read_bytes(), file_name="m.eml")
        package = client.result(job.job_id)
    assert package.email.subject.startswith("Rechnung 2026-0117")
    assert package.email.sender.startswith("Jörg Müller")
    pdfs = [a for a in package.attachments if a.package.content_type == "pdf"]
    assert len(pdfs) == 1 and not pdfs[0].reason
    assert pdfs[0].package.pages and pdfs[0].package.pages[0].text
