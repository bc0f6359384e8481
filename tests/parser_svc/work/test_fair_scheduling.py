"""Fair parse scheduling through a real stack (parser_svc/state/admission.py): one replica with
one parse slot, tenants with API keys. Every job is slow (a page delay), so the slot is busy and
the order jobs start in is what a user sees.

- A's first job holds the slot and A has 30 more queued; B's one job ends while at least 25 of
  A's are still QUEUED. First come first served (DOCPARSE_FAIR_ADMISSION=false) ran all of
  A's first.
- A server-wait job (interactive lane) jumps its own tenant's bulk backlog (on the reserve
  slot: A's bulk jobs never take it).
- A key's `max_queued_jobs` refuses a submit over it: RESOURCE_EXHAUSTED RATE_LIMITED; an
  UploadBatch too, at the file over it, and none of its files stays stored. Each refusal is
  counted per tenant (docparse_submits_throttled_total).
- While B's job runs and A's wait, the per-tenant gauges and the admin read
  (GET /v1/admin/tenants, an admin key's only) say so.
- A key's `max_running_jobs` holds its tenant's jobs in flight to it with slots free, and
  another tenant's job takes the slot it leaves; its `max_pages` holds its documents to it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from docparse.aio import AsyncClient
from docparse.client import Client
from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.tenancy import key_digest
from tests.conftest import auth_env, make_stack
from tests.gateway.test_http import request
from tests.helpers import eventually, make_pdf, metric, rpc_error, stub

TOKEN = "internal-secret-for-fair-scheduling"
KEYS: dict[str, object] = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
        {"sha256": key_digest("key-of-c"), "tenant": "tenant-c", "max_queued_jobs": 3},
        {"sha256": key_digest("key-of-d"), "tenant": "tenant-d", "max_queued_jobs": 2},
        {"sha256": key_digest("key-of-ops"), "tenant": "ops", "admin": True},
        {"sha256": key_digest("key-of-e"), "tenant": "tenant-e", "max_running_jobs": 1},
        {"sha256": key_digest("key-of-f"), "tenant": "tenant-f", "max_pages": 2},
        {"sha256": key_digest("key-of-g"), "tenant": "tenant-f"},  # F's, without the cap
    ]
}
A_PAGES = 2


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    env = {
        **auth_env(KEYS, TOKEN),
        "DOCPARSE_WORKER_CONCURRENCY": "1",
        "DOCPARSE_PARSE_PAGE_DELAY_MS": "150",
        # Only a server wait makes a job interactive here, whatever its size.
        "DOCPARSE_ADMIT_INTERACTIVE_BYTES": "0",
        "DOCPARSE_SWEEP_INTERVAL_S": "1",
        # One more slot that only interactive jobs reach (bulk ones: the one slot above).
        "DOCPARSE_ADMIT_RESERVE": "1",
    }
    root = tmp_path_factory.mktemp("fair")
    with make_stack(root / "stack", replicas=1, gateways=1, extra_env=env) as running:
        yield running


class Tenant:
    def __init__(self, stack: LocalStack, who: str) -> None:
        self.channel, self.stub = stub(stack.gateway_addresses[0])
        self.metadata = (("x-api-key", f"key-of-{who}"),)
        self.who = who

    def submit(self, pages: int = 1, wait_ms: int = 0) -> job_pb2.Job:
        request = parser_service_pb2.SubmitJobRequest(
            file_name="doc.pdf",
            content=make_pdf(pages, f"{self.who} {uuid.uuid4().hex}"),
            wait_timeout_ms=wait_ms,
        )
        return self.stub.SubmitJob(request, metadata=self.metadata, timeout=90).job

    def state(self, job_id: str) -> int:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        return int(self.stub.GetStatus(request, metadata=self.metadata, timeout=10).job.state)

    def ended(self, job_id: str) -> job_pb2.Job:
        last = job_pb2.Job()
        watch = parser_service_pb2.WatchJobRequest(job_id=job_id)
        for event in self.stub.WatchJob(watch, metadata=self.metadata, timeout=120):
            if event.HasField("job"):
                last = event.job
        return last

    def queued(self, job_ids: list[str]) -> int:
        return sum(self.state(job_id) == job_pb2.STATE_QUEUED for job_id in job_ids)


def test_b_runs_before_a_s_backlog(stack: LocalStack) -> None:
    a, b = Tenant(stack, "a"), Tenant(stack, "b")
    first = a.submit(A_PAGES)
    eventually(lambda: a.state(first.job_id) == job_pb2.STATE_RUNNING, what="A's first job")
    backlog = [a.submit(A_PAGES).job_id for _ in range(30)]
    job_b = b.submit(1)
    assert b.ended(job_b.job_id).state == job_pb2.STATE_SUCCEEDED
    still_queued = a.queued(backlog)
    assert still_queued >= 25, f"only {still_queued} of A's 30 were still queued"
    assert metric(stack, "docparse_admissions_total").get("lane=bulk", 0) >= 3
    eventually(
        lambda: metric(stack, "docparse_tenant_queued_jobs").get("tenant=tenant-a", 0) >= 10,
        what="A's queued jobs on the per-tenant gauge",
    )


@pytest.fixture(scope="module")
def two_slots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A replica with two parse slots (no reserve), slow pages."""
    env = {
        **auth_env(KEYS, TOKEN),
        "DOCPARSE_WORKER_CONCURRENCY": "2",
        "DOCPARSE_PARSE_PAGE_DELAY_MS": "150",
    }
    root = tmp_path_factory.mktemp("fair-two")
    with make_stack(root / "stack", replicas=1, gateways=1, extra_env=env) as running:
        yield running


def test_a_tenant_capped_at_one_running_job_leaves_the_other_slot(two_slots: LocalStack) -> None:
    """E's key caps it at one job in flight: of its three 8-page jobs (~1.2 s each) never two
    run at once although two slots are free, B's job runs on the other slot while E's wait, and
    E's all end (each next one let in at the end of the one before)."""
    e, b = Tenant(two_slots, "e"), Tenant(two_slots, "b")
    jobs = [e.submit(8).job_id for _ in range(3)]
    eventually(lambda: e.state(jobs[0]) == job_pb2.STATE_RUNNING, what="E's first job")
    job_b = b.submit(1).job_id
    most_running = 0

    def b_done() -> bool:
        nonlocal most_running
        states = [e.state(job_id) for job_id in jobs]
        most_running = max(most_running, states.count(job_pb2.STATE_RUNNING))
        return b.state(job_b) == job_pb2.STATE_SUCCEEDED

    eventually(b_done, 60, "B's job on the free slot")
    assert e.queued(jobs) >= 1  # E's still wait their turn behind its cap
    ended = [e.ended(job_id).state for job_id in jobs]
    assert ended == [job_pb2.STATE_SUCCEEDED] * 3
    assert most_running == 1


def test_a_keys_max_pages_holds_its_documents_to_it(stack: LocalStack) -> None:
    """F's key allows 2 pages a document (its plan's cap, below the deployment's): its 3-page
    PDF ends FAILED DOCUMENT_TOO_LARGE naming the 2, its 2-page one succeeds, and the record
    says the cap; B's 3-page PDF (no cap) succeeds."""
    f, b = Tenant(stack, "f"), Tenant(stack, "b")
    over, under, other = f.submit(3), f.submit(2), b.submit(3)
    failed = f.ended(over.job_id)
    assert (failed.state, failed.error.reason) == (
        job_pb2.STATE_FAILED,
        ErrorReason.DOCUMENT_TOO_LARGE,
    )
    assert "the limit is 2" in failed.error.message
    assert (over.max_pages, failed.max_pages) == (2, 2)
    assert f.ended(under.job_id).state == job_pb2.STATE_SUCCEEDED
    done = b.ended(other.job_id)
    assert (done.state, done.max_pages) == (job_pb2.STATE_SUCCEEDED, 0)
    batch = f.stub.CreateBatch(
        parser_service_pb2.CreateBatchRequest(
            files=[parser_service_pb2.BatchFile(file_name="long.pdf", content=make_pdf(3, "f"))]
        ),
        metadata=f.metadata,
        timeout=30,
    ).batch
    in_batch = f.ended(batch.jobs[0].job_id)
    assert (in_batch.error.reason, in_batch.max_pages) == (ErrorReason.DOCUMENT_TOO_LARGE, 2)


def test_a_request_id_retried_under_another_page_cap_is_refused(stack: LocalStack) -> None:
    """Tenant F's two keys differ in `max_pages`: a retry of F's submit or batch (same
    request_id, same files) with the key the cap does not hold would be another parse, so it
    is refused REQUEST_ID_REUSED, as other options are; with the first key it answers the
    same job and batch."""
    capped, uncapped = Tenant(stack, "f"), Tenant(stack, "g")
    content = make_pdf(1, f"cap {uuid.uuid4().hex}")
    submit = parser_service_pb2.SubmitJobRequest(
        file_name="one.pdf", content=content, request_id=uuid.uuid4().hex
    )
    batch = parser_service_pb2.CreateBatchRequest(
        files=[parser_service_pb2.BatchFile(file_name="one.pdf", content=content)],
        request_id=uuid.uuid4().hex,
    )
    calls: list[tuple[str, Any]] = [("SubmitJob", submit), ("CreateBatch", batch)]
    for method, message in calls:
        first = getattr(capped.stub, method)(message, metadata=capped.metadata, timeout=30)
        again = getattr(capped.stub, method)(message, metadata=capped.metadata, timeout=30)
        same = [r.job.job_id if method == "SubmitJob" else r.batch.batch_id for r in (first, again)]
        assert same[0] == same[1], method
        refused = rpc_error(
            lambda m=method, r=message: getattr(uncapped.stub, m)(
                r, metadata=uncapped.metadata, timeout=30
            )
        )
        assert (refused.code, refused.reason) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            ErrorReason.REQUEST_ID_REUSED,
        ), method


def test_a_server_wait_jumps_the_bulk_backlog(stack: LocalStack) -> None:
    a = Tenant(stack, "a")
    backlog = [a.submit(A_PAGES).job_id for _ in range(15)]
    waited = a.submit(1, wait_ms=60_000)
    assert waited.state == job_pb2.STATE_SUCCEEDED, waited
    assert a.queued(backlog) >= 10
    assert metric(stack, "docparse_admissions_total").get("lane=interactive", 0) >= 1


def test_max_queued_jobs_refuses_a_submit_over_it(stack: LocalStack) -> None:
    a, c = Tenant(stack, "a"), Tenant(stack, "c")
    for _ in range(3):  # the slot stays busy with A's jobs while C submits
        a.submit(A_PAGES)
    refused = []
    for _ in range(5):  # a job of C's may start meanwhile (one slot: at most one)
        try:
            c.submit(1)
        except grpc.RpcError as failed:
            refused.append(failed)
    assert refused, "C's submits over max_queued_jobs were all accepted"
    # The refusal itself (a submit after the loop may find a slot freed by then).
    first = DocparseError.from_rpc_error(refused[0])
    assert first.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert first.reason == ErrorReason.RATE_LIMITED
    assert first.metadata["limit"] == "3"
    assert metric(stack, "docparse_submits_throttled_total")[
        "reason=max_queued_jobs,tenant=tenant-c"
    ]


def stored_inputs(stack: LocalStack) -> set[Path]:
    return set((stack.data_dir / "blobs").glob("*/inputs/*"))


def test_max_queued_jobs_refuses_an_upload_before_storing_it(stack: LocalStack) -> None:
    """D (at most 2 queued) streams 3 files while A holds the slot: the third file header is
    refused, and the two files stored before it go with the stream."""
    a, d = Tenant(stack, "a"), Tenant(stack, "d")
    for _ in range(2):
        a.submit(A_PAGES)
    before = stored_inputs(stack)
    content = make_pdf(1, f"d {uuid.uuid4().hex}")
    Part = parser_service_pb2.UploadBatchRequest

    def parts() -> Iterator[parser_service_pb2.UploadBatchRequest]:
        yield Part(header=parser_service_pb2.UploadBatchHeader(request_id=uuid.uuid4().hex))
        for i in range(3):
            header = parser_service_pb2.UploadFileHeader(
                file_name=f"{i}.pdf", size_bytes=len(content)
            )
            yield Part(file=header)
            yield Part(chunk=content)

    refused = rpc_error(lambda: d.stub.UploadBatch(parts(), metadata=d.metadata, timeout=60))
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        ErrorReason.RATE_LIMITED,
    )
    assert refused.metadata["limit"] == "2"
    assert not stored_inputs(stack) - before, "an upload of the refused stream stayed stored"
    throttled = metric(stack, "docparse_submits_throttled_total")
    assert throttled["reason=max_queued_jobs,tenant=tenant-d"] >= 1


def admin_read(stack: LocalStack, key: str) -> tuple[int, Any]:
    reply = request(
        stack.gateways[0].http_address, "GET", "/v1/admin/tenants", headers={"X-Api-Key": key}
    )
    return reply.status, reply.json()


def test_running_jobs_per_tenant_in_the_metrics_and_the_admin_read(stack: LocalStack) -> None:
    a, b = Tenant(stack, "a"), Tenant(stack, "b")
    for _ in range(3):
        a.submit(A_PAGES)
    long_b = b.submit(40)  # B's one job: 6 s on the slot, A's wait meanwhile
    eventually(lambda: b.state(long_b.job_id) == job_pb2.STATE_RUNNING, what="B's job")
    eventually(
        lambda: metric(stack, "docparse_tenant_running_jobs").get("tenant=tenant-b") == 1,
        what="B's running job on the per-tenant gauge",
    )

    def shares() -> dict[str, Any] | None:
        status, body = admin_read(stack, "key-of-ops")
        assert status == 200, body
        tenants = {row["tenant"]: row for row in body["tenants"]}
        b_runs = tenants["tenant-b"]["running"] == 1
        return tenants if b_runs and tenants["tenant-a"]["queued"] >= 1 else None

    tenants = eventually(shares, what="B running and A queued in the admin read")
    assert tenants["tenant-a"]["running"] == 0  # one slot, B's
    assert tenants["tenant-b"]["weight"] == 1.0
    assert tenants["tenant-c"]["max_queued_jobs"] == 3  # configured, no job needed
    assert tenants["tenant-d"]["max_queued_jobs"] == 2
    _, body = admin_read(stack, "key-of-ops")
    assert (body["bulk_slots"], body["interactive_reserve"]) == (1, 1)
    assert body["fair_admission"] is True


def test_the_admin_read_is_for_admin_keys_only(stack: LocalStack) -> None:
    status, body = admin_read(stack, "key-of-a")
    assert status == 403
    assert (body["code"], body["reason"]) == ("PERMISSION_DENIED", ErrorReason.ADMIN_ONLY)
    b = Tenant(stack, "b")
    request_ = parser_service_pb2.GetTenantSharesRequest()
    refused = rpc_error(lambda: b.stub.GetTenantShares(request_, metadata=b.metadata, timeout=10))
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        ErrorReason.ADMIN_ONLY,
    )
    status, _ = admin_read(stack, "not-a-key")
    assert status == 401


def test_the_sdks_and_the_cli_read_the_shares_with_an_admin_key(stack: LocalStack) -> None:
    """`Client.tenant_shares()` (and the asyncio client's), `docparse tenants`: the lanes' caps
    as configured; a tenant's key: PERMISSION_DENIED ADMIN_ONLY, not retried, and exit 2
    naming it."""
    gateway = stack.gateway_addresses[0]

    async def read_async() -> parser_service_pb2.GetTenantSharesResponse:
        async with AsyncClient(gateway, api_key="key-of-ops") as ops_aio:
            return await ops_aio.tenant_shares()

    with Client(gateway, api_key="key-of-ops") as ops:
        shares = ops.tenant_shares()
    shares_aio = asyncio.run(read_async())
    for answer in (shares, shares_aio):
        assert (answer.bulk_slots, answer.interactive_reserve, answer.fair_admission) == (
            1,
            1,
            True,
        )
    with Client(gateway, api_key="key-of-a") as a, pytest.raises(DocparseError) as refused:
        a.tenant_shares()
    assert (refused.value.code, refused.value.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        ErrorReason.ADMIN_ONLY,
    )
    cli = [sys.executable, "-m", "docparse", "tenants", "--target", gateway]
    table = subprocess.run([*cli, "--api-key", "key-of-ops"], capture_output=True, text=True)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == [
        "tenant", "weight", "queued", "interactive", "bulk", "running"
    ]  # fmt: skip
    assert "fair admission" in table.stdout.splitlines()[-1]
    as_json = subprocess.run([*cli, "--api-key", "key-of-ops", "--json"], capture_output=True)
    assert json.loads(as_json.stdout)["bulk_slots"] == 1
    denied = subprocess.run([*cli, "--api-key", "key-of-a"], capture_output=True, text=True)
    assert denied.returncode == 2
    assert "PERMISSION_DENIED ADMIN_ONLY" in denied.stderr
