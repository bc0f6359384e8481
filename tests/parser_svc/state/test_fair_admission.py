"""Fair admission's script (parser_svc/state/lua/fair_admit.lua) against a real Redis, with no
stack: which tenant's and which lane's job a freed queue slot goes to.

A slot is modelled as BullMQ sees it: the script admits while fewer than the window wait in
BullMQ's wait list, so a test keeps one placeholder there (nothing admitted) and takes it out
for one admission at a time, as a worker's claim would."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from docparse.local.embedded_redis import EmbeddedRedis
from docparse_server.tenancy import ApiKeys, caller_from_metadata, identity_metadata, key_digest
from parser_svc.settings import Settings
from parser_svc.state.admission import Admission, Lane, Push
from parser_svc.state.store import JobStore, connect
from parser_svc.work.blobs import BlobStore
from parser_svc.work.queue import JobQueue
from parser_svc.work.sweeper import Sweeper


class Slots:
    """Admission with a window of one job, and the queue's wait list held full between turns."""

    def __init__(self, redis_server: EmbeddedRedis, **overrides: object) -> None:
        self.settings = Settings(
            redis_url=redis_server.url,
            env=f"f{uuid.uuid4().hex[:8]}",
            **{"admit_window": 1, **overrides},  # type: ignore[arg-type]
        )
        self.redis = connect(self.settings, decode_responses=True)
        self.admission = Admission(self.redis, self.settings)
        self.wait = self.admission._keys[1]

    async def hold(self) -> None:
        await self.redis.lpush(self.wait, "placeholder")

    async def push(self, tenant: str, n: int, lane: Lane = "bulk", weight: float = 1.0) -> None:
        for _ in range(n):
            job_id = f"{tenant}-{uuid.uuid4().hex[:8]}"
            pushed, admitted = await self.admission.run(Push(job_id, tenant, lane, weight))
            assert pushed and not admitted  # the window is full

    async def run_queued_then_claim(self, job_id: str, active: str, job_hash: str) -> None:
        """`job_id` admitted, added to BullMQ (its hash), taken by a worker (active) and
        claimed, as the worker's claim reports it."""
        assert await self.turns(1) == [job_id]
        await self.redis.hset(job_hash, "data", "{}")
        await self.redis.lpush(active, job_id)
        await self.admission.run(claimed=[job_id])

    async def turns(self, n: int) -> list[str]:
        """The job ids of `n` admissions, one freed slot at a time."""
        out = []
        for _ in range(n):
            await self.redis.delete(self.wait)
            _, admitted = await self.admission.run()
            await self.hold()
            out.extend(job for job, _ in admitted)
        return out


@pytest.fixture
async def slots(redis_server: EmbeddedRedis) -> AsyncIterator[Slots]:
    made = Slots(redis_server)
    await made.hold()
    yield made
    await made.redis.aclose()


def tenants(admitted: list[str]) -> list[str]:
    return [job.split("-")[0] for job in admitted]


async def test_weighted_tenants_share_admissions_by_weight(slots: Slots) -> None:
    """A (weight 2) and C (weight 1) both backlogged: A gets two admissions for each of C's,
    whoever submitted first (A's 30 before C's 30)."""
    await slots.push("a", 30, weight=2)
    await slots.push("c", 30, weight=1)
    counts = Counter(tenants(await slots.turns(30)))
    assert abs(counts["a"] - 20) <= 1 and abs(counts["c"] - 10) <= 1, counts


async def test_a_tenant_with_one_job_goes_next_whatever_the_backlog(slots: Slots) -> None:
    """FIFO would run A's 30 first; B's one job is admitted within the next two."""
    await slots.push("a", 30)
    await slots.turns(3)
    await slots.push("b", 1)
    assert "b" in tenants(await slots.turns(2))


async def test_an_idle_tenant_saves_no_credit(slots: Slots) -> None:
    """C was away while A had 10 admissions alone: back, C alternates with A instead of
    taking 10 in a row."""
    await slots.push("c", 1)
    await slots.turns(1)
    await slots.push("a", 20)
    await slots.turns(10)
    await slots.push("c", 10)
    assert tenants(await slots.turns(6)) in (["c", "a"] * 3, ["a", "c"] * 3)


async def test_interactive_jumps_the_bulk_backlog_without_starving_it(slots: Slots) -> None:
    """A server-wait job of A goes before A's own bulk backlog; while interactive jobs flood
    (B's 40), bulk still gets one admission after every K (3) interactive ones."""
    await slots.push("a", 10, "bulk")
    await slots.push("a", 1, "interactive")
    first = await slots.turns(1)
    assert await slots.redis.hget(slots.admission._keys[0], first[0]) == "interactive a"
    await slots.push("b", 40, "interactive")
    lanes = tenants(await slots.turns(16))
    assert lanes.count("a") == 4, lanes  # a's are the bulk ones: one in every four
    assert "b" * 4 not in "".join(lanes)  # never four interactive ones in a row


async def test_bulk_never_takes_the_interactive_reserve(redis_server: EmbeddedRedis) -> None:
    """A worker replica registered 1 bulk slot (it runs one more, the reserve) and A's bulk job
    runs on it: A's next bulk jobs wait on their list, B's interactive one is admitted at
    once, so the reserve slot takes it. Once A's job has ended, A's next one goes in."""
    slots = Slots(redis_server, admit_window=4)
    try:
        active = slots.admission._keys[3]
        await slots.admission.run(register=("replica-1", 1, 60_000))
        await slots.redis.lpush(active, "running-a")
        for _ in range(3):
            _, admitted = await slots.admission.run(Push(uuid.uuid4().hex, "a", "bulk"))
            assert admitted == []
        assert await slots.admission.backlog() == 3
        _, admitted = await slots.admission.run(Push("b1", "b", "interactive"))
        assert admitted == [("b1", "interactive")]
        await slots.redis.delete(active)  # A's job ended (BullMQ moved it out of active)
        _, admitted = await slots.admission.run()
        assert [lane for _, lane in admitted] == ["bulk"]  # one: the slot is taken again
        assert await slots.admission.backlog() == 2
        # It leaves: the window (4) rules; 2 wait in the queue, room for the other 2.
        _, admitted = await slots.admission.run(register=("replica-1", 0, 0))
        assert len(admitted) == 2
    finally:
        await slots.redis.aclose()


async def test_a_push_is_once_and_a_claim_leaves_the_counts(slots: Slots) -> None:
    pushed, _ = await slots.admission.run(Push("j1", "t", "bulk"))
    again, _ = await slots.admission.run(Push("j1", "t", "bulk"))
    assert (pushed, again) == (True, False)
    assert await slots.admission.queued("t") == 1
    assert await slots.turns(1) == ["j1"]
    assert await slots.admission.queued("t") == 1  # admitted, not yet claimed
    await slots.admission.run(claimed=["j1"])
    assert await slots.admission.queued("t") == 0
    assert await slots.admission.queued_by_tenant() == {}
    assert await slots.admission.admitting_due(2**62, 10) == []


async def test_the_sweeper_queues_a_job_whose_admitter_died(
    redis_server: EmbeddedRedis, tmp_path: Path
) -> None:
    """Admission popped the job (it is in the admitting set) and its admitter died before the
    BullMQ add: the sweeper adds it. The pending-set repair alone would not (the job is
    already pushed: its push is a no-op)."""
    settings = Settings(
        redis_url=redis_server.url, env=f"f{uuid.uuid4().hex[:8]}", sweep_enqueue_after_s=0
    )
    store = JobStore(connect(settings), settings)
    queue = JobQueue(settings)
    try:
        job_id = uuid.uuid4().hex
        assert (await store.create(job_id, {"tenant": "t"})).status == "OK"
        _, admitted = await queue.admission.run(Push(job_id, "t"))  # no add: it "died"
        assert admitted == [(job_id, "bulk")]
        job_hash = store.keys.queue_job(settings.queue_name, job_id)
        assert not await store._redis.exists(job_hash)
        report = await Sweeper(
            settings, store, queue, BlobStore(tmp_path, settings.env)
        ).sweep_once()
        assert await store._redis.exists(job_hash)
        assert report.enqueued >= 1
        assert (await queue.counts())["waiting"] == 1
    finally:
        await queue.close()
        await store.aclose()


def test_a_keys_weight_and_queue_limits_reach_parser_svc() -> None:
    """The keys file's `weight`, `max_queued_jobs` and `max_running_jobs` travel in the
    identity the gateway forwards (docparse_server/tenancy.py), where submit.py reads them."""
    entry = {"sha256": key_digest("k"), "tenant": "t", "weight": 3, "max_queued_jobs": 7}
    keys = ApiKeys([{**entry, "max_running_jobs": 2}])
    caller = keys.identify([("x-api-key", "k")])
    limits = caller_from_metadata(identity_metadata(caller, "token"), "token").limits
    assert (limits.weight, limits.max_queued_jobs, limits.max_running_jobs) == (3, 7, 2)


async def test_a_capped_tenant_waits_at_its_cap_and_keeps_its_turn(
    redis_server: EmbeddedRedis,
) -> None:
    """Room for ten (nothing binds but the cap): A's key caps it at 2 jobs in flight. Of A's 5,
    two are admitted, B's one beside them; A's third goes in when one of its two is finished
    by BullMQ, not when it is claimed, nor when it waits for a retry (still in flight). A push
    with no cap lifts it."""
    slots = Slots(redis_server, admit_window=10)
    admission, redis = slots.admission, slots.redis
    active = admission._keys[3]
    admitted: list[str] = []

    async def push(job_id: str, tenant: str, cap: int | None) -> None:
        _, now = await admission.run(Push(job_id, tenant, "bulk", 1.0, cap))
        admitted.extend(job for job, _ in now)

    async def claim(job_id: str) -> None:
        await redis.hset(admission._jobs + job_id, "data", "{}")
        await redis.lpush(active, job_id)
        _, now = await admission.run(claimed=[job_id])
        admitted.extend(job for job, _ in now)

    try:
        for n in range(1, 6):
            await push(f"a{n}", "a", 2)
        await push("b1", "b", None)
        assert admitted == ["a1", "a2", "b1"]
        assert await admission.backlog() == 3
        await claim("a1")
        assert admitted == ["a1", "a2", "b1"]  # a1 runs, a2 admitted: two in flight
        await redis.lrem(active, 0, "a1")  # released for a retry: still A's, in flight
        _, now = await admission.run()
        assert now == []
        await redis.hset(admission._jobs + "a1", "finishedOn", "1")  # BullMQ finished it
        _, now = await admission.run()
        assert now == [("a3", "bulk")]
        await push("a6", "a", 0)  # the key's cap was lifted
        assert admitted[-3:] == ["a4", "a5", "a6"]
        assert await admission.backlog() == 0
    finally:
        await redis.aclose()


async def test_a_claimed_job_counts_as_running_while_the_queue_has_it_active(
    slots: Slots,
) -> None:
    """The current share (Admission.shares, lua/fair_shares.lua): a claimed job is its tenant's
    running job while BullMQ has it active, not while it waits for another attempt (its entry
    stays for the retry's claim, which has no queued entry left), and is forgotten once BullMQ
    has finished it."""
    admission, redis = slots.admission, slots.redis
    active, job_hash = admission._keys[3], admission._jobs + "j1"
    await admission.run(Push("j1", "t", "bulk", 2.0))
    await slots.run_queued_then_claim("j1", active, job_hash)
    shares = await admission.shares()
    assert [(s.tenant, s.queued, s.running, s.weight) for s in shares.tenants] == [("t", 0, 1, 2.0)]
    assert (shares.window, shares.bulk_every, shares.active) == (1, 3, 1)
    await redis.lrem(active, 0, "j1")  # released for another attempt: waiting, delayed
    assert (await admission.shares()).tenants == []
    await redis.lpush(active, "j1")  # the retry's claim
    await admission.run(claimed=["j1"])
    assert [(s.tenant, s.running) for s in (await admission.shares()).tenants] == [("t", 1)]
    await redis.lrem(active, 0, "j1")
    await redis.hset(job_hash, "finishedOn", "1")  # BullMQ finished it
    assert (await admission.shares()).tenants == []
    assert not await redis.hexists(admission._prefix + "running", "j1")


def test_only_a_key_marked_admin_forwards_an_admin() -> None:
    """The keys file's `admin` flag (JSON true, nothing else) travels in the identity the
    gateway forwards, trusted only with the internal token; a client's own x-docparse-admin
    is dropped by the gateway, and dev mode (no token) is never admin."""
    keys = ApiKeys(
        [
            {"sha256": key_digest("ops"), "tenant": "ops", "admin": True},
            {"sha256": key_digest("str"), "tenant": "s", "admin": "true"},
            {"sha256": key_digest("plain"), "tenant": "p"},
        ]
    )
    admins = {
        name: caller_from_metadata(
            identity_metadata(keys.identify([("x-api-key", name)]), "token"), "token"
        ).admin
        for name in ("ops", "str", "plain")
    }
    assert admins == {"ops": True, "str": False, "plain": False}
    assert not caller_from_metadata([("x-docparse-admin", "true")], "").admin
