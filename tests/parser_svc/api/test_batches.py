"""Batches: per-file records, counters moved with each terminal transition, watch to the end."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import grpc
import pytest

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from tests import fixtures
from tests.conftest import make_stack
from tests.helpers import make_pdf, rpc_error, served_by, stub

TERMINAL = (job_pb2.STATE_SUCCEEDED, job_pb2.STATE_FAILED, job_pb2.STATE_CANCELLED)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("batches"),
        replicas=2,
        gateways=1,
        extra_env={"DOCPARSE_PARSE_PAGE_DELAY_MS": "20"},
    ) as running:
        yield running


def _files(count: int, pages: int = 5) -> list[parser_service_pb2.BatchFile]:
    return [
        parser_service_pb2.BatchFile(file_name=f"f{i}.pdf", content=make_pdf(pages, f"file{i}"))
        for i in range(count)
    ]


def _watch(address: str, batch_id: str, after: int = 0) -> list[parser_service_pb2.Batch]:
    channel, s = stub(address)
    with channel:
        request = parser_service_pb2.WatchBatchRequest(batch_id=batch_id, after_version=after)
        return [e.batch for e in s.WatchBatch(request, timeout=120) if e.HasField("batch")]


def test_batch_runs_every_file_and_counts_them(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    channel, s = stub(gateway)
    with channel:
        files = _files(4)
        files.append(parser_service_pb2.BatchFile(file_name="broken.pdf", content=b"%PDF-1.7 x"))
        created = s.CreateBatch(parser_service_pb2.CreateBatchRequest(files=files), timeout=30)
    batch = created.batch
    assert batch.total == 5 and len(batch.jobs) == 5
    assert [j.job_id for j in batch.jobs] == [f"{batch.batch_id}-{i}" for i in range(5)]
    assert all(j.batch_id == batch.batch_id for j in batch.jobs)

    snapshots = _watch(gateway, batch.batch_id)
    versions = [b.version for b in snapshots]
    assert all(a < b for a, b in itertools.pairwise(versions)), versions
    completed = [b.completed for b in snapshots]
    assert completed == sorted(completed)
    final = snapshots[-1]
    assert (final.completed, final.succeeded, final.failed) == (5, 4, 1)
    assert all(j.state in TERMINAL for j in final.jobs)
    # The counters agree with the files at every step, never ahead or behind.
    for snapshot in snapshots:
        assert snapshot.completed == sum(j.state in TERMINAL for j in snapshot.jobs)
    assert final.jobs[4].error.reason == "CORRUPT_DOCUMENT"

    # Any replica answers GetBatch the same way; resuming after the last version sends nothing.
    for address in stack.parser_addresses:
        channel, s = stub(address)
        with channel:
            again = s.GetBatch(
                parser_service_pb2.GetBatchRequest(batch_id=batch.batch_id), timeout=10
            ).batch
        assert again == final
    assert _watch(gateway, batch.batch_id, after=final.version) == []


def test_upload_batch_streams_big_files_in_chunks(stack: LocalStack) -> None:
    contents = [make_pdf(30, "big"), make_pdf(3, "small")]

    def parts() -> Iterator[parser_service_pb2.UploadBatchRequest]:
        yield parser_service_pb2.UploadBatchRequest(
            header=parser_service_pb2.UploadBatchHeader(request_id="upload-1")
        )
        for index, content in enumerate(contents):
            yield parser_service_pb2.UploadBatchRequest(
                file=parser_service_pb2.UploadFileHeader(
                    file_name=f"part{index}.pdf", size_bytes=len(content)
                )
            )
            for offset in range(0, len(content), 4096):
                yield parser_service_pb2.UploadBatchRequest(chunk=content[offset : offset + 4096])

    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        batch = s.UploadBatch(parts(), timeout=30).batch
        assert [j.size_bytes for j in batch.jobs] == [len(c) for c in contents]
        final = _watch(stack.gateway_addresses[0], batch.batch_id)[-1]
        assert final.succeeded == 2
        # The same request_id returns the same batch instead of a second one.
        assert s.UploadBatch(parts(), timeout=30).batch.batch_id == batch.batch_id


def test_bad_batches_are_refused_whole(stack: LocalStack) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        files = [
            *_files(2),
            parser_service_pb2.BatchFile(file_name="letter.wpd", content=fixtures.wordperfect()),
        ]
        err = rpc_error(
            lambda: s.CreateBatch(parser_service_pb2.CreateBatchRequest(files=files), timeout=10)
        )
        assert (err.code, err.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "UNSUPPORTED_FORMAT")
        assert err.metadata["file_index"] == "2"
        empty = rpc_error(
            lambda: s.CreateBatch(parser_service_pb2.CreateBatchRequest(), timeout=10)
        )
        assert empty.reason == "EMPTY_BATCH"
        missing = rpc_error(
            lambda: s.GetBatch(parser_service_pb2.GetBatchRequest(batch_id="0" * 32), timeout=10)
        )
        assert (missing.code, missing.reason) == (grpc.StatusCode.NOT_FOUND, "BATCH_NOT_FOUND")


@pytest.fixture(scope="module")
def eight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(tmp_path_factory.mktemp("eight"), replicas=8, gateways=1) as running:
        yield running


def test_the_motivating_batch_on_eight_replicas(eight: LocalStack) -> None:
    """Five kinds of document, eight replicas, a poll on a new connection each time: every
    poll succeeds, many replicas answer, and the batch ends 5/5. With job state in one
    process's memory, most of these polls would have answered 'not found'."""
    files = [
        parser_service_pb2.BatchFile(file_name="text.pdf", content=make_pdf(6, "text")),
        parser_service_pb2.BatchFile(file_name="scan.pdf", content=fixtures.image_only_pdf()),
        parser_service_pb2.BatchFile(file_name="mixed.pdf", content=fixtures.mixed_pdf()),
        parser_service_pb2.BatchFile(file_name="report.docx", content=fixtures.docx_full()),
        parser_service_pb2.BatchFile(file_name="sheet.xlsx", content=fixtures.xlsx_typed()),
    ]
    gateway = eight.gateway_addresses[0]
    channel, s = stub(gateway)
    with channel:
        batch_id = s.CreateBatch(
            parser_service_pb2.CreateBatchRequest(files=files), timeout=60
        ).batch.batch_id

    parsers = set()
    for address in eight.parser_addresses:
        channel, s = stub(address)
        with channel:
            parsers.add(served_by(s.GetStatus.with_call(
                parser_service_pb2.GetStatusRequest(job_id=f"{batch_id}-0"), timeout=10
            )[1])[0])  # fmt: skip

    polls: list[tuple[parser_service_pb2.Batch, list[str]]] = []
    for index in range(24):
        if index == 23:  # the last poll comes after the batch ended (a condition, not a clock)
            _watch(gateway, batch_id)
        channel, s = stub(gateway)  # a new connection for every poll
        with channel:
            reply, call = s.GetBatch.with_call(
                parser_service_pb2.GetBatchRequest(batch_id=batch_id), timeout=30
            )
        polls.append((reply.batch, served_by(call)))

    answered = {values[0] for _, values in polls}
    assert answered <= parsers and len(answered) >= 6, answered
    completed = [batch.completed for batch, _ in polls]
    assert completed == sorted(completed)
    final = polls[-1][0]
    assert (final.completed, final.total, final.succeeded) == (5, 5, 5)
    text = {job.file_name: job.result.char_count for job in final.jobs}
    assert all(chars > 0 for chars in text.values()), text
