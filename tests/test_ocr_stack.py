"""OCR through a running stack: language hints on SubmitJob reach the parse child, a hint that
is not installed is refused before anything is stored, a scan without a hint is read in its
own script, a PDF whose font has no Unicode map comes back readable with a warning."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from docparse.client import Client
from docparse.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from parser_svc.parsers.ocr import installed_languages
from tests.conftest import make_stack
from tests.fixtures.scans import cer, scan, unmapped_font_pdf
from tests.helpers import rpc_error, stub, wait_terminal


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = make_stack(tmp_path_factory.mktemp("ocr-stack"), replicas=1, gateways=1)
    s.start()
    yield s
    s.stop()


def submit(stack: LocalStack, content: bytes, languages: list[str]) -> job_pb2.Job:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        return s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name="scan.pdf", content=content, languages=languages
            ),
            timeout=30,
        ).job


def parse(
    stack: LocalStack, content: bytes, languages: list[str] | None = None
) -> tuple[job_pb2.Job, reading_package_pb2.ReadingPackage]:
    address = stack.gateway_addresses[0]
    job = wait_terminal(address, submit(stack, content, languages or []).job_id)
    assert job.state == job_pb2.STATE_SUCCEEDED, job.error
    with Client(address) as client:
        return job, client.result(job.job_id)


def test_a_language_hint_reaches_the_parse_and_is_kept_on_the_job(stack: LocalStack) -> None:
    page = scan("de", dpi=200, seed=3)
    job, package = parse(stack, page.pdf, ["de-DE"])
    assert list(job.languages) == ["de-DE"]
    assert package.pages[0].ocr
    assert cer(page.truth, package.pages[0].text, "de") <= 0.03
    assert "Straßenbahn" in package.pages[0].text


def test_a_hint_that_is_not_installed_is_refused_naming_the_installed_ones(
    stack: LocalStack,
) -> None:
    error = rpc_error(lambda: submit(stack, scan("en").pdf, ["en", "tlh"]))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.reason == "LANGUAGE_NOT_INSTALLED"
    assert "'tlh'" in error.message
    for tag in ("de", "ru", "zh-hans", "ja", "ar"):
        assert tag in installed_languages() and tag in error.message


def test_a_russian_scan_without_a_hint_is_read_in_cyrillic(stack: LocalStack) -> None:
    page = scan("ru", dpi=200, seed=4)
    job, package = parse(stack, page.pdf)
    assert not job.languages
    assert cer(page.truth, package.pages[0].text, "ru") <= 0.03, package.pages[0].text


def test_a_font_without_unicode_map_is_ocred_and_named_in_a_warning(stack: LocalStack) -> None:
    text = "The committee approved the budget for the new library building in March."
    _job, package = parse(stack, unmapped_font_pdf(text))
    assert package.pages[0].ocr
    assert cer(text, package.pages[0].text, "en") <= 0.03, package.pages[0].text
    assert any("1 page (1)" in w and "read by OCR" in w for w in package.warnings)
