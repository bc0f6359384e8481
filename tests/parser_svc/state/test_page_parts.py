"""Page parts of a running job: stored a batch to a pack in the blob store, pointed at in a
real Redis (parser_svc/state/page_parts.py, lua/put_page_part.lua), read back by another
replica."""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from pathlib import Path

import pytest
import redis

from docparse.local.embedded_redis import EmbeddedRedis
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.api import draft_backfill
from parser_svc.settings import Settings
from parser_svc.state.events import EventHub
from parser_svc.state.page_parts import PageParts, PagePointer
from parser_svc.state.store import JobStore, connect
from parser_svc.work.blobs import BlobStore
from parser_svc.work.page_parts import PagePublisher
from tests.helpers import eventually


class Replica:
    """What one parser_svc replica holds: its own Redis client and view of the blob store."""

    def __init__(self, redis_server: EmbeddedRedis, env: str, blob_dir: Path) -> None:
        settings = Settings(redis_url=redis_server.url, env=env)
        self.store = JobStore(connect(settings), settings)
        self.parts = PageParts(self.store)
        self.blobs = BlobStore(blob_dir, env)

    def publisher(self, job_id: str, fence: str, attempt: int) -> PagePublisher:
        return PagePublisher(self.parts, self.blobs, job_id, fence, attempt)


def two_replicas(redis_server: EmbeddedRedis, tmp_path: Path) -> tuple[Replica, Replica]:
    env = f"t{uuid.uuid4().hex[:8]}"
    return Replica(redis_server, env, tmp_path), Replica(redis_server, env, tmp_path)


async def running_job(replica: Replica, fence: str) -> str:
    job_id = uuid.uuid4().hex
    assert (await replica.store.create(job_id, {"file_name": "a.pdf"})).status == "OK"
    assert (await replica.store.claim(job_id, fence)).ok
    return job_id


def part(number: int, text: str) -> bytes:
    package = rp.ReadingPackage(content_type="pdf")
    package.pages.add(number=number, text=text)
    return package.SerializeToString(deterministic=True)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def pointers(parts: PageParts, job_id: str, after_seq: int = 0) -> list[PagePointer]:
    """The pointers after `after_seq`, read from the hash and from the list of moves: the
    same (a stream reads the moves, GetResult the hash)."""
    from_hash = await parts.ready(job_id, after_seq=after_seq)
    assert await parts.moves(job_id, after_seq=after_seq) == from_hash
    return from_hash


async def test_pages_read_on_another_replica_resume_after_a_cursor(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    worker, reader = two_replicas(redis_server, tmp_path)
    job_id = await running_job(worker, "w1")
    publisher = worker.publisher(job_id, "w1", 1)
    for number in (1, 2):
        assert (await publisher.publish(number, part(number, f"p{number}"), "draft")).ok
    first = await pointers(reader.parts, job_id)
    assert [(p.page, p.kind) for p in first] == [(1, "draft"), (2, "draft")]
    assert reader.blobs.read_page_part(job_id, first[0].ref) == part(1, "p1")
    # The parse goes on; a stream resumed after what it sent gets only what came since.
    await publisher.publish(3, part(3, "p3"), "draft")
    await publisher.publish(1, part(1, "p1 final"), "final")
    later = await pointers(reader.parts, job_id, after_seq=first[-1].seq)
    assert [(p.page, p.kind) for p in later] == [(3, "draft"), (1, "final")]
    assert reader.blobs.read_page_part(job_id, later[1].ref) == part(1, "p1 final")
    assert await pointers(reader.parts, job_id, after_seq=later[-1].seq) == []


async def test_a_final_never_goes_back_and_a_differing_retry_says_what_it_replaces(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    worker, other = two_replicas(redis_server, tmp_path)
    job_id = await running_job(worker, "w1")
    first = worker.publisher(job_id, "w1", 1)
    assert (await first.publish(1, part(1, "final"), "final")).status == "OK"
    assert (await first.publish(1, part(1, "final"), "final")).status == "SAME"  # a lost reply
    assert (await first.publish(1, part(1, "draft again"), "draft")).status == "KEPT"
    # The worker dies; another takes the job over: the first one's writes are refused.
    assert (await other.store.claim(job_id, "w2")).ok
    assert (await first.publish(2, part(2, "late"), "draft")).status == "FENCED"
    retry = other.publisher(job_id, "w2", 2)
    assert (await retry.publish(1, part(1, "final"), "final")).status == "SAME"
    [same] = await pointers(other.parts, job_id)
    assert (same.attempt, same.replaces) == (1, "")  # read the same: the first part stays
    assert (await retry.publish(1, part(1, "read otherwise"), "final")).status == "REPLACED"
    [moved] = await pointers(other.parts, job_id, after_seq=same.seq)
    assert (moved.attempt, moved.sha256) == (2, sha(part(1, "read otherwise")))
    assert moved.replaces == same.sha256 == sha(part(1, "final"))
    # Both parts stay readable: what a reader got first is still what it was.
    assert other.blobs.read_page_part(job_id, same.ref) == part(1, "final")
    assert other.blobs.read_page_part(job_id, moved.ref) == part(1, "read otherwise")


async def test_an_ended_jobs_pages_stay_as_they_were_and_outlive_its_record(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    worker, reader = two_replicas(redis_server, tmp_path)
    job_id = await running_job(worker, "w1")
    publisher = worker.publisher(job_id, "w1", 1)
    await publisher.publish(1, part(1, "p1"), "final")
    assert (await worker.store.finish(job_id, "w1", "FAILED", {"err_reason": "X"})).ok
    assert (await publisher.publish(2, part(2, "p2"), "final")).status == "TERMINAL"
    assert [p.page for p in await reader.parts.ready(job_id)] == [1]
    redis = reader.store._redis
    record_ms = await redis.pttl(reader.store.keys.job(job_id))
    assert await redis.pttl(reader.store.keys.page_parts(job_id)) >= record_ms > 0
    assert await redis.pttl(reader.store.keys.page_log(job_id)) >= record_ms
    # The sweeper's clean-up takes the parts too (the refused write's orphan among them).
    assert reader.blobs.delete_job(job_id) == 2
    assert not (tmp_path / reader.blobs.page_part_key(job_id, sha(part(1, "p1")))).parent.exists()


async def test_a_batch_of_drafts_is_pointed_at_in_one_step_with_one_wake(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """A worker's batch of drafts: one script call, a result per page (a new pointer, the same
    bytes again, a draft after the page's final), one message on the page channel naming the
    last move; a batch from a worker that lost the job: refused whole, nothing moved."""
    worker, reader = two_replicas(redis_server, tmp_path)
    job_id = await running_job(worker, "w1")
    assert (await worker.publisher(job_id, "w1", 1).publish(3, part(3, "f"), "final")).ok
    datas = {n: part(n, f"draft {n}") for n in (1, 2, 3)}
    refs = worker.blobs.put_page_parts(job_id, [(sha(d), d) for d in datas.values()])
    batch = list(zip(datas, refs, strict=True))
    channel = worker.store.keys.page_channel(job_id)
    with redis.Redis.from_url(redis_server.url) as client, client.pubsub() as pubsub:
        pubsub.subscribe(channel)
        assert pubsub.get_message(timeout=5)["type"] == "subscribe"  # type: ignore[index]
        results = await worker.parts.put_many(job_id, "w1", 1, [*batch, batch[0]], "draft")
        assert [r.status for r in results] == ["OK", "OK", "KEPT", "SAME"]
        woken = [pubsub.get_message(timeout=1) for _ in range(2)]
    assert [w["data"] for w in woken if w] == [str(results[1].seq).encode()]
    moved = await pointers(reader.parts, job_id, after_seq=1)
    assert [(p.page, p.kind, p.sha256, p.ref) for p in moved] == [
        (1, "draft", sha(datas[1]), batch[0][1]),
        (2, "draft", sha(datas[2]), batch[1][1]),
    ]
    assert reader.blobs.read_page_parts(job_id, [p.ref for p in moved]) == [datas[1], datas[2]]
    assert (await reader.store.claim(job_id, "w2")).ok
    late = await worker.parts.put_many(
        job_id, "w1", 1, [(4, batch[0][1]), (5, batch[1][1])], "draft"
    )
    assert [r.status for r in late] == ["FENCED", "FENCED"]
    assert await pointers(reader.parts, job_id, after_seq=moved[-1].seq) == []


def test_a_batch_of_parts_is_one_pack_written_once_and_read_back_only_as_its_bytes(
    tmp_path: Path,
) -> None:
    """The blob store's page parts, stored and read a batch at a time: one pack file a batch
    (one create, not one a page), the same batch again writes nothing (a retry), each part
    read back by its ref, a pack gone reads as None, a ref whose bytes are not its sha256's
    reads as None (never as another page), a part of one file (an older worker's) still
    reads, and a name that is no ref (a path that would leave the job's folder) is refused."""
    blobs = BlobStore(tmp_path, "t")
    job_id = uuid.uuid4().hex
    datas = [part(n, f"page {n}") for n in range(1, 6)]
    refs = blobs.put_page_parts(job_id, [(sha(d), d) for d in datas])
    folder = tmp_path / "t" / "pages" / job_id
    [pack] = folder.iterdir()
    assert pack.read_bytes() == b"".join(datas)
    before = pack.stat().st_ino
    assert blobs.put_page_parts(job_id, [(sha(d), d) for d in datas]) == refs
    assert [p.stat().st_ino for p in folder.iterdir()] == [before]  # not written again
    assert blobs.read_page_parts(job_id, refs) == datas
    assert blobs.read_page_parts(job_id, refs[3:1:-1]) == [datas[3], datas[2]]
    assert [ref.split("/", 1)[0] for ref in refs] == [sha(d) for d in datas]
    # Another batch, another pack; the first one gone (retention) reads as None.
    [later] = blobs.put_page_parts(job_id, [(sha(datas[0]), datas[0])])
    pack.unlink()
    assert blobs.read_page_parts(job_id, [*refs[:2], later]) == [None, None, datas[0]]
    # A ref that names other bytes of a pack: not its sha256's, so not read.
    sha_, name, offset, length = later.split("/")
    assert blobs.read_page_parts(job_id, [f"{sha(datas[1])}/{name}/{offset}/{length}"]) == [None]
    assert blobs.read_page_parts(job_id, [f"{sha_}/{name}/1/{length}"]) == [None]
    # A part in a file of its own, named by its sha256, as stores wrote before packs.
    (folder / f"{sha(datas[4])}.pb").write_bytes(datas[4])
    assert blobs.read_page_part(job_id, sha(datas[4])) == datas[4]
    for name in ("../" * 4 + "etc/passwd", "A" * 64, sha(datas[1])[:63], "", f"{sha_}/../x/0/1"):
        with pytest.raises(ValueError, match="not a sha256"):
            blobs.read_page_parts(job_id, [name])
        with pytest.raises(ValueError, match="not a sha256"):
            blobs.put_page_parts(job_id, [(name, b"x")])
    assert len(list(folder.iterdir())) == 2


async def test_a_reader_marks_a_job_that_runs_and_its_worker_hears_it_in_a_progress_write(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """The mark that makes a job's parse write drafts (lua/want_drafts.lua): set once by any
    replica's reader while the job is queued or runs, answered again the same to a retry
    (a lost reply), never on an ended or unknown job; it changes neither the record's version
    nor its published state, and the worker reads it in its progress writes' answers."""
    worker, reader = two_replicas(redis_server, tmp_path)
    queued = uuid.uuid4().hex
    assert (await worker.store.create(queued, {"file_name": "q.pdf"})).status == "OK"
    version = (await reader.store.get(queued)).version
    assert await reader.parts.want(queued) == "SET"
    assert await worker.parts.want(queued) == "MARKED"  # a retry, or a second reader
    assert (await reader.store.get(queued)).version == version
    assert await worker.parts.wanted(queued)
    assert (await worker.store.claim(queued, "w0")).ok
    assert (await worker.store.progress(queued, "w0", done=1, total=3, stage="text")).drafts

    job_id = await running_job(worker, "w1")
    assert not await worker.parts.wanted(job_id)
    write = await worker.store.progress(job_id, "w1", done=1, total=3, stage="text")
    assert write.ok and not write.drafts
    assert await reader.parts.want(job_id) == "SET"
    again = await worker.store.progress(job_id, "w1", done=1, total=3, stage="text")
    assert again.status == "NOOP" and again.drafts  # a write that changes nothing says it too
    assert (await worker.store.progress(job_id, "w1", done=2, total=3, stage="text")).drafts
    assert (await worker.store.finish(job_id, "w1", "FAILED", {"err_reason": "X"})).ok
    assert await reader.parts.want(job_id) == "ENDED"
    assert await reader.parts.want(uuid.uuid4().hex) == "NOT_FOUND"
    assert not await reader.parts.wanted(uuid.uuid4().hex)


async def test_a_first_read_waits_for_the_pages_read_before_and_no_longer_than_its_bound(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """api/draft_backfill.py on a real Redis and pub/sub: a read of a running PDF whose record
    says 3 pages are done and finds no draft waits, and returns as soon as the worker points
    at 3 (here another replica, once the read listens on the job's page channel); a read
    that no draft comes for returns at its bound, with what there is (a stall bound, not a
    timing goal); a job with its drafts there is answered without a wait, and a document of
    one page, whose parse drafts nothing, too."""
    worker, reader = two_replicas(redis_server, tmp_path)
    hub = EventHub(redis_server.url)
    await hub.start()
    try:
        job_id = uuid.uuid4().hex
        fields = {"file_name": "a.pdf", "content_type": "pdf"}
        assert (await worker.store.create(job_id, fields)).status == "OK"
        assert (await worker.store.claim(job_id, "w1")).ok
        assert (await worker.store.progress(job_id, "w1", done=3, total=9, stage="text")).ok
        publisher = worker.publisher(job_id, "w1", 1)

        async def drafts_once_it_waits() -> None:
            channel = reader.store.keys.page_channel(job_id)
            with redis.Redis.from_url(redis_server.url) as client:  # it found none, and waits

                def listening() -> bool:
                    return bool(client.pubsub_numsub(channel)[0][1])

                await asyncio.to_thread(eventually, listening, 30, "the read's wait")
            await publisher.publish_drafts(tmp_path, [(n, part(n, f"p{n}")) for n in (1, 2, 3)])

        job = await reader.store.get(job_id)
        later = asyncio.create_task(drafts_once_it_waits())
        got, pointers = await draft_backfill.wanted(reader.store, hub, reader.parts, job, 30)
        await later
        assert [p.page for p in pointers or []] == [1, 2, 3]
        assert not got.progress.ready_pages  # the record's list follows with the progress
        # Another job: the record says 3 done, and no draft ever comes.
        stuck = uuid.uuid4().hex
        assert (await worker.store.create(stuck, fields)).status == "OK"
        assert (await worker.store.claim(stuck, "w2")).ok
        assert (await worker.store.progress(stuck, "w2", done=3, total=9, stage="text")).ok
        started = time.monotonic()
        job = await reader.store.get(stuck)
        got, pointers = await draft_backfill.wanted(reader.store, hub, reader.parts, job, 0.2)
        assert pointers == [] and time.monotonic() - started < 10
        assert await reader.parts.want(stuck) == "MARKED"
        # Drafts there: no wait; one page: nothing to wait for, nothing read.
        job = await reader.store.get(job_id)
        _, pointers = await draft_backfill.wanted(reader.store, hub, reader.parts, job, 30)
        assert [p.page for p in pointers or []] == [1, 2, 3]
        one = uuid.uuid4().hex
        assert (await worker.store.create(one, fields)).status == "OK"
        assert (await worker.store.claim(one, "w3")).ok
        assert (await worker.store.progress(one, "w3", done=1, total=1, stage="text")).ok
        job = await reader.store.get(one)
        assert (await draft_backfill.wanted(reader.store, hub, reader.parts, job, 30))[1] is None
    finally:
        await hub.close()
