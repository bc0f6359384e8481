"""ListJobs through the gateway, as two tenants with their own API keys: over gRPC and over
HTTP (`GET /v1/jobs`), 250 jobs of one tenant in pages of 100 without a job of the other, and
page tokens that only work for the tenant and filters they were made for. The stack runs API
replicas only (DOCPARSE_ROLE=api): the jobs stay QUEUED, nothing is parsed, listing is all
this exercises. CORS is off here (the default): no CORS headers, a preflight is refused."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.tenancy import key_digest
from tests.conftest import auth_env, make_stack
from tests.gateway.test_http import request
from tests.helpers import make_pdf, rpc_error, stub

TOKEN = "internal-secret-for-listing-tests"
KEYS = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
    ]
}
A, B = (("authorization", "Bearer key-of-a"),), (("x-api-key", "key-of-b"),)
HTTP_A, HTTP_B = {"Authorization": "Bearer key-of-a"}, {"X-Api-Key": "key-of-b"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("listing"),
        replicas=2,
        gateways=1,
        extra_env={**auth_env(KEYS, TOKEN), "DOCPARSE_ROLE": "api"},
    ) as running:
        yield running


@pytest.fixture(scope="module")
def jobs(stack: LocalStack) -> dict[str, set[str]]:
    """250 jobs of tenant A and 20 of tenant B, submitted through the gateway."""
    channel, s = stub(stack.gateway_addresses[0])

    def submit(args: tuple[int, tuple[tuple[str, str], ...]]) -> str:
        i, key = args
        request = parser_service_pb2.SubmitJobRequest(
            file_name=f"doc-{i}.pdf", content=make_pdf(1, f"document {i} of {key[0][1]}")
        )
        return str(s.SubmitJob(request, metadata=key, timeout=30).job.job_id)

    with channel, ThreadPoolExecutor(8) as pool:
        ours = set(pool.map(submit, [(i, A) for i in range(250)]))
        theirs = set(pool.map(submit, [(i, B) for i in range(20)]))
    assert len(ours) == 250 and len(theirs) == 20
    return {"a": ours, "b": theirs}


def test_grpc_pages_of_100_show_one_tenants_jobs(
    stack: LocalStack, jobs: dict[str, set[str]]
) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        pages: list[list[job_pb2.Job]] = []
        token = ""
        while True:
            reply = s.ListJobs(
                parser_service_pb2.ListJobsRequest(page_size=100, page_token=token),
                metadata=A,
                timeout=10,
            )
            pages.append(list(reply.jobs))
            token = reply.next_page_token
            if not token:
                break
        listed = [job for page in pages for job in page]
        assert [len(page) for page in pages] == [100, 100, 50]
        assert [job.job_id for job in listed if job.job_id in jobs["a"]] == [
            job.job_id for job in listed
        ]
        assert {job.job_id for job in listed} == jobs["a"]
        order = [(job.create_time.ToMilliseconds(), job.job_id) for job in listed]
        assert order == sorted(order, reverse=True)  # newest first
        first = s.ListJobs(parser_service_pb2.ListJobsRequest(page_size=100), metadata=A)
        # Tenant B cannot go on with tenant A's token, and sees its own 20 only.
        stolen = rpc_error(
            lambda: s.ListJobs(
                parser_service_pb2.ListJobsRequest(page_token=first.next_page_token),
                metadata=B,
                timeout=10,
            )
        )
        assert (stolen.code, stolen.reason) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_PAGE_TOKEN",
        )
        own = s.ListJobs(parser_service_pb2.ListJobsRequest(), metadata=B, timeout=10)
        assert {job.job_id for job in own.jobs} == jobs["b"] and not own.next_page_token
        anonymous = rpc_error(lambda: s.ListJobs(parser_service_pb2.ListJobsRequest(), timeout=5))
        assert anonymous.code == grpc.StatusCode.UNAUTHENTICATED


def http_pages(address: str, headers: dict[str, str], **params: str) -> list[list[Any]]:
    pages = []
    token = ""
    while True:
        query = urllib.parse.urlencode({**params, **({"page_token": token} if token else {})})
        reply = request(address, "GET", f"/v1/jobs?{query}", headers=headers)
        assert reply.status == 200, reply.body
        assert reply.headers["Cache-Control"] == "no-store"
        body = reply.json()
        pages.append(body["jobs"])
        token = body["next_page_token"]
        if not token:
            return pages


def test_http_pages_filters_and_errors(stack: LocalStack, jobs: dict[str, set[str]]) -> None:
    address = stack.http_addresses[0]
    pages = http_pages(address, HTTP_A, page_size="100")
    assert [len(page) for page in pages] == [100, 100, 50]
    assert {job["job_id"] for page in pages for job in page} == jobs["a"]
    assert all(job["state"] == "STATE_QUEUED" for page in pages for job in page)
    queued = http_pages(address, HTTP_B, state="queued,STATE_RUNNING")
    assert {job["job_id"] for page in queued for job in page} == jobs["b"]
    assert http_pages(address, HTTP_B, state="STATE_SUCCEEDED") == [[]]

    first = request(address, "GET", "/v1/jobs?page_size=10", headers=HTTP_A).json()
    token = urllib.parse.quote(first["next_page_token"])
    cases = {
        f"/v1/jobs?page_token={token}": (HTTP_B, 400, "INVALID_PAGE_TOKEN"),
        f"/v1/jobs?page_token={token}&state=failed": (HTTP_A, 400, "INVALID_PAGE_TOKEN"),
        "/v1/jobs?page_token=AAAA": (HTTP_A, 400, "INVALID_PAGE_TOKEN"),
        "/v1/jobs?state=finished": (HTTP_A, 400, "INVALID_STATE"),
        "/v1/jobs?page_size=-1": (HTTP_A, 400, "INVALID_PAGE_SIZE"),
        "/v1/jobs?page_size=99999999999": (HTTP_A, 400, "INVALID_PAGE_SIZE"),
        "/v1/jobs?batch_id=nosuchbatch": (HTTP_A, 404, "BATCH_NOT_FOUND"),
        "/v1/jobs?batch_id=not%2Fan%2Fid": (HTTP_A, 400, "INVALID_JOB_ID"),
        "/v1/jobs": ({}, 401, "API_KEY_MISSING"),
    }
    for path, (headers, status, reason) in cases.items():
        reply = request(address, "GET", path, headers=headers)
        assert (reply.status, reply.json()["reason"]) == (status, reason), path
    page = request(address, "GET", f"/v1/jobs?page_token={token}", headers=HTTP_A).json()
    assert len(page["jobs"]) == 50  # the default page size, from where the first page ended
    seen = {job["job_id"] for job in first["jobs"]}
    assert not seen & {job["job_id"] for job in page["jobs"]}


def test_http_batch_filter(stack: LocalStack) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        files = [
            parser_service_pb2.BatchFile(file_name=f"f{i}.pdf", content=make_pdf(1, f"f{i}"))
            for i in range(3)
        ]
        batch = s.CreateBatch(
            parser_service_pb2.CreateBatchRequest(files=files), metadata=A, timeout=30
        ).batch
    address = stack.http_addresses[0]
    pages = http_pages(address, HTTP_A, batch_id=batch.batch_id, page_size="2")
    listed = [job["job_id"] for page in pages for job in page]
    assert sorted(listed) == sorted(job.job_id for job in batch.jobs)
    other = request(address, "GET", f"/v1/jobs?batch_id={batch.batch_id}", headers=HTTP_B)
    assert (other.status, other.json()["reason"]) == (404, "BATCH_NOT_FOUND")


def test_cors_is_off_by_default(stack: LocalStack, jobs: dict[str, set[str]]) -> None:
    address = stack.http_addresses[0]
    origin = {"Origin": "https://app.example.com"}
    preflight = request(
        address,
        "OPTIONS",
        "/v1/jobs",
        headers={**origin, "Access-Control-Request-Method": "GET"},
    )
    assert (preflight.status, preflight.json()["reason"]) == (403, "CORS_NOT_ALLOWED")
    reply = request(address, "GET", "/v1/jobs?page_size=1", headers={**HTTP_A, **origin})
    assert reply.status == 200 and "Access-Control-Allow-Origin" not in reply.headers
    assert json.loads(reply.body)["jobs"]
