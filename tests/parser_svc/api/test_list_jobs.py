"""ListJobs on a real Redis, through the store and the listing (parser_svc/api/listing.py): newest
first, pages that neither skip nor repeat (also across the ties of a batch's files), filters by
state and batch, page tokens bound to their tenant and filters, and an index that forgets jobs
whose records are gone and lives as long as any job it lists (parser_svc/state/lifetimes.py)."""

from __future__ import annotations

import base64
import uuid

import grpc
import pytest

from docparse.errors import DocparseError
from docparse.local.embedded_redis import EmbeddedRedis
from docparse.v1 import job_pb2, parser_service_pb2
from parser_svc.api.listing import JobListing
from parser_svc.settings import Settings
from parser_svc.state.keys import batch_file_id
from parser_svc.state.lifetimes import Lifetimes, now_ms
from parser_svc.state.pipelined_reads import PipelinedReader
from parser_svc.state.store import JobStore, connect

ListJobsRequest = parser_service_pb2.ListJobsRequest


@pytest.fixture(params=["pipelined", "pool"])
def reads(request: pytest.FixtureRequest) -> str:
    """How the listing reads its records: on the pipelined reader's connections (one Redis) or
    through redis-py's pool (Sentinel, Cluster)."""
    return str(request.param)


def new_store(redis_server: EmbeddedRedis, reads: str = "pool") -> tuple[JobStore, JobListing]:
    settings = Settings(redis_url=redis_server.url, env=f"t{uuid.uuid4().hex[:8]}")
    reader = PipelinedReader.of(settings) if reads == "pipelined" else None
    store = JobStore(connect(settings), settings, reader)
    return store, JobListing(store, settings)


def upload(tenant: str, name: str) -> dict[str, str]:
    return {
        "file_name": name,
        "content_sha256": uuid.uuid4().hex * 2,
        "content_type": "pdf",
        "size_bytes": "10",
        "tenant": tenant,
        "batch_id": "",
    }


async def create(store: JobStore, tenant: str, name: str) -> str:
    job_id = uuid.uuid4().hex
    assert (await store.create(job_id, upload(tenant, name))).created
    next_millisecond()
    return job_id


def next_millisecond() -> None:
    """Returns once the creation clock (ms) has moved on. Jobs created in one millisecond tie in
    the tenant's index, which orders ties by id: "the oldest" would then be a random one of
    them (a CI run failed on it), where these tests mean the first created."""
    start = now_ms()
    while now_ms() == start:
        pass


async def all_pages(
    listing: JobListing, tenant: str, request: ListJobsRequest
) -> list[list[job_pb2.Job]]:
    pages = []
    while True:
        page = await listing.page(tenant, request)
        pages.append(list(page.jobs))
        if not page.next_page_token:
            return pages
        request.page_token = page.next_page_token


def newest_first(jobs: list[job_pb2.Job]) -> list[job_pb2.Job]:
    """The listing's order: create time descending, then job id descending."""
    return sorted(jobs, key=lambda j: (j.create_time.ToMilliseconds(), j.job_id), reverse=True)


def error_of(exc: pytest.ExceptionInfo[DocparseError]) -> tuple[grpc.StatusCode, str]:
    return exc.value.code, exc.value.reason


async def test_pages_of_one_tenant_newest_first(redis_server: EmbeddedRedis, reads: str) -> None:
    store, listing = new_store(redis_server, reads)
    ours = [await create(store, "a", f"a{i}.pdf") for i in range(250)]
    theirs = {await create(store, "b", f"b{i}.pdf") for i in range(30)}
    pages = await all_pages(listing, "a", ListJobsRequest(page_size=100))
    assert [len(page) for page in pages] == [100, 100, 50]
    listed = [job for page in pages for job in page]
    assert {job.job_id for job in listed} == set(ours) and not theirs & set(ours)
    assert len({job.job_id for job in listed}) == 250  # nothing twice
    assert listed == newest_first(listed)
    assert all(job.state == job_pb2.STATE_QUEUED for job in listed)
    b_pages = await all_pages(listing, "b", ListJobsRequest())  # default page size 50
    assert [len(page) for page in b_pages] == [30]
    assert {job.job_id for job in b_pages[0]} == theirs


async def test_ties_of_a_batch_page_without_gaps(redis_server: EmbeddedRedis, reads: str) -> None:
    """A batch's files share one create time: pages of 7 walk them by job id."""
    store, listing = new_store(redis_server, reads)
    before = await create(store, "a", "before.pdf")
    batch_id = uuid.uuid4().hex
    files = [upload("a", f"f{i}.pdf") for i in range(30)]
    assert (await store.create_batch(batch_id, "a", files)).created
    after = await create(store, "a", "after.pdf")
    pages = await all_pages(listing, "a", ListJobsRequest(page_size=7))
    jobs = [job for page in pages for job in page]
    assert jobs == newest_first(jobs) and len(jobs) == 32
    files_ids = sorted((batch_file_id(batch_id, i) for i in range(30)), reverse=True)
    assert {job.job_id for job in jobs} == {before, after, *files_ids}
    only_batch = await all_pages(listing, "a", ListJobsRequest(page_size=4, batch_id=batch_id))
    assert [job.job_id for page in only_batch for job in page] == files_ids
    assert all(job.batch_id == batch_id for page in only_batch for job in page)
    with pytest.raises(DocparseError) as exc:
        await listing.page("b", ListJobsRequest(batch_id=batch_id))
    assert error_of(exc) == (grpc.StatusCode.NOT_FOUND, "BATCH_NOT_FOUND")


async def test_state_filter(redis_server: EmbeddedRedis, reads: str) -> None:
    store, listing = new_store(redis_server, reads)
    ids = [await create(store, "a", f"{i}.pdf") for i in range(12)]
    for job_id in ids[::3]:  # 0, 3, 6, 9 end SUCCEEDED; 1 is running
        assert (await store.claim(job_id, "fence")).ok
        assert (await store.finish(job_id, "fence", "SUCCEEDED", {"res_sha256": "0" * 64})).ok
    assert (await store.claim(ids[1], "fence")).ok
    done = await all_pages(
        listing, "a", ListJobsRequest(page_size=3, states=[job_pb2.STATE_SUCCEEDED])
    )
    assert {job.job_id for page in done for job in page} == set(ids[::3])
    active = await listing.page(
        "a", ListJobsRequest(states=[job_pb2.STATE_QUEUED, job_pb2.STATE_RUNNING])
    )
    assert {job.job_id for job in active.jobs} == set(ids) - set(ids[::3])
    assert not active.next_page_token
    with pytest.raises(DocparseError) as exc:
        await listing.page("a", ListJobsRequest(states=[job_pb2.STATE_UNSPECIFIED]))
    assert error_of(exc) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_STATE")


async def test_page_tokens_are_bound_to_tenant_and_filters(
    redis_server: EmbeddedRedis, reads: str
) -> None:
    store, listing = new_store(redis_server, reads)
    for i in range(5):
        await create(store, "a", f"a{i}.pdf")
        await create(store, "b", f"b{i}.pdf")
    token = (await listing.page("a", ListJobsRequest(page_size=2))).next_page_token
    assert token
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw[12] ^= 1
    tampered = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    refused = [
        ("b", ListJobsRequest(page_size=2, page_token=token)),  # another tenant's token
        ("a", ListJobsRequest(page_size=2, page_token=tampered)),
        ("a", ListJobsRequest(page_size=2, page_token=token[:-3])),
        ("a", ListJobsRequest(page_size=2, page_token="not a token")),
        ("a", ListJobsRequest(page_token=token, states=[job_pb2.STATE_RUNNING])),  # filters
    ]
    for tenant, request in refused:
        with pytest.raises(DocparseError) as exc:
            await listing.page(tenant, request)
        assert error_of(exc) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")
    # Another page size with the same token is fine (AIP-158).
    assert len((await listing.page("a", ListJobsRequest(page_size=3, page_token=token))).jobs) == 3


async def test_page_size_bounds(redis_server: EmbeddedRedis, reads: str) -> None:
    store, listing = new_store(redis_server, reads)
    for i in range(520):
        await create(store, "a", f"{i}.pdf")
    assert len((await listing.page("a", ListJobsRequest())).jobs) == 50
    assert len((await listing.page("a", ListJobsRequest(page_size=10_000))).jobs) == 500
    with pytest.raises(DocparseError) as exc:
        await listing.page("a", ListJobsRequest(page_size=-1))
    assert error_of(exc) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_SIZE")


async def test_expired_jobs_leave_the_index(redis_server: EmbeddedRedis, reads: str) -> None:
    store, listing = new_store(redis_server, reads)
    ids = [await create(store, "a", f"{i}.pdf") for i in range(6)]
    index = store.keys.tenant_jobs("a")
    for job_id in ids[:3]:  # as if their retention ran out
        await store._redis.delete(store.keys.job(job_id))
    page = await listing.page("a", ListJobsRequest())
    assert {job.job_id for job in page.jobs} == set(ids[3:])
    assert {m.decode() for m in await store._redis.zrange(index, 0, -1)} == set(ids[3:])


async def test_the_index_outlives_every_record_it_lists(redis_server: EmbeddedRedis) -> None:
    store, _ = new_store(redis_server)
    job_id = await create(store, "a", "x.pdf")
    batch_id = uuid.uuid4().hex
    assert (await store.create_batch(batch_id, "a", [upload("a", "f.pdf")])).created
    ttl = Lifetimes.of(store.settings)
    index_ms = await store._redis.pttl(store.keys.tenant_jobs("a"))
    assert ttl.listed_ms - 5000 < index_ms <= ttl.listed_ms
    record_ms = await store._redis.pttl(store.keys.job(job_id))
    longest = ttl.retention_ms + ttl.queued_ms  # e.g. a job that waited, then ended at once
    assert record_ms <= longest < index_ms
    assert (await store.claim(job_id, "f")).ok
    assert (await store.finish(job_id, "f", "SUCCEEDED", {"res_sha256": "0" * 64})).ok
    assert await store._redis.pttl(store.keys.job(job_id)) < index_ms


async def test_creates_drop_the_oldest_entries_whose_records_are_gone(
    redis_server: EmbeddedRedis,
) -> None:
    """Nobody lists, jobs expire: the index still follows the live jobs, as each create drops
    the oldest entries whose record is gone (two for a job, n + 1 for a batch of n)."""
    store, _ = new_store(redis_server)
    index = store.keys.tenant_jobs("a")

    async def entries() -> set[str]:
        return {m.decode() for m in await store._redis.zrange(index, 0, -1)}

    batch_id = uuid.uuid4().hex
    assert (await store.create_batch(batch_id, "a", [upload("a", "f.pdf")] * 2)).created
    next_millisecond()
    old = [await create(store, "a", f"old{i}.pdf") for i in range(3)]
    gone = [batch_file_id(batch_id, 0), batch_file_id(batch_id, 1), old[0]]
    for job_id in gone:  # as if their retention ran out
        await store._redis.delete(store.keys.job(job_id))
    new = await create(store, "a", "new.pdf")  # the two oldest: the batch's files
    assert await entries() == {*old, new}
    again = await create(store, "a", "again.pdf")
    assert await entries() == {*old[1:], new, again}
    for job_id in [*old[1:], new]:
        await store._redis.delete(store.keys.job(job_id))
    other = uuid.uuid4().hex
    assert (await store.create_batch(other, "a", [upload("a", "g.pdf")] * 3)).created
    assert await entries() == {again, *(batch_file_id(other, i) for i in range(3))}
