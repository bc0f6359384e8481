"""A stateful property test of the job scripts on a real Redis: duplicated, reordered, stale
and re-run writes (a retry after a lost reply) from several workers never break the record's
rules, and after every step each key lives exactly as long as parser_svc/state/lifetimes.py says."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from docparse.errors import DocparseError
from docparse.local.embedded_redis import EmbeddedRedis
from docparse.v1 import job_pb2
from parser_svc.settings import Settings
from parser_svc.state.lifetimes import now_ms
from parser_svc.state.store import JobStore, connect

pytestmark = pytest.mark.stack  # an EmbeddedRedis of its own

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
STATE_NAMES = {
    job_pb2.STATE_QUEUED: "QUEUED",
    job_pb2.STATE_RUNNING: "RUNNING",
    job_pb2.STATE_SUCCEEDED: "SUCCEEDED",
    job_pb2.STATE_FAILED: "FAILED",
    job_pb2.STATE_CANCELLED: "CANCELLED",
}
_server: EmbeddedRedis | None = None
# Distinct lifetimes, so a key given the wrong one is caught (seconds).
LIFETIMES: dict[str, Any] = {
    "queued_ttl_s": 5000,
    "running_ttl_s": 300,
    "retention_s": 2000,
    "tombstone_s": 700,
}
TTL_S = {"QUEUED": 5000, "RUNNING": 300, "SUCCEEDED": 2000, "FAILED": 2000, "CANCELLED": 2000}


@pytest.fixture(scope="module", autouse=True)
def redis_for_machine(tmp_path_factory: pytest.TempPathFactory) -> Any:
    global _server
    _server = EmbeddedRedis(Path(tmp_path_factory.mktemp("machine")))
    _server.start()
    yield
    _server.stop()


class JobRecordMachine(RuleBasedStateMachine):
    """The model: what the record must be after each write, given the rules in update_job.lua."""

    def __init__(self) -> None:
        super().__init__()
        assert _server is not None
        self.loop = asyncio.new_event_loop()
        config = Settings(redis_url=_server.url, env=f"sm{uuid.uuid4().hex[:8]}", **LIFETIMES)
        self.store = JobStore(connect(config), config)
        self.job_id = uuid.uuid4().hex
        # Fences a writer may present: the unowned record's "", a stranger's, and every
        # token a claim hands out (so stale tokens stay in play).
        self.fences: list[str] = ["", "stranger"]
        self.writes: list[tuple[str, tuple[Any, ...]]] = [("cancel", ())]
        # The model.
        self.state = "QUEUED"
        self.fence = ""
        self.version = 1
        self.done = 0
        self.total = 0
        self.stage = "queued"
        self.attempt = 0
        self.terminal_record: job_pb2.Job | None = None
        self.last_status = ""
        self.expired = False
        self.last_write: tuple[str, tuple[Any, ...]] | None = None

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.store.aclose())
        self.loop.close()

    @initialize()
    def create(self) -> None:
        assert self.run(self.store.create(self.job_id, {"file_name": "m.pdf"})).status == "OK"

    def _expect(self, status: str, changed: bool) -> None:
        if changed:
            assert status == "OK", status
            self.version += 1
        else:
            assert status != "OK" or self.state == "CANCELLED", status

    # --- writes -------------------------------------------------------------------------

    @rule(worker=st.integers(1, 3))
    def claim(self, worker: int) -> None:
        fence = f"w{worker}:{len(self.fences)}"
        self.fences.append(fence)
        self._apply("claim", (fence,))

    @rule(data=st.data(), done=st.integers(0, 40), total=st.sampled_from([0, 40]))
    def progress(self, data: st.DataObject, done: int, total: int) -> None:
        fence = data.draw(st.sampled_from(self.fences))
        self._apply("progress", (fence, done, total))

    @rule(data=st.data(), final=st.sampled_from(["SUCCEEDED", "FAILED"]))
    def finish(self, data: st.DataObject, final: str) -> None:
        fence = data.draw(st.sampled_from(self.fences))
        self._apply("finish", (fence, final))

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        self._apply("release", (data.draw(st.sampled_from(self.fences)),))

    @rule()
    def cancel(self) -> None:
        self._apply("cancel", ())

    @rule(data=st.data())
    def duplicate(self, data: st.DataObject) -> None:
        """Replays an earlier write exactly (a retried or re-ordered message)."""
        op, args = data.draw(st.sampled_from(self.writes))
        self._apply(op, args)

    @rule()
    def rerun_after_lost_reply(self) -> None:
        """The last write's reply was lost and the writer runs it again, as redis-py's retry or
        the worker's own retry does: a write that went in answers DONE (or NOOP) and changes
        nothing, so the writer goes on as if it had seen OK."""
        if self.expired or self.last_write is None or self.last_status not in ("OK", "DONE"):
            return
        op, args = self.last_write
        before = self.run(self.store.get(self.job_id))
        result = self._send(op, args)
        assert result.ok or result.status == "NOOP", (op, args, result)
        assert self.run(self.store.get(self.job_id)) == before

    @rule()
    def its_lifetime_passes(self) -> None:
        """Time runs past the record's TTL (as if the job waited, ran or was retained that
        long): the record goes, the tombstone stays. A write after that never brings the job
        back (NOT_FOUND), and a read answers JOB_EXPIRED, never a bare not-found."""
        if self.expired:
            return
        client, key = self.store._redis, self.store.keys.job(self.job_id)
        self.run(client.pexpire(key, 1))
        while self.run(client.exists(key)):
            pass  # it goes within a millisecond or so
        self.expired = True

    # --- the model of update_job.lua ----------------------------------------------------

    def _send(self, op: str, args: tuple[Any, ...]) -> Any:
        if op == "claim":
            return self.run(self.store.claim(self.job_id, args[0]))
        if op == "progress":
            fence, done, total = args
            return self.run(
                self.store.progress(self.job_id, fence, done=done, total=total, stage="text")
            )
        if op == "finish":
            fields: dict[str, str | int] = (
                {"res_sha256": "ab"} if args[1] == "SUCCEEDED" else {"err_reason": "X"}
            )
            return self.run(self.store.finish(self.job_id, args[0], args[1], fields))
        if op == "release":
            return self.run(self.store.release(self.job_id, args[0]))
        return self.run(self.store.cancel(self.job_id))

    def _apply(self, op: str, args: tuple[Any, ...]) -> None:
        self.writes.append((op, args))
        result = self._send(op, args)
        self.last_write, self.last_status = (op, args), result.status
        if self.expired:
            assert result.status == "NOT_FOUND", (op, args, result)
            return
        fence = args[0] if args else None
        # A write whose effect is already in answers DONE: the same writer's claim, release
        # or terminal write, or a second cancel.
        if self.state in TERMINAL:
            repeat = (op == "finish" and fence == self.fence and args[1] == self.state) or (
                op == "cancel" and self.state == "CANCELLED"
            )
            assert result.status == ("DONE" if repeat else "TERMINAL"), (op, args, result)
            return
        if (op == "claim" and self.state == "RUNNING" and fence == self.fence) or (
            op == "release" and self.state == "QUEUED" and self.fence == f"released:{fence}"
        ):
            assert result.status == "DONE", (op, args, result)
            return
        if op not in ("claim", "cancel") and fence != self.fence:
            assert result.status == "FENCED", (op, args, self.fence, result)
            return
        changed = True
        if op == "claim":
            self.fence, self.state, self.stage = fence, "RUNNING", "opening"  # type: ignore[assignment]
            self.attempt += 1
        elif op == "release":
            self.fence, self.state, self.stage = f"released:{fence}", "QUEUED", "retrying"
        elif op == "cancel":
            self.state, self.stage, self.fence = "CANCELLED", "done", "cancelled"
        elif op == "finish":
            self.state, self.stage = args[1], "done"
        else:
            _, done, total = args
            changed = False
            if total > self.total:
                self.total, changed = total, True
            if done >= self.done and self.stage != "text":
                self.stage, changed = "text", True
            if done > self.done:
                self.done, changed = done, True
        assert result.status == ("OK" if changed else "NOOP"), (op, args, result)
        if changed:
            self.version += 1

    # --- what a client may rely on ------------------------------------------------------

    @invariant()
    def record_matches_the_model(self) -> None:
        if self.expired:
            with pytest.raises(DocparseError) as gone:
                self.run(self.store.get(self.job_id))
            assert gone.value.reason == "JOB_EXPIRED"
            return
        job = self.run(self.store.get(self.job_id))
        assert STATE_NAMES[job.state] == self.state
        assert job.version == self.version
        assert job.progress.done == self.done and job.progress.total == self.total
        assert job.attempt == self.attempt
        if self.state in TERMINAL:
            if self.terminal_record is None:
                self.terminal_record = job
            assert job == self.terminal_record  # terminal records never change again

    @invariant()
    def keys_live_as_long_as_the_rules_say(self) -> None:
        if self.expired:
            return
        keys = self.store.keys
        record_ms = self.run(self.store._redis.pttl(keys.job(self.job_id)))
        tomb_ms = self.run(self.store._redis.pttl(keys.tombstone(self.job_id)))
        expected_ms = TTL_S[self.state] * 1000
        # Within the few seconds this example has run since the last write.
        assert expected_ms - 10_000 < record_ms <= expected_ms, (self.state, record_ms)
        extra_ms = LIFETIMES["tombstone_s"] * 1000
        assert abs(tomb_ms - (record_ms + extra_ms)) < 10_000, (tomb_ms, record_ms)
        job = self.run(self.store.get(self.job_id))
        assert abs(job.expire_time.ToMilliseconds() - (now_ms() + record_ms)) < 10_000


JobRecordMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestJobRecord = JobRecordMachine.TestCase
