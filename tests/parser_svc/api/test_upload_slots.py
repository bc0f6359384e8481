"""Uploads one tenant may have open on a replica (`DOCPARSE_MAX_UPLOADS_PER_TENANT`), sent to
the replica with the identity the gateway adds (tenant, limits, internal token), each waiting
for the replica's verdict on its header as the gateway's HTTP side does: one over the limit is
refused before it reads anything (RESOURCE_EXHAUSTED TOO_MANY_UPLOADS, metadata `limit`,
retry_after_s), another tenant's upload goes through meanwhile, a slot comes back when an
upload ends, and a burst of a tenant's uploads into a stalled replica costs that replica what
the limit allows, not what the burst sends.

Each open upload can hold the stream's HTTP/2 receive window (4 MiB) plus a chunk while the
replica is slow: 16 concurrent 16 MiB uploads into a replica stalled by SIGSTOP/SIGCONT grew it
by 141 MiB without a limit (32 uploads: 259 MiB; with grpc's probed window before it was fixed,
276 and 393 MiB); with a limit of 4, +34 MiB."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from docparse.aio_status import keep_server_status_on_failed_writes
from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2, parser_service_pb2_grpc
from docparse_server.tenancy import Caller, identity_metadata, key_digest
from tests.conftest import auth_env, make_stack
from tests.gateway.test_http import Reply, multipart, request
from tests.helpers import Stalls, status_kb
from tests.parser_svc.api.test_big_batch import padded_pdf

TOKEN = "internal-secret-for-upload-slot-tests"
A = tuple(identity_metadata(Caller("tenant-a"), TOKEN))
B = tuple(identity_metadata(Caller("tenant-b"), TOKEN))
KEYS = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b"},
    ]
}
LIMIT = 4
# As the SDK and the gateway do: a write that loses the race with the replica's refusal reports
# the replica's status, not INTERNAL (docparse/aio_status.py).
keep_server_status_on_failed_writes()
CHUNK = 1024 * 1024
Part = parser_service_pb2.UploadBatchRequest
Call = grpc.aio.StreamUnaryCall[Part, parser_service_pb2.UploadBatchResponse]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("upload-slots"),
        replicas=1,
        gateways=1,
        extra_env={**auth_env(KEYS, TOKEN), "DOCPARSE_MAX_UPLOADS_PER_TENANT": str(LIMIT)},
    ) as running:
        yield running


def header(name: str) -> Part:
    return Part(header=parser_service_pb2.UploadBatchHeader(request_id=name))


def file_parts(content: bytes) -> list[Part]:
    parts = [
        Part(file=parser_service_pb2.UploadFileHeader(file_name="a.pdf", size_bytes=len(content)))
    ]
    parts += [Part(chunk=content[o : o + CHUNK]) for o in range(0, len(content), CHUNK)]
    return parts


async def opened(s: parser_service_pb2_grpc.ParserServiceStub, name: str, meta: object) -> Call:
    """An upload whose header the replica accepted: it holds one of the tenant's slots."""
    call: Call = s.UploadBatch(metadata=meta, timeout=120)
    try:
        await call.write(header(name))
    except asyncio.InvalidStateError:  # refused before the header was written
        await call  # raises the replica's status
    metadata = await call.initial_metadata()
    if ("x-docparse-upload", "header-accepted") not in tuple(metadata or ()):
        await call  # refused: raises the replica's status
    return call


async def finish(call: Call, content: bytes) -> parser_service_pb2.UploadBatchResponse:
    for part in file_parts(content):
        await call.write(part)
    await call.done_writing()
    return await call


async def refusal(coroutine: object) -> DocparseError:
    try:
        await coroutine  # type: ignore[misc]
    except grpc.RpcError as err:
        return DocparseError.from_rpc_error(err)
    raise AssertionError("the upload was accepted; a refusal was expected")


def test_an_upload_over_the_tenants_limit_is_refused_before_it_reads(stack: LocalStack) -> None:
    document = padded_pdf("slot", 2 * CHUNK)

    async def run() -> tuple[DocparseError, Reply, list[str], str, str]:
        async with grpc.aio.insecure_channel(stack.parsers[0].address) as channel:
            s = parser_service_pb2_grpc.ParserServiceStub(channel)
            held = [await opened(s, f"a-{i}", A) for i in range(LIMIT)]
            refused = await refusal(opened(s, "a-over", A))
            # The same tenant's HTTP batch upload through the gateway: 429 with Retry-After.
            body, headers = multipart([("a.pdf", document)])
            over_http = await asyncio.to_thread(
                request,
                stack.http_addresses[0],
                "POST",
                "/v1/batches",
                body,
                {**headers, "X-Api-Key": "key-of-a"},
            )
            # Another tenant is not affected by A's full slots.
            other = await finish(await opened(s, "b-0", B), document)
            done = [await finish(call, document) for call in held]
            # A slot is back once an upload has ended (the replica lets go after the reply).
            again = None
            for _ in range(100):
                try:
                    again = await finish(await opened(s, "a-again", A), document)
                    break
                except grpc.RpcError as err:  # only the refusal is waited out
                    if DocparseError.from_rpc_error(err).reason != "TOO_MANY_UPLOADS":
                        raise
                    await asyncio.sleep(0.05)
            assert again is not None, "A's slot never came back"
            return (
                refused,
                over_http,
                [reply.batch.batch_id for reply in done],
                other.batch.batch_id,
                again.batch.batch_id,
            )

    refused, over_http, done, other, again = asyncio.run(run())
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "TOO_MANY_UPLOADS",
    )
    assert refused.metadata["limit"] == str(LIMIT)
    assert refused.retry_after_s == 1
    assert over_http.status == 429, over_http.body
    assert over_http.json()["reason"] == "TOO_MANY_UPLOADS"
    assert over_http.headers["Retry-After"] == "1"
    assert len(set(done)) == LIMIT and other and again


def test_through_the_grpc_gateway_an_upload_learns_its_headers_verdict_before_its_files(
    stack: LocalStack,
) -> None:
    """The gateway passes a client stream's initial metadata on as the replica sends it: a
    client may wait for `header-accepted` (or the refusal) before it streams any file, as
    the gateway's own HTTP side does with the replica. Before, the headers came only with the
    response, and a client that waited for them waited for ever."""
    document = padded_pdf("gateway", 2 * CHUNK)
    key_a = (("x-api-key", "key-of-a"),)

    async def run() -> tuple[DocparseError, list[str]]:
        async with grpc.aio.insecure_channel(stack.gateway_addresses[0]) as channel:
            s = parser_service_pb2_grpc.ParserServiceStub(channel)
            held = [await asyncio.wait_for(opened(s, f"gw-{i}", key_a), 30) for i in range(LIMIT)]
            refused = await refusal(asyncio.wait_for(opened(s, "gw-over", key_a), 30))
            done = [await finish(call, document) for call in held]
            return refused, [reply.batch.batch_id for reply in done]

    refused, done = asyncio.run(run())
    assert (refused.code, refused.reason) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "TOO_MANY_UPLOADS",
    )
    assert refused.metadata["limit"] == str(LIMIT)
    assert len(set(done)) == LIMIT and all(done)


def test_a_burst_of_uploads_into_a_stalled_replica_costs_what_the_limit_allows(
    stack: LocalStack,
) -> None:
    """16 concurrent uploads of 16 MiB from one tenant while the replica stalls again and again:
    at most LIMIT go on at once, the others are refused; the replica's peak RSS grows by less
    than 64 MiB (16 without the limit: +141 MiB)."""
    content = padded_pdf("burst", 16 * CHUNK)
    replica = stack.parsers[0].pid

    async def one(s: parser_service_pb2_grpc.ParserServiceStub, index: int) -> str:
        try:
            reply = await finish(await opened(s, f"burst-{index}", A), content)
        except grpc.RpcError as err:
            return DocparseError.from_rpc_error(err).reason or str(err.code())
        return "ok" if reply.batch.batch_id else "no batch"

    async def burst() -> list[str]:
        async with grpc.aio.insecure_channel(stack.parsers[0].address) as channel:
            s = parser_service_pb2_grpc.ParserServiceStub(channel)
            return await asyncio.gather(*(one(s, i) for i in range(16)))

    Path(f"/proc/{replica}/clear_refs").write_text("5")
    before = status_kb(replica, "VmRSS")
    with Stalls([replica]):
        outcomes = asyncio.run(burst())
    growth_mb = (status_kb(replica, "VmHWM") - before) / 1024
    print(f"\n16 uploads of 16 MiB, limit {LIMIT}, replica stalled: {sorted(outcomes)}; "
          f"replica peak RSS +{growth_mb:.0f} MiB")  # fmt: skip
    assert set(outcomes) <= {"ok", "TOO_MANY_UPLOADS"}, outcomes
    assert outcomes.count("ok") >= 1 and outcomes.count("TOO_MANY_UPLOADS") >= 16 - 2 * LIMIT
    assert growth_mb < 64, growth_mb
