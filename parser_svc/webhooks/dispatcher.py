"""The webhook dispatcher: on one worker replica at a time (a lease), takes the due deliveries
of the outbox, and POSTs the terminal record of each ended job, signed, to its callback; a
terminal job event wakes it at once. The whole path: parser_svc/webhooks/callbacks.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from typing import Any

from prometheus_client import Counter

from docparse.errors import DocparseError
from parser_svc.settings import Settings
from parser_svc.state.lifetimes import now_ms
from parser_svc.state.records import TERMINAL_STATES, decode_hash, record_to_job
from parser_svc.state.store import JobStore
from parser_svc.webhooks.egress import AddressPolicy, DeliveryFailed, Egress, parse_cidrs
from parser_svc.webhooks.outbox import Outbox
from parser_svc.webhooks.signing import WebhookSecrets, message_id, payload, sign

log = logging.getLogger(__name__)
# Due deliveries taken per round.
BATCH = 100
OUTCOMES = ("delivered", "failed", "dead_lettered")
# How a terminal record looks in a published event (cjson, no spaces).
_TERMINAL_MARKERS = tuple(f'"state":"{state}"'.encode() for state in sorted(TERMINAL_STATES))

DELIVERIES = Counter(
    "docparse_webhook_deliveries_total",
    "Webhook delivery attempts by outcome: delivered (a 2xx answer), failed (another answer, "
    "a timeout, a refused address; another attempt follows), dead_lettered (the last allowed "
    "attempt failed: the delivery moved to the dead-letter set)",
    ["outcome"],
    registry=None,
)
for _outcome in OUTCOMES:
    DELIVERIES.labels(_outcome)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Dispatcher:
    """Delivers due webhooks while this replica holds the lease; see
    parser_svc/webhooks/callbacks.py."""

    def __init__(self, settings: Settings, store: JobStore) -> None:
        self.settings = settings
        self.store = store
        self.outbox = Outbox(settings, store)
        self.secrets = WebhookSecrets(settings.webhook_secrets_file)
        self.egress = Egress(settings, AddressPolicy(parse_cidrs(settings.webhook_allow_cidrs)))
        self.owner = f"{socket.gethostname()}/{os.getpid()}/webhooks"
        self._concurrency = max(1, settings.webhook_concurrency)
        self._ended: set[str] = set()
        self._wake = asyncio.Event()

    async def run(self) -> None:
        """Runs until cancelled; never raises otherwise."""
        listener: asyncio.Task[None] | None = None
        try:
            while True:
                taken = 0
                try:
                    held = await self.hold_lease()
                    if held and listener is None:
                        listener = asyncio.create_task(self.listen())
                    elif not held and listener is not None:
                        listener.cancel()
                        listener = None
                    if held:
                        taken = await self.dispatch_once()
                except DocparseError as err:
                    log.info("webhook round skipped: %s", err)
                except Exception:
                    log.exception("webhook round failed")
                if taken < BATCH:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), self.settings.webhook_poll_s)
                    self._wake.clear()
        finally:
            if listener is not None:
                listener.cancel()
            await self.egress.close()

    async def listen(self) -> None:
        """While this replica holds the lease: every job event of the environment (one pattern
        subscription); a terminal record wakes the round at once. Pub/sub is at-most-once: a
        lost event only costs the wait until `webhook_recheck_s`. On Redis Cluster the records
        are published on sharded channels, which have no pattern subscription: deliveries are
        found by polling alone (`webhook_poll_s`, a job not yet ended every
        `webhook_recheck_s`)."""
        if self.store.keys.cells:
            return
        pattern = f"{self.store.keys.job_key_prefix}*:events"
        while True:
            pubsub = self.store.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(pattern)
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None and message.get("type") == "pmessage":
                        self._on_event(message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.info("webhook event subscription lost (%r); polling meanwhile", err)
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]

    def _on_event(self, data: bytes) -> None:
        if not any(marker in data for marker in _TERMINAL_MARKERS):
            return  # progress: most events; no JSON decoded for them
        try:
            record = json.loads(data)
        except ValueError:
            return
        if record.get("state") in TERMINAL_STATES and record.get("job_id"):
            self._ended.add(str(record["job_id"]))
            self._wake.set()

    async def _wake_ended(self, now: int) -> None:
        """Makes the deliveries of the jobs that ended since the last round due now."""
        ended, self._ended = list(self._ended), set()
        if not ended:
            return
        outbox, client = self.outbox, self.store.client

        async def members() -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                for job_id in ended:
                    pipe.smembers(outbox.job_key(job_id))
                return list(await pipe.execute())

        due = {_text(m): now for found in await self.store.call(members) for m in found}
        if due:
            await self.store.call(lambda: client.zadd(outbox.due_key, due, xx=True))

    async def hold_lease(self) -> bool:
        s = self.settings
        ttl_ms = int(max(s.webhook_poll_s * 3, s.webhook_timeout_s + 5) * 1000)
        lease = self.outbox.lease_key
        return await self.store.hold_lease(lease, self.owner, ttl_ms)

    async def dispatch_once(self) -> int:
        """One round: the due deliveries, each rescheduled, dropped or sent. Returns how many
        were due (BATCH: more are, look again at once)."""
        outbox, keys, client = self.outbox, self.store.keys, self.store.client
        now = now_ms()
        await self._wake_ended(now)
        found = await self.store.call(
            lambda: client.zrangebyscore(outbox.due_key, "-inf", now, start=0, num=BATCH)
        )
        ids = [_text(i) for i in found]
        if not ids:
            return 0

        async def read() -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                for delivery in ids:
                    job_id = delivery.rsplit(".", 1)[0]
                    pipe.hgetall(outbox.key(delivery))
                    pipe.hgetall(keys.job(job_id))
                    pipe.exists(keys.tombstone(job_id))
                return list(await pipe.execute())

        replies = await self.store.call(read)
        later: dict[str, int] = {}
        gone: list[str] = []
        orphans: list[str] = []
        ready: list[tuple[str, dict[str, str], dict[str, str]]] = []
        recheck = now + int(self.settings.webhook_recheck_s * 1000)
        orphan_ms = int(self.settings.sweep_uploads_after_s * 1000)
        for index, delivery in enumerate(ids):
            spec = decode_hash(replies[3 * index])
            record = decode_hash(replies[3 * index + 1])
            if not spec or "ended_ms" in spec:
                gone.append(delivery)
            elif record and record.get("state") in TERMINAL_STATES:
                ready.append((delivery, spec, record))
            elif record or now - int(spec.get("created_ms") or 0) < orphan_ms:
                later[delivery] = recheck  # not ended yet, or not created yet
            elif replies[3 * index + 2]:
                await self._dead(delivery, spec, "the job's record expired before delivery")
            else:
                log.info("webhook %s dropped: its job was never created", delivery)
                orphans.append(delivery)
        # At most one request per slot a round, so a round lasts at most one timeout: within
        # the claim and the lease. The rest stay due for the next round, at once.
        ready, waiting = ready[: self._concurrency], len(ready) > self._concurrency
        claim = now + int((self.settings.webhook_timeout_s + 5) * 1000)
        later.update({delivery: claim for delivery, _, _ in ready})

        async def reschedule() -> None:
            async with client.pipeline(transaction=False) as pipe:
                if later:
                    pipe.zadd(outbox.due_key, later, xx=True)
                if gone or orphans:
                    pipe.zrem(outbox.due_key, *gone, *orphans)
                for delivery in orphans:  # nothing to remember: no job will ever name it
                    pipe.delete(outbox.key(delivery), outbox.job_key(delivery.rsplit(".", 1)[0]))
                await pipe.execute()

        if later or gone or orphans:
            await self.store.call(reschedule)
        await asyncio.gather(*(self._deliver(*item) for item in ready))
        return BATCH if waiting else len(ids)

    async def _deliver(self, delivery: str, spec: dict[str, str], record: dict[str, str]) -> None:
        try:
            await self._attempt(delivery, spec, record)
        except DocparseError as err:  # the store: the claim runs out, another round retries
            log.info("webhook %s: state store error %s; retried later", delivery, err.reason)

    async def _attempt(self, delivery: str, spec: dict[str, str], record: dict[str, str]) -> None:
        outbox, client = self.outbox, self.store.client
        key = outbox.key(delivery)
        attempts = int(await self.store.call(lambda: client.hincrby(key, "attempts", 1)))
        state = record["state"]
        job = record_to_job(record)
        body = payload(job, state)
        msg_id = message_id(job.job_id, state)
        started = time.monotonic()
        try:
            tenant = spec.get("tenant", "")
            secret = await asyncio.to_thread(self.secrets.get, tenant, spec.get("secret", ""))
            if secret is None:
                raise DeliveryFailed(f"tenant {tenant!r} has no secret {spec.get('secret')!r} now")
            if record.get("tenant", "") != tenant:  # never: a submit joins its own tenant's jobs
                raise DeliveryFailed("the job belongs to another tenant")
            timestamp = int(time.time())
            headers = {
                "content-type": "application/json",
                "user-agent": "docparse-webhooks",
                "webhook-id": msg_id,
                "webhook-timestamp": str(timestamp),
                "webhook-signature": sign(secret, msg_id, timestamp, body),
            }
            status = await self.egress.post(spec["url"], body, headers)
            if not 200 <= status < 300:
                raise DeliveryFailed(f"the receiver answered HTTP {status}")
        except DeliveryFailed as err:
            await self._failed(delivery, spec, attempts, str(err))
            return
        await self.outbox.delivered(delivery)
        DELIVERIES.labels("delivered").inc()
        log.info(
            "webhook delivered: job %s, attempt %d, %.0f ms",
            job.job_id,
            attempts,
            (time.monotonic() - started) * 1000,
            extra={"event": "webhook.delivered", "job_id": job.job_id, "webhook_id": msg_id},
        )

    async def _failed(self, delivery: str, spec: dict[str, str], attempts: int, error: str) -> None:
        job_id = spec.get("job_id", "")
        if attempts >= self.settings.webhook_max_attempts:
            await self._dead(delivery, spec, error)
            DELIVERIES.labels("dead_lettered").inc()
            return
        wait_ms = self.outbox.backoff_ms(attempts)
        await self.outbox.retry_at(delivery, now_ms() + wait_ms, error)
        DELIVERIES.labels("failed").inc()
        log.info(
            "webhook attempt %d for job %s failed (%s); next in %.1f s",
            attempts,
            job_id,
            error,
            wait_ms / 1000,
            extra={"event": "webhook.failed", "job_id": job_id},
        )

    async def _dead(self, delivery: str, spec: dict[str, str], error: str) -> None:
        await self.outbox.dead_letter(delivery, error)
        log.warning(
            "webhook for job %s dead-lettered: %s",
            spec.get("job_id", ""),
            error,
            extra={"event": "webhook.dead_lettered", "job_id": spec.get("job_id", "")},
        )
