"""The SDK's listing (docparse.listing) against a real stack, as two tenants with their own API
keys: `list_jobs` pages with their filters, `iter_job_pages` and `iter_jobs` go through every
page (a `limit` stops them, the last token going on right after), the asyncio client lists
the same, nothing of the other tenant shows, and a bad token is the usual DocparseError. The
replicas only serve the API (DOCPARSE_ROLE=api): jobs stay QUEUED, listing is what runs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import grpc
import pytest

from docparse.aio import AsyncClient
from docparse.client import Client
from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2
from docparse_server.tenancy import key_digest
from tests.conftest import auth_env, make_stack
from tests.helpers import make_pdf

TOKEN = "internal-secret-for-sdk-listing-tests"
KEYS = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
    ]
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("sdk-listing"),
        replicas=1,
        gateways=1,
        extra_env={**auth_env(KEYS, TOKEN), "DOCPARSE_ROLE": "api"},
    ) as running:
        yield running


@pytest.fixture(scope="module")
def jobs(stack: LocalStack) -> dict[str, list[str]]:
    """Tenant A: 7 single jobs, then a batch of 3; tenant B: 2 jobs. Ids newest first."""
    target = stack.gateway_addresses[0]
    with Client(target, api_key="key-of-a") as a, Client(target, api_key="key-of-b") as b:
        singles = [a.submit(f"a{i}.pdf", make_pdf(1, f"a {i}")).job.job_id for i in range(7)]
        batch = a.submit_batch([(f"b{i}.pdf", make_pdf(1, f"b {i}")) for i in range(3)])
        theirs = [b.submit(f"x{i}.pdf", make_pdf(1, f"x {i}")).job.job_id for i in range(2)]
    return {
        "a": [j.job_id for j in batch.jobs][::-1] + singles[::-1],
        "batch": [batch.batch_id],
        "b": theirs[::-1],
    }


def test_pages_filters_and_limits(stack: LocalStack, jobs: dict[str, list[str]]) -> None:
    with Client(stack.gateway_addresses[0], api_key="key-of-a") as client:
        everything = [j.job_id for j in client.iter_jobs()]
        assert set(everything) == set(jobs["a"]) and len(everything) == 10
        assert everything[3:] == jobs["a"][3:]  # the singles, newest first

        pages = list(client.iter_job_pages(page_size=3))
        assert [len(p.jobs) for p in pages] == [3, 3, 3, 1]
        assert [j.job_id for p in pages for j in p.jobs] == everything
        assert not pages[-1].next_page_token and all(p.next_page_token for p in pages[:-1])

        first = client.list_jobs(page_size=4)
        assert [j.job_id for j in first.jobs] == everything[:4]
        rest = client.iter_jobs(page_token=first.next_page_token, page_size=2)
        assert [j.job_id for j in rest] == everything[4:]

        # A limit: no page asks for more than is left, so the last token goes on after them.
        limited = list(client.iter_job_pages(page_size=4, limit=6))
        assert [len(p.jobs) for p in limited] == [4, 2]
        after = client.list_jobs(page_token=limited[-1].next_page_token, page_size=50)
        assert [j.job_id for j in after.jobs] == everything[6:]
        assert [j.job_id for j in client.iter_jobs(limit=5)] == everything[:5]

        in_batch = client.iter_jobs(batch_id=jobs["batch"][0])
        assert sorted(j.job_id for j in in_batch) == sorted(jobs["a"][:3])
        assert not list(client.iter_jobs(states=[job_pb2.STATE_RUNNING, job_pb2.STATE_FAILED]))
        queued = client.list_jobs(states=[job_pb2.STATE_QUEUED], page_size=500)
        assert [j.job_id for j in queued.jobs] == everything


def test_the_other_tenant_sees_only_its_jobs(stack: LocalStack, jobs: dict[str, list[str]]) -> None:
    with Client(stack.gateway_addresses[0], api_key="key-of-b") as client:
        assert [j.job_id for j in client.iter_jobs(page_size=1)] == jobs["b"]
        with pytest.raises(DocparseError) as hidden:
            client.list_jobs(batch_id=jobs["batch"][0])  # A's batch: as if it did not exist
        assert (hidden.value.code, hidden.value.reason) == (
            grpc.StatusCode.NOT_FOUND,
            "BATCH_NOT_FOUND",
        )


def test_async_client_lists_the_same(stack: LocalStack, jobs: dict[str, list[str]]) -> None:
    async def run() -> tuple[list[str], list[int], str]:
        async with AsyncClient(stack.gateway_addresses[0], api_key="key-of-a") as client:
            ids = [job.job_id async for job in client.iter_jobs(page_size=3)]
            sizes = [len(p.jobs) async for p in client.iter_job_pages(page_size=4, limit=9)]
            page = await client.list_jobs(page_size=2)
            return ids, sizes, page.jobs[1].job_id

    ids, sizes, second = asyncio.run(run())
    with Client(stack.gateway_addresses[0], api_key="key-of-a") as client:
        assert ids == [j.job_id for j in client.iter_jobs()]
    assert sizes == [4, 4, 1] and second == ids[1]


def test_bad_token_and_missing_key_are_the_usual_errors(
    stack: LocalStack, jobs: dict[str, list[str]]
) -> None:
    target = stack.gateway_addresses[0]
    with Client(target, api_key="key-of-a") as a, Client(target, api_key="key-of-b") as b:
        token = a.list_jobs(page_size=2).next_page_token
        for call in (
            lambda: b.list_jobs(page_token=token),  # another tenant's token
            lambda: list(a.iter_jobs(page_token="not a token")),
            lambda: a.list_jobs(page_token=token, states=[job_pb2.STATE_FAILED]),  # filters
        ):
            with pytest.raises(DocparseError) as refused:
                call()
            assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.value.reason == "INVALID_PAGE_TOKEN"
    with Client(target, api_key="") as nobody, pytest.raises(DocparseError) as unknown:
        list(nobody.iter_jobs())
    assert unknown.value.code == grpc.StatusCode.UNAUTHENTICATED
