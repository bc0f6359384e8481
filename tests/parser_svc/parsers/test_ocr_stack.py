"""OCR through a running stack: language hints on SubmitJob reach the parse child, a hint that
is not installed is refused before anything is stored, a scan without a hint is read in its
own script, a PDF whose font has no Unicode map comes back readable with a warning. Batches
(CreateBatch, UploadBatch) and HTTP (a `languages` field or URL parameter) take the same
hints."""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from docparse.client import Client
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from parser_svc.parsers.ocr import installed_languages
from tests.conftest import OCR_PRELOAD_ALL, make_stack
from tests.fixtures.scans import cer, scan, unmapped_font_pdf
from tests.helpers import rpc_error, stub, wait_terminal


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = make_stack(
        tmp_path_factory.mktemp("ocr-stack"), replicas=1, gateways=1, extra_env=OCR_PRELOAD_ALL
    )
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


@pytest.mark.parametrize("tag", ["de\u202eevil", "de\x00", "de-AT\n", "de--", "d", "de AT"])
def test_a_tag_is_checked_whole_not_only_its_language(stack: LocalStack, tag: str) -> None:
    """'de' followed by an RTL override, a NUL or a newline is not stored and echoed."""
    error = rpc_error(lambda: submit(stack, scan("en").pdf, [tag]))
    assert (error.code, error.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "LANGUAGE_NOT_INSTALLED",
    )
    assert "not a BCP-47 language tag" in error.message
    assert "\u202e" not in error.message and "\x00" not in error.message


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


def batch_terminal(stack: LocalStack, batch_id: str) -> parser_service_pb2.Batch:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        last = parser_service_pb2.Batch()
        for event in s.WatchBatch(parser_service_pb2.WatchBatchRequest(batch_id=batch_id)):
            if event.HasField("batch"):
                last = event.batch
        return last


def results(stack: LocalStack, batch: parser_service_pb2.Batch) -> list[str]:
    """Each file's page text, in file order; every file SUCCEEDED."""
    assert batch.completed == batch.total == batch.succeeded, batch
    with Client(stack.gateway_addresses[0]) as client:
        return [client.result(job.job_id).pages[0].text for job in batch.jobs]


def test_a_batch_applies_its_language_hints_to_every_file(stack: LocalStack) -> None:
    pages = [scan("de", dpi=200, seed=5), scan("de", dpi=200, seed=6)]
    files = [
        parser_service_pb2.BatchFile(file_name=f"scan-{i}.pdf", content=p.pdf)
        for i, p in enumerate(pages)
    ]
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        created = s.CreateBatch(
            parser_service_pb2.CreateBatchRequest(files=files, languages=["de"]), timeout=30
        ).batch
    assert [list(job.languages) for job in created.jobs] == [["de"], ["de"]]
    batch = batch_terminal(stack, created.batch_id)
    assert [list(job.languages) for job in batch.jobs] == [["de"], ["de"]]
    for page, text in zip(pages, results(stack, batch), strict=True):
        assert cer(page.truth, text, "de") <= 0.03, text


def test_a_streamed_batch_applies_the_hints_of_its_header(stack: LocalStack) -> None:
    page = scan("ru", dpi=200, seed=7)

    def parts(languages: list[str]) -> Iterator[parser_service_pb2.UploadBatchRequest]:
        header = parser_service_pb2.UploadBatchHeader(languages=languages)
        yield parser_service_pb2.UploadBatchRequest(header=header)
        yield parser_service_pb2.UploadBatchRequest(
            file=parser_service_pb2.UploadFileHeader(file_name="ru.pdf", size_bytes=len(page.pdf))
        )
        yield parser_service_pb2.UploadBatchRequest(chunk=page.pdf)

    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        created = s.UploadBatch(parts(["ru"]), timeout=30).batch
        error = rpc_error(lambda: s.UploadBatch(parts(["ru", "tlh"]), timeout=30))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.reason == "LANGUAGE_NOT_INSTALLED" and "'tlh'" in error.message
    batch = batch_terminal(stack, created.batch_id)
    assert list(batch.jobs[0].languages) == ["ru"]
    assert cer(page.truth, results(stack, batch)[0], "ru") <= 0.03


def test_a_batch_with_a_language_that_is_not_installed_is_refused(stack: LocalStack) -> None:
    files = [parser_service_pb2.BatchFile(file_name="a.pdf", content=scan("en").pdf)]
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        request = parser_service_pb2.CreateBatchRequest(files=files, languages=["xx-Klingon"])
        error = rpc_error(lambda: s.CreateBatch(request, timeout=30))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.reason == "LANGUAGE_NOT_INSTALLED"
    assert "'xx-Klingon'" in error.message and "de" in error.message


# ------------------------------------------------------------------------------- over HTTP


def post(
    stack: LocalStack, path: str, body: bytes, content_type: str
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection(stack.http_addresses[0], timeout=60)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": content_type})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def form(files: list[tuple[str, bytes]], fields: dict[str, str]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    out = bytearray()
    for name, value in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        out += value.encode() + b"\r\n"
    for file_name, content in files:
        out += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{file_name}"\r\nContent-Type: application/pdf\r\n\r\n'
        ).encode()
        out += content + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


def test_http_takes_language_hints_as_a_field_or_in_the_url(stack: LocalStack) -> None:
    page = scan("de", dpi=200, seed=8)
    body, kind = form([("de.pdf", page.pdf)], {"languages": "de, en", "wait_ms": "60000"})
    status, job = post(stack, "/v1/jobs", body, kind)
    assert status == 200 and job["state"] == "STATE_SUCCEEDED", job
    assert job["languages"] == ["de", "en"]
    status, job = post(stack, "/v1/jobs?file_name=de.pdf&languages=de", page.pdf, "application/pdf")
    assert status == 202 and job["languages"] == ["de"], job
    status, error = post(stack, "/v1/jobs?languages=en,tlh", page.pdf, "application/pdf")
    assert status == 400 and error["reason"] == "LANGUAGE_NOT_INSTALLED", error
    assert "'tlh'" in error["message"] and "ru" in error["message"]


def test_an_http_batch_applies_its_language_hints_to_every_file(stack: LocalStack) -> None:
    pages = [scan("de", dpi=200, seed=9), scan("de", dpi=200, seed=10)]
    files = [(f"de-{i}.pdf", p.pdf) for i, p in enumerate(pages)]
    status, batch = post(stack, "/v1/batches", *form(files, {"languages": "de"}))
    assert status == 202, batch
    assert [job["languages"] for job in batch["jobs"]] == [["de"], ["de"]]
    texts = results(stack, batch_terminal(stack, batch["batch_id"]))
    for page, text in zip(pages, texts, strict=True):
        assert cer(page.truth, text, "de") <= 0.03, text
    status, error = post(stack, "/v1/batches?languages=tlh", *form(files, {}))
    assert status == 400 and error["reason"] == "LANGUAGE_NOT_INSTALLED", error
