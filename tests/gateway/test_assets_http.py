"""Assets over HTTP (`GET /v1/jobs/{id}/assets/{asset_id}`, the list `GET /v1/jobs/{id}/assets`)
and CORS, on a stack that parses
and requires API keys: an image-bearing PDF's images download with their content type and
checksum (the ETag), revalidate with 304, come in byte ranges (206, 416), and are another
tenant's 404. CORS is configured for one origin: its preflights and answers carry the CORS
headers and its POSTs pass the cross-site check; any other origin gets none of that."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator

import pymupdf
import pytest
from PIL import Image

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from docparse_server.tenancy import key_digest
from tests import fixtures
from tests.conftest import auth_env, make_stack
from tests.fixtures import images
from tests.gateway.test_http import multipart, request
from tests.helpers import make_pdf, stub

TOKEN = "internal-secret-for-asset-tests"
KEYS = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
    ]
}
A = (("authorization", "Bearer key-of-a"),)
HTTP_A, HTTP_B = {"Authorization": "Bearer key-of-a"}, {"X-Api-Key": "key-of-b"}
ALLOWED, OTHER = "https://app.example.com", "https://evil.example.net"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    env = {
        **auth_env(KEYS, TOKEN),
        "DOCPARSE_GATEWAY_HTTP_CORS_ORIGINS": f"{ALLOWED}, http://localhost:3000",
        "DOCPARSE_GATEWAY_HTTP_CORS_MAX_AGE_S": "120",
    }
    with make_stack(
        tmp_path_factory.mktemp("assets"), replicas=1, gateways=1, extra_env=env
    ) as running:
        yield running


@pytest.fixture(scope="module")
def parsed(stack: LocalStack) -> tuple[str, list[reading_package_pb2.Asset]]:
    """A SUCCEEDED job of tenant A with at least one image, and its package's assets."""
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name="table.pdf",
                content=fixtures.pdf_with_table_and_image(),
                wait_timeout_ms=60_000,
            ),
            metadata=A,
            timeout=90,
        ).job
        if job.state != job_pb2.STATE_SUCCEEDED:
            request_ = parser_service_pb2.WatchJobRequest(job_id=job.job_id)
            job = [e.job for e in s.WatchJob(request_, metadata=A, timeout=90) if e.job.job_id][-1]
        assert job.state == job_pb2.STATE_SUCCEEDED, job
        data = b"".join(
            m.chunk
            for m in s.GetResult(
                parser_service_pb2.GetResultRequest(job_id=job.job_id), metadata=A, timeout=30
            )
        )
    package = reading_package_pb2.ReadingPackage.FromString(data)
    assert package.assets
    return job.job_id, list(package.assets)


def test_images_download_with_type_checksum_and_cache_headers(
    stack: LocalStack, parsed: tuple[str, list[reading_package_pb2.Asset]]
) -> None:
    address = stack.http_addresses[0]
    job_id, assets = parsed
    # What the upload page's "Images" button reads (tests/gateway/test_browser_images.py presses
    # it):
    # the JSON result's assets by id.
    listed = request(address, "GET", f"/v1/jobs/{job_id}/result", headers=HTTP_A).json()
    assert [a["asset_id"] for a in listed["assets"]] == [a.asset_id for a in assets]
    for asset in assets:
        path = f"/v1/jobs/{job_id}/assets/{asset.asset_id}"
        reply = request(address, "GET", path, headers=HTTP_A)
        assert reply.status == 200, reply.body
        assert reply.headers["Content-Type"] == asset.mime_type
        assert asset.mime_type.startswith("image/")
        assert hashlib.sha256(reply.body).hexdigest() == asset.sha256
        assert reply.headers["ETag"] == f'"{asset.sha256}"'
        assert reply.headers["Cache-Control"].startswith("private")
        assert reply.headers["Accept-Ranges"] == "bytes"
        assert int(reply.headers["Content-Length"]) == len(reply.body) == asset.size_bytes
        # A link or <img> carries the key in the URL.
        linked = request(address, "GET", f"{path}?access_token=key-of-a")
        assert linked.status == 200 and linked.body == reply.body
        head = request(address, "HEAD", path, headers=HTTP_A)
        assert head.status == 200 and head.body == b""
        assert head.headers["Content-Length"] == str(asset.size_bytes)


def test_revalidation_and_ranges(
    stack: LocalStack, parsed: tuple[str, list[reading_package_pb2.Asset]]
) -> None:
    address = stack.http_addresses[0]
    job_id, (asset, *_) = parsed
    path = f"/v1/jobs/{job_id}/assets/{asset.asset_id}"
    whole = request(address, "GET", path, headers=HTTP_A).body
    etag, size = f'"{asset.sha256}"', len(whole)
    assert size > 20

    cached = request(address, "GET", path, headers={**HTTP_A, "If-None-Match": etag})
    assert (cached.status, cached.body, cached.headers["ETag"]) == (304, b"", etag)
    stale = request(address, "GET", path, headers={**HTTP_A, "If-None-Match": '"other"'})
    assert stale.status == 200 and stale.body == whole

    ranges = {
        "bytes=0-9": (0, 9),
        "bytes=10-": (10, size - 1),
        "bytes=-5": (size - 5, size - 1),
        f"bytes=5-{size + 100}": (5, size - 1),
    }
    for header, (first, last) in ranges.items():
        part = request(address, "GET", path, headers={**HTTP_A, "Range": header})
        assert part.status == 206, header
        assert part.body == whole[first : last + 1], header
        assert part.headers["Content-Range"] == f"bytes {first}-{last}/{size}"
    beyond = request(address, "GET", path, headers={**HTTP_A, "Range": f"bytes={size}-"})
    assert beyond.status == 416 and beyond.headers["Content-Range"] == f"bytes */{size}"
    assert beyond.json()["reason"] == "RANGE_NOT_SATISFIABLE"
    # Several ranges, or an If-Range that names another version: the whole asset.
    for headers in ({"Range": "bytes=0-1,4-5"}, {"Range": "bytes=0-1", "If-Range": '"x"'}):
        full = request(address, "GET", path, headers={**HTTP_A, **headers})
        assert full.status == 200 and full.body == whole


def test_other_tenants_and_unknown_assets(
    stack: LocalStack, parsed: tuple[str, list[reading_package_pb2.Asset]]
) -> None:
    address = stack.http_addresses[0]
    job_id, (asset, *_) = parsed
    cases = {
        (f"/v1/jobs/{job_id}/assets/{asset.asset_id}", "b"): (404, "JOB_NOT_FOUND"),
        (f"/v1/jobs/{'0' * 32}/assets/{asset.asset_id}", "a"): (404, "JOB_NOT_FOUND"),
        (f"/v1/jobs/{job_id}/assets/{'0' * 32}.png", "a"): (404, "ASSET_NOT_FOUND"),
        (f"/v1/jobs/{job_id}/assets/..%2F..%2Fetc%2Fpasswd", "a"): (400, "INVALID_ASSET_ID"),
        (f"/v1/jobs/{job_id}/assets/{asset.asset_id}", ""): (401, "API_KEY_MISSING"),
    }
    keys = {"a": HTTP_A, "b": HTTP_B, "": {}}
    for (path, who), (status, reason) in cases.items():
        reply = request(address, "GET", path, headers=keys[who])
        assert (reply.status, reply.json()["reason"]) == (status, reason), (path, who)


def test_cors_for_the_configured_origin_only(
    stack: LocalStack, parsed: tuple[str, list[reading_package_pb2.Asset]]
) -> None:
    address = stack.http_addresses[0]
    job_id, (asset, *_) = parsed
    asked = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-api-key"}
    ok = request(address, "OPTIONS", "/v1/jobs", headers={"Origin": ALLOWED, **asked})
    assert ok.status == 204
    assert ok.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert "POST" in ok.headers["Access-Control-Allow-Methods"]
    assert "X-Api-Key" in ok.headers["Access-Control-Allow-Headers"]
    assert ok.headers["Access-Control-Max-Age"] == "120"
    assert "Origin" in ok.headers["Vary"]
    refused = request(address, "OPTIONS", "/v1/jobs", headers={"Origin": OTHER, **asked})
    assert refused.status == 403 and refused.json()["reason"] == "CORS_NOT_ALLOWED"
    assert "Access-Control-Allow-Origin" not in refused.headers
    wrong_method = request(
        address,
        "OPTIONS",
        f"/v1/jobs/{job_id}",
        headers={"Origin": ALLOWED, "Access-Control-Request-Method": "DELETE"},
    )
    assert wrong_method.status == 403

    # Answers (errors too) to the allowed origin carry the headers a page may read.
    path = f"/v1/jobs/{job_id}/assets/{asset.asset_id}"
    got = request(address, "GET", path, headers={**HTTP_A, "Origin": ALLOWED})
    assert got.status == 200 and got.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert "ETag" in got.headers["Access-Control-Expose-Headers"]
    missing = request(address, "GET", path, headers={**HTTP_B, "Origin": ALLOWED})
    assert missing.status == 404 and missing.headers["Access-Control-Allow-Origin"] == ALLOWED
    other = request(address, "GET", path, headers={**HTTP_A, "Origin": OTHER})
    assert other.status == 200 and "Access-Control-Allow-Origin" not in other.headers

    # A page of the allowed origin may submit; another site's page may not.
    body, headers = multipart([("memo.pdf", fixtures.pdf_with_table_and_image())])
    browser = {"Sec-Fetch-Site": "cross-site", **HTTP_A, **headers}
    posted = request(address, "POST", "/v1/jobs", body, {**browser, "Origin": ALLOWED})
    assert posted.status in (200, 202), posted.body
    assert posted.headers["Access-Control-Allow-Origin"] == ALLOWED
    foreign = request(address, "POST", "/v1/jobs", body, {**browser, "Origin": OTHER})
    assert (foreign.status, foreign.json()["reason"]) == (403, "CROSS_SITE_REQUEST")


def _succeeded(stack: LocalStack, file_name: str, content: bytes) -> job_pb2.Job:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        request_ = parser_service_pb2.SubmitJobRequest(
            file_name=file_name, content=content, wait_timeout_ms=60_000
        )
        job = s.SubmitJob(request_, metadata=A, timeout=90).job
        if job.state in (job_pb2.STATE_QUEUED, job_pb2.STATE_RUNNING):
            watch = parser_service_pb2.WatchJobRequest(job_id=job.job_id)
            job = [e.job for e in s.WatchJob(watch, metadata=A, timeout=90) if e.job.job_id][-1]
    return job


def _photos_pdf() -> bytes:
    """Page 1 text; page 2 photo one, page 3 photo two, page 4 photo one again."""
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Text before the photographs.", fontsize=12)
    for seed in (1, 2, 1):
        jpeg = io.BytesIO()
        Image.fromarray(images.photo(320, 240, seed)).save(jpeg, "JPEG", quality=85)
        page = doc.new_page()
        page.insert_text((72, 72), f"Photograph {seed}.", fontsize=12)
        page.insert_image(pymupdf.Rect(72, 100, 392, 340), stream=jpeg.getvalue())
    data: bytes = doc.tobytes(deflate=True)
    return data


def test_the_asset_list_names_each_asset_its_page_and_url(stack: LocalStack) -> None:
    address = stack.http_addresses[0]
    job = _succeeded(stack, "photos.pdf", _photos_pdf())
    assert job.state == job_pb2.STATE_SUCCEEDED, job
    result = request(address, "GET", f"/v1/jobs/{job.job_id}/result", headers=HTTP_A)
    listed = request(address, "GET", f"/v1/jobs/{job.job_id}/assets", headers=HTTP_A)
    assert listed.status == 200, listed.body
    assert listed.headers["ETag"] == result.headers["ETag"]
    body = listed.json()
    assert body["job_id"] == job.job_id
    records = body["assets"]
    # The package's Asset records as /result has them, each with its page and URL.
    assert [{k: r[k] for k in r if k not in ("page", "url")} for r in records] == (
        result.json()["assets"]
    )
    shown: dict[str, int] = {}
    for page in result.json()["pages"]:
        for image in page["images"]:
            shown.setdefault(image["asset_id"], page["number"])
    assert {r["asset_id"]: r["page"] for r in records} == shown  # where each is first shown
    assert sorted(shown.values()) == [2, 3]  # photo one from page 2 on, photo two on page 3
    for record in records:
        assert record["url"] == f"/v1/jobs/{job.job_id}/assets/{record['asset_id']}"
        got = request(address, "GET", record["url"], headers=HTTP_A)
        assert got.status == 200 and got.headers["Content-Type"] == record["mime_type"]
        assert hashlib.sha256(got.body).hexdigest() == record["sha256"]
        assert len(got.body) == int(record["size_bytes"])
    linked = request(address, "GET", f"/v1/jobs/{job.job_id}/assets?access_token=key-of-a")
    assert linked.status == 200 and linked.json() == body

    # A document without images lists none.
    plain = _succeeded(stack, "plain.pdf", make_pdf(2))
    empty = request(address, "GET", f"/v1/jobs/{plain.job_id}/assets", headers=HTTP_A)
    assert (empty.status, empty.json()["assets"]) == (200, [])


def test_the_asset_list_answers_as_the_result_does(
    stack: LocalStack, parsed: tuple[str, list[reading_package_pb2.Asset]]
) -> None:
    address = stack.http_addresses[0]
    job_id, _ = parsed
    broken = _succeeded(stack, "broken.pdf", b"%PDF-1.7 truncated")
    assert broken.state == job_pb2.STATE_FAILED
    cases = {
        (job_id, "b"): (404, "JOB_NOT_FOUND"),  # another tenant's job: as if unknown
        ("0" * 32, "a"): (404, "JOB_NOT_FOUND"),
        (job_id, ""): (401, "API_KEY_MISSING"),
        (broken.job_id, "a"): None,  # whatever /result answers for a failed job
    }
    keys = {"a": HTTP_A, "b": HTTP_B, "": {}}
    for (job, who), expected in cases.items():
        listed = request(address, "GET", f"/v1/jobs/{job}/assets", headers=keys[who])
        result = request(address, "GET", f"/v1/jobs/{job}/result", headers=keys[who])
        answer = (listed.status, listed.json()["reason"])
        assert answer == (result.status, result.json()["reason"]), (job, who)
        assert answer == (expected or answer), (job, who)
        assert listed.status >= 400
