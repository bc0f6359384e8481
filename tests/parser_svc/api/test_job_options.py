"""SubmitJob's per-job parse options through a running stack (gateway → replica → worker →
parse child): pages, images, ocr_mode and ocr_dpi travel from the SDK, the CLI's client and
HTTP to the parse and are echoed on the job; bad values are refused at submit with a reason; a
page past the end is refused naming the page count (at submit, or by the parse for a PDF
only mupdf can count); the options are part of content dedupe and of request-id idempotency."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import docx
import pytest

from docparse.client import Client
from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2
from tests.conftest import make_stack
from tests.fixtures.images import image_pdf
from tests.fixtures.scans import scan
from tests.gateway.test_http import multipart, request
from tests.helpers import make_pdf, wait_terminal

# Pages are paced (20 ms each) so that a long document's first job is still running when the
# same bytes come again: the join below proves it (a finished job would not be joined).
SLOW = {"DOCPARSE_PARSE_PAGE_DELAY_MS": "20"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = make_stack(tmp_path_factory.mktemp("options"), replicas=1, gateways=1, extra_env=SLOW)
    s.start()
    yield s
    s.stop()


@pytest.fixture()
def client(stack: LocalStack) -> Iterator[Client]:
    with Client(stack.gateway_addresses[0]) as c:
        yield c


def refused(call: object) -> DocparseError:
    try:
        call()  # type: ignore[operator]
    except DocparseError as err:
        return err
    raise AssertionError("the call succeeded; an error was expected")


def test_pages_of_a_1000_page_pdf_read_only_those_and_the_package_says_so(
    client: Client,
) -> None:
    job = client.parse(make_pdf(1000), file_name="long.pdf", pages="1-5")
    assert job.pages == "1-5"
    assert job.progress.total == 5 and job.result.page_count == 5
    package = client.result(job.job_id)
    assert [page.number for page in package.pages] == [1, 2, 3, 4, 5]
    assert package.page_selection == "1-5" and package.document_page_count == 1000


def test_the_job_echoes_its_options_and_the_defaults(client: Client) -> None:
    plain = client.submit("a.pdf", make_pdf(2, "plain")).job
    assert (plain.pages, plain.images, plain.ocr_mode, plain.ocr_dpi) == (
        "",
        job_pb2.IMAGE_MODE_REFERENCED,
        job_pb2.OCR_MODE_AUTO,
        0,
    )
    asked = client.submit(
        "b.pdf", make_pdf(2, "asked"), pages="2, 1", images="none", ocr_mode="off", ocr_dpi=200
    ).job
    assert (asked.pages, asked.images, asked.ocr_mode, asked.ocr_dpi) == (
        "1-2",
        job_pb2.IMAGE_MODE_NONE,
        job_pb2.OCR_MODE_OFF,
        200,
    )


@pytest.mark.parametrize(
    ("mode", "stored"), [("none", []), ("referenced", [True, False]), ("all", [True, True])]
)
def test_each_image_mode_reaches_the_package(client: Client, mode: str, stored: list[bool]) -> None:
    job = client.parse(image_pdf(), images=mode)
    package = client.result(job.job_id)
    refs = [image for page in package.pages for image in page.images]
    assert [bool(image.asset_id) for image in refs] == stored
    for image in refs:
        if image.asset_id:
            asset, data = client.asset(job.job_id, image.asset_id)
            assert asset.mime_type == image.mime_type and len(data) == asset.size_bytes


def test_the_ocr_mode_reaches_the_parse(client: Client) -> None:
    off = client.parse(scan("en", dpi=150, seed=8).pdf, ocr_mode="off")
    package = client.result(off.job_id)
    assert not package.pages[0].ocr and package.pages[0].text == ""
    assert any("ocr_mode off" in warning for warning in package.warnings)
    forced = client.parse(make_pdf(1, "forced"), ocr_mode="force", ocr_dpi=200)
    page = client.result(forced.job_id).pages[0]
    assert page.ocr and "forced" in page.text


def test_a_page_past_the_end_is_refused_at_submit_naming_the_page_count(
    client: Client, stack: LocalStack
) -> None:
    err = refused(lambda: client.submit("short.pdf", make_pdf(3), pages="2-7"))
    assert err.code.name == "INVALID_ARGUMENT"
    assert err.reason == ErrorReason.PAGE_RANGE_PAST_END
    assert "page 7" in str(err) and "3 pages" in str(err)
    assert err.metadata["page_count"] == "3" and err.metadata["pages"] == "2-7"
    # An open end is never past it; the last page is not.
    assert client.parse(make_pdf(3), pages="3-").state == job_pb2.STATE_SUCCEEDED
    http = stack.http_addresses[0]
    reply = request(http, "POST", "/v1/jobs?file_name=s.pdf&pages=9", make_pdf(2))
    assert reply.status == 400 and b"PAGE_RANGE_PAST_END" in reply.body
    assert b"the document has 2 pages" in reply.body


def test_a_page_past_the_end_of_a_pdf_only_the_parse_can_count_fails_the_job(
    client: Client,
) -> None:
    # startxref points nowhere: mupdf repairs the file, the submit's reader does not.
    damaged = re.sub(rb"startxref\s+\d+", b"startxref\n7", make_pdf(3))
    answer = client.submit("damaged.pdf", damaged, pages="2-7")
    job = wait_terminal(client.target, answer.job.job_id)
    assert job.state == job_pb2.STATE_FAILED
    assert job.error.reason == ErrorReason.PAGE_RANGE_PAST_END
    assert "page 7" in job.error.message and "3 pages" in job.error.message


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"pages": "1-x"}, ErrorReason.INVALID_PAGE_RANGE),
        ({"pages": "0"}, ErrorReason.INVALID_PAGE_RANGE),
        ({"pages": "5-2"}, ErrorReason.INVALID_PAGE_RANGE),
        ({"ocr_dpi": 1000}, ErrorReason.INVALID_OCR_DPI),
        ({"ocr_dpi": 10}, ErrorReason.INVALID_OCR_DPI),
    ],
)
def test_bad_options_are_refused_at_submit(
    client: Client, options: dict[str, object], reason: ErrorReason
) -> None:
    err = refused(lambda: client.submit("x.pdf", make_pdf(1), **options))  # type: ignore[arg-type]
    assert err.reason == reason and err.code.name == "INVALID_ARGUMENT"


def test_pages_of_a_format_without_pages_are_refused(client: Client) -> None:
    document = docx.Document()
    document.add_paragraph("A paragraph of a Word document.")
    out = io.BytesIO()
    document.save(out)
    err = refused(lambda: client.submit("a.docx", out.getvalue(), pages="1"))
    assert err.reason == ErrorReason.PAGE_RANGE_NOT_SUPPORTED and "docx" in str(err)


def test_the_same_bytes_with_other_options_are_another_job(client: Client) -> None:
    content = make_pdf(120, "dedupe")
    first = client.submit("d.pdf", content).job
    joined = client.submit("d.pdf", content).job
    assert joined.job_id == first.job_id  # still running: the same options join it
    other = client.submit("d.pdf", content, pages="1-3").job
    assert other.job_id != first.job_id
    again = client.submit("d.pdf", content, pages="3,1-2").job
    assert again.job_id == other.job_id  # the same selection, spelled otherwise
    images = client.submit("d.pdf", content, images="none").job
    assert images.job_id not in {first.job_id, other.job_id}
    client.cancel(first.job_id)


def test_a_request_id_reused_with_other_options_is_refused(client: Client) -> None:
    content = make_pdf(2, "request")
    request_id = uuid.uuid4().hex
    first = client.submit("r.pdf", content, request_id=request_id, pages="1").job
    replay = client.submit("r.pdf", content, request_id=request_id, pages="1").job
    assert replay.job_id == first.job_id
    err = refused(lambda: client.submit("r.pdf", content, request_id=request_id, pages="2"))
    assert err.reason == ErrorReason.REQUEST_ID_REUSED
    assert "same content with other options" in str(err) and first.job_id in str(err)
    err = refused(lambda: client.submit("r.pdf", make_pdf(3), request_id=request_id, pages="1"))
    assert err.reason == ErrorReason.REQUEST_ID_REUSED and "other content" in str(err)


def test_http_takes_the_options_as_form_fields_and_in_the_url(stack: LocalStack) -> None:
    http = stack.http_addresses[0]
    body, headers = multipart(
        [("h.pdf", make_pdf(4, "http"))], {"pages": "2-3", "images": "none", "ocr_mode": "force"}
    )
    reply = request(http, "POST", "/v1/jobs", body, headers)
    assert reply.status == 202, reply.body
    job = json.loads(reply.body)
    assert job["pages"] == "2-3" and job["images"] == "IMAGE_MODE_NONE"
    assert job["ocr_mode"] == "OCR_MODE_FORCE"
    raw = request(http, "POST", "/v1/jobs?file_name=u.pdf&pages=1&ocr_dpi=96", make_pdf(2, "u"))
    assert raw.status == 202 and json.loads(raw.body)["ocr_dpi"] == 96
    bad = request(http, "POST", "/v1/jobs?file_name=b.pdf&images=some", make_pdf(1))
    assert bad.status == 400 and b"images must be one of none, referenced, all" in bad.body
    syntax = request(http, "POST", "/v1/jobs?file_name=b.pdf&pages=1-x", make_pdf(1))
    assert syntax.status == 400 and b"INVALID_PAGE_RANGE" in syntax.body


def test_the_cli_submits_with_the_options(stack: LocalStack, tmp_path: Path) -> None:
    document = tmp_path / "cli.pdf"
    document.write_bytes(make_pdf(4, "cli"))
    flags = ["--pages", "2-", "--images", "none", "--ocr", "off", "--ocr-dpi", "120"]
    target = ["--target", stack.gateway_addresses[0], "--server-wait", "60", "--json"]
    run = subprocess.run(
        [sys.executable, "-m", "docparse", "submit", str(document), *flags, *target],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    job = json.loads(run.stdout)
    assert job["state"] == "STATE_SUCCEEDED" and job["pages"] == "2-"
    assert job["images"] == "IMAGE_MODE_NONE" and job["ocr_mode"] == "OCR_MODE_OFF"
    assert job["ocr_dpi"] == 120 and job["result"]["page_count"] == 3
