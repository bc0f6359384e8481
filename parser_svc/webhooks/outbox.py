"""The webhook outbox: the durable record of every (job, callback) delivery in Redis, as
parser_svc/webhooks/callbacks.py describes it. A delivery is a hash
`docparse:{env}:webhook:<id>`, an
entry in the due set `...:webhooks:due` (scored by when it is next looked at, ms) and in its
job's set `...:webhook:<job_id>:deliveries`; the dead-letter set `...:webhooks:dead` holds the
ones given up on. This module writes those keys and computes the backoff; the dispatcher
(parser_svc/webhooks/dispatcher.py) decides when."""

from __future__ import annotations

import hashlib
import logging
import random
from dataclasses import dataclass

from docparse.errors import DocparseError
from parser_svc.settings import Settings
from parser_svc.state.lifetimes import now_ms
from parser_svc.state.store import JobStore

log = logging.getLogger(__name__)


# KEYS[1] delivery hash, KEYS[2] due set, KEYS[3] the job's deliveries (a set). ARGV: member,
# due ms, keep ms, field/value pairs. A delivery that ended (delivered or dead) is not added
# again.
_ADD = """
if redis.call('HEXISTS', KEYS[1], 'ended_ms') == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('ZADD', KEYS[2], 'NX', ARGV[2], ARGV[1])
return 1
"""


@dataclass(frozen=True)
class Hook:
    """A checked callback: where to deliver, and the name of the secret to sign with."""

    url: str
    secret_name: str


class Outbox:
    """The deliveries of one environment's webhooks in Redis (see the module's notes)."""

    def __init__(self, settings: Settings, store: JobStore) -> None:
        self.settings = settings
        self.store = store
        prefix = store.keys.prefix
        if store.keys.cells:
            # Redis Cluster: every key of the outbox in one slot, so its script and
            # transactions run there (webhook traffic is far below one shard's).
            prefix = f"{prefix}:{{webhooks}}"
        self.due_key = f"{prefix}:webhooks:due"
        self.dead_key = f"{prefix}:webhooks:dead"
        self.lease_key = f"{prefix}:webhooks:lease"
        self._delivery_prefix = f"{prefix}:webhook:"
        self._add = store.client.register_script(_ADD)
        # A delivery's hash outlives the longest a job can wait, run and be retained, plus the
        # whole backoff budget.
        self.keep_ms = store.ttl.listed_ms + self.backoff_budget_ms()

    def backoff_ms(self, attempts: int) -> int:
        """The wait after the `attempts`-th failed attempt: doubling, capped, +0-10% jitter."""
        base = self.settings.webhook_backoff_ms * 2 ** min(max(attempts - 1, 0), 40)
        capped = min(base, int(self.settings.webhook_backoff_max_s * 1000))
        return int(capped * random.uniform(1.0, 1.1))

    def backoff_budget_ms(self) -> int:
        return sum(
            int(self.backoff_ms(n) * 1.1) for n in range(1, self.settings.webhook_max_attempts + 1)
        )

    def key(self, delivery_id: str) -> str:
        return f"{self._delivery_prefix}{delivery_id}"

    def job_key(self, job_id: str) -> str:
        """The set of a job's deliveries (a job that ends wakes them)."""
        return f"{self._delivery_prefix}{job_id}:deliveries"

    @staticmethod
    def delivery_id(job_id: str, callback: Hook) -> str:
        digest = hashlib.sha256(f"{callback.url}\0{callback.secret_name}".encode()).hexdigest()
        return f"{job_id}.{digest[:16]}"

    async def add(self, job_id: str, tenant: str, callback: Hook) -> str:
        delivery = self.delivery_id(job_id, callback)
        now = now_ms()
        fields = ["job_id", job_id, "tenant", tenant, "url", callback.url]
        fields += ["secret", callback.secret_name, "created_ms", str(now)]
        # Due at once: the first round reads the job (it may have ended already: a re-run of
        # the submit answering with an ended job) and, if it has not, looks again later.
        args: list[str | int] = [delivery, now, self.keep_ms, *fields]
        keys = [self.key(delivery), self.due_key, self.job_key(job_id)]
        await self.store.call(lambda: self._add(keys=keys, args=args))
        return delivery

    async def discard(self, job_id: str, callback: Hook) -> None:
        """Removes a delivery written for a job that was not created (best effort: what is
        left is dropped by the dispatcher once its job is known never to have existed)."""
        delivery = self.delivery_id(job_id, callback)
        client = self.store.client

        async def remove() -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.zrem(self.due_key, delivery)
                pipe.delete(self.key(delivery))
                pipe.srem(self.job_key(job_id), delivery)
                await pipe.execute()

        try:
            await self.store.call(remove)
        except DocparseError as err:
            log.info("delivery %s not discarded (%s): the dispatcher drops it", delivery, err)

    async def delivered(self, delivery: str) -> None:
        """Ends a delivery that was answered 2xx."""
        client, key = self.store.client, self.key(delivery)
        ended: list[str | int] = ["ended_ms", now_ms(), "outcome", "delivered"]

        async def done() -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hset(key, items=ended)
                pipe.zrem(self.due_key, delivery)
                await pipe.execute()

        await self.store.call(done)

    async def retry_at(self, delivery: str, due_ms: int, error: str) -> None:
        """A failed attempt: its error kept as the last one, the next attempt due at `due_ms`."""
        client, key = self.store.client, self.key(delivery)

        async def later() -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hset(key, "last_error", error)
                pipe.zadd(self.due_key, {delivery: due_ms}, xx=True)
                await pipe.execute()

        await self.store.call(later)

    async def dead_letter(self, delivery: str, error: str) -> None:
        """Gives a delivery up: it moves to the dead-letter set (scored by now; entries older
        than `tombstone_s` leave it), its hash keeps `error` that long."""
        client, key = self.store.client, self.key(delivery)
        now = now_ms()
        ended: list[str | int] = ["ended_ms", now, "outcome", "dead", "last_error", error]
        keep_ms = self.settings.tombstone_s * 1000

        async def dead() -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hset(key, items=ended)
                pipe.pexpire(key, keep_ms)
                pipe.zrem(self.due_key, delivery)
                pipe.zadd(self.dead_key, {delivery: now})
                pipe.zremrangebyscore(self.dead_key, "-inf", now - keep_ms)
                await pipe.execute()

        await self.store.call(dead)
