"""The webhook outbox in Redis: every read and write of its keys (`Keys.webhook*`).

A delivery is a hash (`Keys.webhook`), an entry in the due set (`Keys.webhooks_due`, scored by
when it is next looked at, ms) and in its job's set (`Keys.webhook_deliveries`); the
dead-letter set (`Keys.webhooks_dead`) holds the ones given up on. This class only stores;
parser_svc/webhooks/outbox.py decides what a delivery's fields and times are, and
parser_svc/webhooks/dispatcher.py when to look.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, NamedTuple

from parser_svc.state.keys import batch_file_id
from parser_svc.state.lua_scripts import ADD_DELIVERY
from parser_svc.state.records import decode_hash
from parser_svc.state.store import JobStore


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# A batch's delivery id: `batch.<batch_id>.<digest>` (a job's: `<job_id>.<digest>`).
BATCH_DELIVERY = "batch."


def is_batch(delivery: str) -> bool:
    """Whether a delivery is a batch's (one `batch.completed` for the whole batch)."""
    return delivery.startswith(BATCH_DELIVERY)


def job_of(delivery: str) -> str:
    """The job a delivery id names (`<job_id>.<digest>`), or for a batch's its batch id."""
    return delivery.removeprefix(BATCH_DELIVERY).rsplit(".", 1)[0]


class DueDelivery(NamedTuple):
    """A due delivery as read with its job: its hash ({} once gone), its job's record ({} when
    there is none) and whether the job's tombstone exists. For a batch's delivery: the batch's
    meta record, and the tombstone of its first file."""

    delivery: str
    spec: dict[str, str]
    record: dict[str, str]
    tombstone: bool


class WebhookStore:
    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.keys = store.keys

    async def add(
        self, delivery: str, job_id: str, fields: Sequence[str], due_ms: int, keep_ms: int
    ) -> bool:
        """Writes a delivery (field, value pairs), due at `due_ms`, its keys kept `keep_ms`
        (lua/add_delivery.lua); False when it had already ended (nothing written)."""
        keys = [self.keys.webhook(delivery), self.keys.webhooks_due]
        keys.append(self.keys.webhook_deliveries(job_id))
        args: list[str | bytes | int] = [delivery, due_ms, keep_ms, *fields]
        reply = await self.store.call(lambda: ADD_DELIVERY(self.store._redis, keys, args))
        return bool(reply[0])

    async def remove(self, job_id: str, delivery: str) -> None:
        """Removes a delivery: its hash and its entries."""

        async def remove() -> None:
            async with self.store._redis.pipeline(transaction=True) as pipe:
                pipe.zrem(self.keys.webhooks_due, delivery)
                pipe.delete(self.keys.webhook(delivery))
                pipe.srem(self.keys.webhook_deliveries(job_id), delivery)
                await pipe.execute()

        await self.store.call(remove)

    async def delivered(self, delivery: str, fields: Sequence[str | int]) -> None:
        """Ends a delivery that was answered: `fields` (field, value pairs) into its hash, out
        of the due set."""

        async def done() -> None:
            async with self.store._redis.pipeline(transaction=True) as pipe:
                pipe.hset(self.keys.webhook(delivery), items=list(fields))
                pipe.zrem(self.keys.webhooks_due, delivery)
                await pipe.execute()

        await self.store.call(done)

    async def dead_letter(
        self, delivery: str, fields: Sequence[str | int], now_ms: int, keep_ms: int
    ) -> None:
        """Gives a delivery up: `fields` into its hash, which lives `keep_ms` more; out of the
        due set into the dead-letter set (scored `now_ms`; entries older than `keep_ms` leave
        it)."""
        key, dead = self.keys.webhook(delivery), self.keys.webhooks_dead

        async def dead_letter() -> None:
            async with self.store._redis.pipeline(transaction=True) as pipe:
                pipe.hset(key, items=list(fields))
                pipe.pexpire(key, keep_ms)
                pipe.zrem(self.keys.webhooks_due, delivery)
                pipe.zadd(dead, {delivery: now_ms})
                pipe.zremrangebyscore(dead, "-inf", now_ms - keep_ms)
                await pipe.execute()

        await self.store.call(dead_letter)

    async def retry_at(self, delivery: str, due_ms: int, error: str) -> None:
        """A failed attempt: `error` kept as its last, the delivery due again at `due_ms`."""

        async def later() -> None:
            async with self.store._redis.pipeline(transaction=True) as pipe:
                pipe.hset(self.keys.webhook(delivery), "last_error", error)
                pipe.zadd(self.keys.webhooks_due, {delivery: due_ms}, xx=True)
                await pipe.execute()

        await self.store.call(later)

    async def count_attempt(self, delivery: str) -> int:
        """Counts one more attempt of the delivery; answers how many there were."""
        key = self.keys.webhook(delivery)
        return int(await self.store.call(lambda: self.store._redis.hincrby(key, "attempts", 1)))

    async def hold_lease(self, owner: str, ttl_ms: int) -> bool:
        """The dispatcher's lease (`JobStore.hold_lease`)."""
        return await self.store.hold_lease(self.keys.webhooks_lease, owner, ttl_ms)

    async def wake(self, job_ids: Sequence[str], now_ms: int) -> None:
        """Makes every open delivery of these jobs due at `now_ms`."""
        redis = self.store._redis

        async def members() -> list[Any]:
            async with redis.pipeline(transaction=False) as pipe:
                for job_id in job_ids:
                    pipe.smembers(self.keys.webhook_deliveries(job_id))
                return list(await pipe.execute())

        due = {_text(m): now_ms for found in await self.store.call(members) for m in found}
        if due:
            await self.store.call(lambda: redis.zadd(self.keys.webhooks_due, due, xx=True))

    async def due(self, now_ms: int, limit: int) -> list[DueDelivery]:
        """Up to `limit` deliveries due by `now_ms`, each read with its job."""
        redis, keys = self.store._redis, self.keys
        found = await self.store.call(
            lambda: redis.zrangebyscore(keys.webhooks_due, "-inf", now_ms, start=0, num=limit)
        )
        ids = [_text(i) for i in found]
        if not ids:
            return []

        async def read() -> list[Any]:
            async with redis.pipeline(transaction=False) as pipe:
                for delivery in ids:
                    pipe.hgetall(keys.webhook(delivery))
                    if is_batch(delivery):
                        pipe.hgetall(keys.batch_meta(job_of(delivery)))
                        pipe.exists(keys.tombstone(batch_file_id(job_of(delivery), 0)))
                        continue
                    pipe.hgetall(keys.job(job_of(delivery)))
                    pipe.exists(keys.tombstone(job_of(delivery)))
                return list(await pipe.execute())

        replies = await self.store.call(read)
        found_with = zip(ids, replies[::3], replies[1::3], replies[2::3], strict=True)
        return [
            DueDelivery(delivery, decode_hash(spec), decode_hash(record), bool(tomb))
            for delivery, spec, record, tomb in found_with
        ]

    async def reschedule(
        self, later: dict[str, int], gone: Sequence[str], orphans: Sequence[str]
    ) -> None:
        """One round's outcome: `later` due again then (ms), `gone` out of the due set, and
        `orphans` (their job was never created) forgotten altogether."""
        if not (later or gone or orphans):
            return
        keys = self.keys

        async def reschedule() -> None:
            async with self.store._redis.pipeline(transaction=False) as pipe:
                if later:
                    pipe.zadd(keys.webhooks_due, later, xx=True)
                if gone or orphans:
                    pipe.zrem(keys.webhooks_due, *gone, *orphans)
                for delivery in orphans:
                    pipe.delete(keys.webhook(delivery), keys.webhook_deliveries(job_of(delivery)))
                await pipe.execute()

        await self.store.call(reschedule)

    @property
    def has_job_events(self) -> bool:
        """Whether `job_events` can follow every job's events: on one Redis; not on Redis
        Cluster, where records go out on sharded channels (no pattern subscription there)."""
        return not self.keys.cells

    async def job_events(self) -> AsyncIterator[bytes]:
        """Every job event of the environment as it is published (one pattern subscription),
        until the connection fails (raised) or the caller stops. One Redis only
        (`has_job_events`)."""
        pubsub = self.store._redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.psubscribe(self.keys.job_events_pattern)
            while True:
                message = await pubsub.get_message(timeout=1.0)
                if message is not None and message.get("type") == "pmessage":
                    yield message["data"]
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
