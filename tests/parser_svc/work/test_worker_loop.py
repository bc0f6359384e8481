"""The worker touches no file on its event loop (BullMQ renews its locks there): a job's
upload, password file, result blob and scratch directory are looked at, written and deleted in
a thread, whichever way the run ends. Driven through ParseWorker._process on a real Redis and a
spawned parse child; every blob path resolved and every scratch directory made or removed on
a thread that runs an event loop is recorded."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from bullmq.custom_errors import UnrecoverableError

from docparse.local.embedded_redis import EmbeddedRedis
from parser_svc.settings import Settings
from parser_svc.state.store import JobStore, connect
from parser_svc.work.blobs import BlobStore
from parser_svc.work.worker import ParseWorker
from tests.helpers import make_pdf

ON_LOOP: list[str] = []


def note_if_on_loop(what: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    ON_LOOP.append(what)


class GuardedBlobs(BlobStore):
    """Every file access of BlobStore goes through `path`."""

    def path(self, key: str) -> Path:
        note_if_on_loop(f"blob {key}")
        return super().path(key)


class GuardedScratch(tempfile.TemporaryDirectory[str]):
    def __init__(self, **kwargs: Any) -> None:
        note_if_on_loop("scratch made")
        super().__init__(**kwargs)

    def cleanup(self) -> None:
        note_if_on_loop("scratch removed")
        super().cleanup()


@pytest.fixture
def worker(
    redis_server: EmbeddedRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> ParseWorker:
    monkeypatch.setattr(
        "parser_svc.work.worker.tempfile", SimpleNamespace(TemporaryDirectory=GuardedScratch)
    )
    settings = Settings(
        redis_url=redis_server.url,  # type: ignore[arg-type]
        env=f"t{uuid.uuid4().hex[:8]}",
        blob_dir=tmp_path,
        parse_launch="spawn",
        inline_result_max_bytes=0,  # the result goes to a blob
    )
    ON_LOOP.clear()
    return ParseWorker(
        settings, JobStore(connect(settings), settings), GuardedBlobs(tmp_path, settings.env)
    )


async def run(worker: ParseWorker, content: bytes | None, *, created: bool = True) -> str:
    """Stores `content` as a job's upload (none if None), creates its record unless not
    `created`, takes the queue lock as BullMQ would, and runs the job's first attempt."""
    job_id, token = uuid.uuid4().hex, uuid.uuid4().hex
    if content is not None:
        await asyncio.to_thread(worker.blobs.put_input, job_id, content)
    if created:
        fields = {"file_name": "a.pdf", "content_type": "pdf"}
        assert (await worker.store.create(job_id, fields)).status == "OK"
    lock = worker.store.keys.queue_lock(worker.settings.queue_name, job_id)
    await worker.store._redis.set(lock, token)
    queue_job = SimpleNamespace(data={"job_id": job_id}, attemptsMade=0, opts={"attempts": 3})
    try:
        return await worker._process(queue_job, token)
    finally:
        stored = await asyncio.to_thread(worker.blobs.path, worker.blobs.input_key(job_id))
        assert not stored.exists()


async def test_a_parse_that_succeeds_touches_no_file_on_the_loop(worker: ParseWorker) -> None:
    assert await run(worker, make_pdf(2)) == "SUCCEEDED"
    assert ON_LOOP == []


async def test_a_document_that_fails_touches_no_file_on_the_loop(worker: ParseWorker) -> None:
    with pytest.raises(UnrecoverableError, match="CORRUPT_DOCUMENT"):
        await run(worker, b"%PDF-1.7\nnot really a pdf")
    assert ON_LOOP == []


async def test_a_job_that_is_gone_touches_no_file_on_the_loop(worker: ParseWorker) -> None:
    assert await run(worker, b"%PDF-1.7\n", created=False) == "NOT_FOUND"
    assert ON_LOOP == []


async def test_a_lost_upload_touches_no_file_on_the_loop(worker: ParseWorker) -> None:
    with pytest.raises(Exception, match="WORKER_LOST"):
        await run(worker, None)
    assert ON_LOOP == []
