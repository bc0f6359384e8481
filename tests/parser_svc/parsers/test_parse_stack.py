"""Every format through a real running stack (gateway → parser_svc → queue → parse child →
result and assets in the blob store), checking the downloaded package's content."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import redis

from docparse.client import Client
from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from parser_svc.parsers.doc import antiword_path
from parser_svc.work.blobs import BlobStore
from tests import fixtures
from tests.conftest import make_stack
from tests.helpers import make_pdf, rpc_error, stub, wait_terminal

PASSWORD = "correct horse \u2163"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = make_stack(
        tmp_path_factory.mktemp("parse-stack"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_PARSE_MAX_UNZIPPED_MB": "64"},
    )
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def big_xlsx(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.getbasetemp() / "big-1M.xlsx"
    if not path.exists():
        fixtures.big_xlsx(path)
    return path.read_bytes()


def submit(address: str, content: bytes, name: str, password: str = "") -> job_pb2.Job:
    channel, s = stub(address)
    with channel:
        return s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name=name, content=content, password=password),
            timeout=30,
        ).job


def parse(
    stack: LocalStack, content: bytes, name: str, password: str = ""
) -> tuple[job_pb2.Job, reading_package_pb2.ReadingPackage | None]:
    address = stack.gateway_addresses[0]
    job = wait_terminal(address, submit(address, content, name, password).job_id)
    if job.state != job_pb2.STATE_SUCCEEDED:
        return job, None
    with Client(address) as client:
        return job, client.result(job.job_id)


def get_asset(
    address: str, job_id: str, asset_id: str, deployment: str = ""
) -> tuple[reading_package_pb2.Asset, bytes]:
    channel, s = stub(address)
    with channel:
        asset = reading_package_pb2.Asset()
        chunks = []
        for message in s.GetAsset(
            parser_service_pb2.GetAssetRequest(
                job_id=job_id, asset_id=asset_id, deployment=deployment
            ),
            timeout=30,
        ):
            if message.HasField("asset"):
                asset.CopyFrom(message.asset)
            chunks.append(message.chunk)
        return asset, b"".join(chunks)


def test_text_pdf(stack: LocalStack) -> None:
    job, package = parse(stack, make_pdf(5, "stacked"), "five.pdf")
    assert job.state == job_pb2.STATE_SUCCEEDED and package is not None
    assert job.content_type == "pdf" and job.result.page_count == 5
    assert job.result.char_count == sum(len(p.text) for p in package.pages) > 0
    assert package.pages[4].text.startswith("stacked 5 of 5")
    assert package.parser_version.startswith("docparse ")


def test_scanned_pdf_reports_the_ocr_stage_and_finds_the_text(stack: LocalStack) -> None:
    address = stack.gateway_addresses[0]
    job = submit(address, fixtures.mixed_pdf(), "scan.pdf")
    stages = []
    channel, s = stub(address)
    with channel:
        for event in s.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job.job_id), timeout=120):
            if event.HasField("job"):
                stages.append((event.job.progress.done, event.job.progress.stage))
                last = event.job
    assert last.state == job_pb2.STATE_SUCCEEDED
    assert (1, "ocr") in stages, stages
    with Client(address) as client:
        package = client.result(job.job_id)
    assert [p.ocr for p in package.pages] == [False, True, False]
    assert "overdue" in package.pages[1].text


def test_docx_with_image_asset_download(stack: LocalStack) -> None:
    job, package = parse(stack, fixtures.docx_full(), "report.docx")
    assert package is not None and "northern plant" in package.pages[0].text
    asset_ref = package.assets[0]
    assert (asset_ref.deployment, asset_ref.job_id) == ("test", job.job_id)
    # Any replica or gateway serves it; the bytes are the picture that went in.
    asset, data = get_asset(stack.gateway_addresses[0], job.job_id, asset_ref.asset_id, "test")
    assert data == fixtures.PNG
    assert asset.sha256 == hashlib.sha256(data).hexdigest() == asset_ref.sha256
    assert asset.mime_type == "image/png" and asset.size_bytes == len(data)
    address = stack.parser_addresses[0]
    other = rpc_error(lambda: get_asset(address, job.job_id, asset_ref.asset_id, "prod"))
    assert (other.code, other.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "ASSET_OTHER_DEPLOYMENT",
    )
    missing = rpc_error(lambda: get_asset(address, job.job_id, "0" * 32 + ".png"))
    assert (missing.code, missing.reason) == (grpc.StatusCode.NOT_FOUND, "ASSET_NOT_FOUND")
    bad = rpc_error(lambda: get_asset(address, job.job_id, "../../etc/passwd"))
    assert bad.reason == "INVALID_ASSET_ID"


def test_xlsx_typed_cells_1904(stack: LocalStack) -> None:
    _job, package = parse(stack, fixtures.xlsx_typed(date1904=True), "book.xlsx")
    assert package is not None and package.date_system == "1904"
    row = package.sheets[0].rows[1]
    assert row.cells[4].datetime_value == "2024-02-29T13:45:00"
    assert row.cells[1].number_value == 42 and row.cells[3].bool_value


def test_million_cell_xlsx(stack: LocalStack, big_xlsx: bytes) -> None:
    job, package = parse(stack, big_xlsx, "big.xlsx")
    assert job.state == job_pb2.STATE_SUCCEEDED, job.error
    assert job.result.storage == job_pb2.RESULT_STORAGE_BLOB
    assert package is not None
    sheet = package.sheets[0]
    assert sheet.cell_count == 1_000_000 and len(sheet.rows) == 50_000
    last = sheet.rows[-1]
    assert last.number == 50_000 and last.cells[0].string_value == "row 50000"
    assert last.cells[19].number_value == 50_000 * 20 + 19


def test_pptx(stack: LocalStack) -> None:
    job, package = parse(stack, fixtures.pptx_full(), "deck.pptx")
    assert package is not None and job.result.page_count == 2
    assert package.slides[0].notes == "Mention the hiring plan"
    assert package.slides[0].tables[0].rows[1].cells[0] == "Beta"


def test_doc(stack: LocalStack) -> None:
    job, package = parse(stack, fixtures.minimal_doc("Board minutes, generated"), "minutes.doc")
    if antiword_path() is None:
        assert (job.state, job.error.reason) == (job_pb2.STATE_FAILED, "UNSUPPORTED_FORMAT")
        assert "antiword" in job.error.message
    else:
        assert package is not None and "Board minutes, generated" in package.pages[0].text


def test_encrypted_xlsx_with_password_never_stored(stack: LocalStack) -> None:
    data = fixtures.encrypt_ooxml(fixtures.xlsx_typed(), "IV")
    job, _ = parse(stack, data, "locked.xlsx")
    assert (job.state, job.error.reason) == (job_pb2.STATE_FAILED, "PASSWORD_REQUIRED")
    job, _ = parse(stack, data, "locked.xlsx", password="wrong")
    assert job.error.reason == "WRONG_PASSWORD"
    # Submitted un-normalised: SASLprep maps U+2163 to "IV".
    job, package = parse(stack, data, "locked.xlsx", password="\u2163")
    assert package is not None and package.decrypted
    assert package.sheets[0].rows[1].cells[0].string_value == "widget"
    job, package = parse(stack, fixtures.encrypted_pdf(PASSWORD), "locked.pdf", PASSWORD)
    assert package is not None and "merger memo" in package.pages[0].text
    # The password is in no Redis key or value, no log line, and its side file is gone.
    client = redis.Redis.from_url(stack.redis_url)
    needle = PASSWORD.encode()
    for key in client.scan_iter(count=1000):
        assert needle not in key
        kind = client.type(key)
        if kind == b"hash":
            assert not any(needle in v for v in client.hgetall(key).values())
        elif kind == b"string":
            assert needle not in (client.get(key) or b"")
    for log in (stack.data_dir / "logs").glob("*.log"):
        assert PASSWORD not in log.read_text(errors="replace")
    assert not list((stack.data_dir / "blobs").rglob("*.secret"))


def test_secret_side_file_is_owner_only(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path, "test")
    key = blobs.put_secret("job1", "pw")
    mode = stat.S_IMODE(os.stat(blobs.path(key)).st_mode)
    assert mode == 0o600 and blobs.read_secret("job1") == "pw"
    blobs.delete_secret("job1")
    assert blobs.read_secret("job1") == ""


def test_zip_bomb_and_corrupt_files_fail_precisely(stack: LocalStack) -> None:
    job, _ = parse(stack, fixtures.zip_bomb_xlsx(100), "bomb.xlsx")
    assert (job.state, job.error.reason) == (job_pb2.STATE_FAILED, "DOCUMENT_TOO_LARGE")
    job, _ = parse(stack, fixtures.zero_page_pdf(), "empty.pdf")
    assert job.error.reason == "CORRUPT_DOCUMENT"
    job, _ = parse(stack, fixtures.truncated(fixtures.pptx_full(), 0.4), "cut.pptx")
    assert (job.content_type, job.error.reason) == ("pptx", "CORRUPT_DOCUMENT")
    job, _ = parse(stack, fixtures.strict_xlsx(), "strict.xlsx")
    assert job.error.reason == "UNSUPPORTED_FORMAT" and "Strict" in job.error.message


def test_renamed_files_are_detected_by_content(stack: LocalStack) -> None:
    job, package = parse(stack, fixtures.docx_full(), "actually-a-word-file.pdf")
    assert job.content_type == "docx" and package is not None
    address = stack.gateway_addresses[0]
    err = rpc_error(lambda: submit(address, fixtures.wordperfect(), "letter.doc"))
    assert (err.code, err.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "UNSUPPORTED_FORMAT")
    assert "WordPerfect" in err.message
    err = rpc_error(lambda: submit(address, b"7z\xbc\xaf\x27\x1c" + bytes(26), "scan.pdf"))
    assert err.reason == "UNSUPPORTED_FORMAT" and "7-Zip archive" in err.message
    assert isinstance(err, DocparseError)
