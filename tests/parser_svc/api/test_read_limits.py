"""Per-tenant read limits (parser_svc/api/read_limits.py) through a stack with two tenants:
tenant A past its ListJobs rate is refused with RESOURCE_EXHAUSTED RATE_LIMITED and a
`retry_after_s` (HTTP 429 with Retry-After), while tenant B lists, and both still get GetStatus,
which is never limited. GetResult and GetAsset share their own bucket. The stack runs API
replicas only: the jobs stay QUEUED, nothing is parsed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc
import pytest

from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2
from docparse_server.tenancy import key_digest
from parser_svc.api.read_limits import ReadLimit
from tests.conftest import auth_env, make_stack
from tests.gateway.test_http import request
from tests.helpers import make_pdf, rpc_error, stub

TOKEN = "internal-secret-for-read-limits"
KEYS: dict[str, object] = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
    ]
}
A, B = (("x-api-key", "key-of-a"),), (("x-api-key", "key-of-b"),)
BURST = 5


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    env = {
        **auth_env(KEYS, TOKEN),
        "DOCPARSE_ROLE": "api",
        "DOCPARSE_LIST_JOBS_PER_S": "0.2",  # a token every 5 s: none comes back mid-test
        "DOCPARSE_LIST_JOBS_BURST": str(BURST),
        "DOCPARSE_RESULT_READS_PER_S": "0.2",
        "DOCPARSE_RESULT_READS_BURST": str(BURST),
    }
    with make_stack(
        tmp_path_factory.mktemp("read-limits"), replicas=1, gateways=1, extra_env=env
    ) as running:
        yield running


def test_a_flooding_list_jobs_is_limited_b_is_not(stack: LocalStack) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        job_a = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name="a.pdf", content=make_pdf(1, "a")),
            metadata=A,
            timeout=30,
        ).job
        listing = parser_service_pb2.ListJobsRequest()
        for _ in range(BURST):
            assert len(s.ListJobs(listing, metadata=A, timeout=10).jobs) == 1
        refused = rpc_error(lambda: s.ListJobs(listing, metadata=A, timeout=10))
        assert (refused.code, refused.reason) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "RATE_LIMITED",
        )
        assert refused.metadata["method"] == "ListJobs"
        assert refused.retry_after_s is not None and 1 <= refused.retry_after_s <= 5
        over_http = request(
            stack.http_addresses[0], "GET", "/v1/jobs", headers={"X-Api-Key": "key-of-a"}
        )
        assert over_http.status == 429 and over_http.json()["reason"] == "RATE_LIMITED"
        assert 1 <= int(over_http.headers["Retry-After"]) <= 5
        # B has a bucket of its own; GetStatus is never limited, for A either.
        assert not s.ListJobs(listing, metadata=B, timeout=10).jobs
        for _ in range(3 * BURST):
            status = s.GetStatus(
                parser_service_pb2.GetStatusRequest(job_id=job_a.job_id), metadata=A, timeout=10
            )
            assert status.job.job_id == job_a.job_id


def test_result_reads_have_their_own_bucket(stack: LocalStack) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name="b.pdf", content=make_pdf(1, "b")),
            metadata=B,
            timeout=30,
        ).job
        result = parser_service_pb2.GetResultRequest(job_id=job.job_id)
        reasons = [
            rpc_error(lambda: list(s.GetResult(result, metadata=B, timeout=10))).reason
            for _ in range(BURST + 1)
        ]
        # QUEUED: no result yet, until the bucket is empty
        assert reasons == ["RESULT_NOT_READY"] * BURST + ["RATE_LIMITED"]
        assert len(s.ListJobs(parser_service_pb2.ListJobsRequest(), metadata=B).jobs) == 1


def test_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    limit = ReadLimit("ListJobs", 2.0, 2, clock=lambda: now[0])
    limit.check("a")
    limit.check("a")
    with pytest.raises(DocparseError) as refused:
        limit.check("a")
    assert refused.value.reason == "RATE_LIMITED" and refused.value.retry_after_s == 1
    limit.check("b")
    now[0] = 0.5  # one token back
    limit.check("a")
    with pytest.raises(DocparseError):
        limit.check("a")


def test_a_call_whose_token_is_due_soon_waits_for_it_instead_of_being_refused() -> None:
    # The bucket's clock stands still: every call comes at the same instant, each promised
    # the next token (10 a second) while it is due within half a second; the 7th is not.
    limit = ReadLimit("ListJobs", 10.0, 1, clock=lambda: 0.0, max_wait_s=0.5)

    async def timed() -> float:
        started = time.monotonic()
        await limit.take("a")
        return time.monotonic() - started

    async def run() -> list[float | BaseException]:
        return await asyncio.gather(*(timed() for _ in range(7)), return_exceptions=True)

    *served, refused = asyncio.run(run())
    assert isinstance(refused, DocparseError) and refused.reason == "RATE_LIMITED"
    assert refused.retry_after_s == 1
    waits = [w for w in served if isinstance(w, float)]
    assert len(waits) == 6  # answered, each once its token was due: 0, 0.1, ... 0.5 s
    dues = [0, 0.1, 0.2, 0.3, 0.4, 0.5]
    assert all(w >= due - 0.005 for w, due in zip(sorted(waits), dues, strict=True))
    asyncio.run(limit.take("b"))  # another tenant's bucket: at once
