"""Durability across a Redis failover: with DOCPARSE_REDIS_MIN_REPLICAS_ACK, a create or a
terminal write answers only once a replica has it (WAIT); short of that the caller hears
UNAVAILABLE STATE_STORE_NOT_REPLICATED and retries, and the retry answers with what the first
call did. Without it the primary's word is enough (the loss window the operations guide
describes). A real primary and a real replica, the replica frozen with SIGSTOP."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import redis

from docparse.errors import DocparseError
from docparse.local.embedded_redis import EmbeddedRedis, free_port, redis_server_binary
from parser_svc.settings import Settings
from parser_svc.state.store import JobStore, connect
from tests.helpers import eventually
from tests.redis_servers import Server

pytestmark = pytest.mark.stack  # redis-servers of its own


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedRedis, int, int]]:
    """(primary, replica port, replica pid)."""
    with EmbeddedRedis(tmp_path_factory.mktemp("primary")) as primary:
        port = free_port()
        folder = Path(tmp_path_factory.mktemp("replica"))
        replica = subprocess.Popen(
            [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
             "--dir", str(folder), "--save", "", "--appendonly", "no",
             "--replicaof", "127.0.0.1", str(primary.port)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            client = redis.Redis(port=port)
            eventually(
                lambda: client.info("replication").get("master_link_status") == "up",
                30,
                "the replica in sync",
            )
            client.close()
            yield primary, port, replica.pid
        finally:
            replica.kill()
            replica.wait()


def store_for(primary: EmbeddedRedis, replicas: int) -> JobStore:
    settings = Settings(
        redis_url=primary.url,
        env=f"r{uuid.uuid4().hex[:8]}",
        redis_min_replicas_ack=replicas,
        redis_replica_wait_ms=300,
    )
    return JobStore(connect(settings), settings)


async def test_a_create_answers_once_a_replica_has_it(
    pair: tuple[EmbeddedRedis, int, int],
) -> None:
    primary, replica_port, replica_pid = pair
    store = store_for(primary, replicas=1)
    on_replica = redis.Redis(port=replica_port)
    fields = {"file_name": "a.pdf", "content_sha256": "c" * 64, "tenant": "t"}
    request = store.keys.request("t", "durable")
    first = uuid.uuid4().hex
    assert (await store.create(first, fields, request_key=request)).created
    assert on_replica.exists(store.keys.job(first))  # acknowledged: the replica has it

    os.kill(replica_pid, signal.SIGSTOP)
    try:
        second = uuid.uuid4().hex
        with pytest.raises(DocparseError) as unsure:
            await store.create(second, {**fields, "content_sha256": "d" * 64},
                               request_key=store.keys.request("t", "frozen"))  # fmt: skip
        assert (unsure.value.code, unsure.value.reason) == (
            grpc.StatusCode.UNAVAILABLE, "STATE_STORE_NOT_REPLICATED")  # fmt: skip
        assert await store._redis.exists(store.keys.job(second))  # the primary has it

        lax = store_for(primary, replicas=0)
        assert (await lax.create(uuid.uuid4().hex, fields)).created  # the loss window
        await lax.aclose()
    finally:
        os.kill(replica_pid, signal.SIGCONT)
    # The documented retry (same request_id) answers with the job the first call made.
    retry = await store.create(uuid.uuid4().hex, {**fields, "content_sha256": "d" * 64},
                               request_key=store.keys.request("t", "frozen"))  # fmt: skip
    assert (retry.status, retry.job_id) == ("REPLAY", second)
    eventually(lambda: on_replica.exists(store.keys.job(second)), 30, "replicated")
    on_replica.close()
    await store.aclose()


async def test_a_terminal_write_waits_for_a_replica(pair: tuple[EmbeddedRedis, int, int]) -> None:
    primary, _, replica_pid = pair
    store = store_for(primary, replicas=1)
    job_id = uuid.uuid4().hex
    assert (await store.create(job_id, {"file_name": "a.pdf"})).created
    assert (await store.claim(job_id, "w1")).ok
    assert (await store.progress(job_id, "w1", done=1, total=2, stage="text")).ok  # no WAIT

    os.kill(replica_pid, signal.SIGSTOP)
    try:
        with pytest.raises(DocparseError) as unsure:
            await store.finish(job_id, "w1", "SUCCEEDED", {"res_sha256": "x"})
        assert unsure.value.reason == "STATE_STORE_NOT_REPLICATED"
    finally:
        os.kill(replica_pid, signal.SIGCONT)
    # The worker's retry finds its own write: DONE.
    assert (await store.finish(job_id, "w1", "SUCCEEDED", {"res_sha256": "x"})).status == "DONE"
    await store.aclose()


async def test_a_primary_without_its_replicas_refuses_retryably(tmp_path: Path) -> None:
    """`min-replicas-to-write` (docs/operations.md, failover): a primary cut off from its
    replicas refuses every write with NOREPLICAS; a caller hears UNAVAILABLE and retries."""
    port = free_port()
    server = Server(
        redis_server_binary(), tmp_path, port, [f"port {port}", "min-replicas-to-write 1"]
    )
    settings = Settings(redis_url=f"redis://127.0.0.1:{port}/0", env="alone")
    store = JobStore(connect(settings), settings)
    try:
        with pytest.raises(DocparseError) as refused:
            await store.create(uuid.uuid4().hex, {"file_name": "a.pdf"})
        assert (refused.value.code, refused.value.reason) == (
            grpc.StatusCode.UNAVAILABLE, "STATE_STORE_NOT_REPLICATED")  # fmt: skip
        assert "min-replicas-to-write" in refused.value.message
    finally:
        await store.aclose()
        server.stop()
