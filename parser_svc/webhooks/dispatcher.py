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

from prometheus_client import Counter

from docparse.errors import DocparseError
from parser_svc.observability import WEBHOOK_HELD_BACK
from parser_svc.settings import Settings
from parser_svc.state.lifetimes import now_ms
from parser_svc.state.records import TERMINAL_STATES, record_to_job
from parser_svc.state.store import JobStore
from parser_svc.state.webhook_store import is_batch, job_of
from parser_svc.webhooks.batch_deliveries import batch_message, ended
from parser_svc.webhooks.egress import AddressPolicy, DeliveryFailed, parse_cidrs
from parser_svc.webhooks.outbox import Outbox
from parser_svc.webhooks.signing import WebhookSecrets, message_id, payload, sign
from parser_svc.webhooks.slots import Circuits, Ready, Slots

log = logging.getLogger(__name__)
# Due deliveries taken per round.
BATCH = 100
# Ready deliveries kept waiting for a slot in memory, at most; the rest wait in the outbox.
MAX_WAITING = 2000
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


class Dispatcher:
    """Delivers due webhooks while this replica holds the lease; see
    parser_svc/webhooks/callbacks.py."""

    def __init__(self, settings: Settings, store: JobStore) -> None:
        self.settings = settings
        self.store = store
        self.outbox = Outbox(settings, store)
        self.secrets = WebhookSecrets(settings.webhook_secrets_file)
        # aiohttp only in a replica that delivers webhooks (http_post.py)
        from parser_svc.webhooks.http_post import Egress

        self.egress = Egress(settings, AddressPolicy(parse_cidrs(settings.webhook_allow_cidrs)))
        self.owner = f"{socket.gethostname()}/{os.getpid()}/webhooks"
        self.slots = Slots(
            settings.webhook_concurrency, settings.webhook_per_tenant, settings.webhook_per_host
        )
        self.circuits = Circuits(
            settings.webhook_circuit_after,
            settings.webhook_circuit_open_s,
            settings.webhook_circuit_max_open_s,
        )
        self._tasks: set[asyncio.Task[None]] = set()
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
                    if not held:  # another replica's dispatcher takes them after their claims
                        self.slots.drop_waiting()
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
            for task in list(self._tasks):
                task.cancel()
            await self.egress.close()

    async def listen(self) -> None:
        """While this replica holds the lease: every job event of the environment (one pattern
        subscription); a terminal record wakes the round at once. Pub/sub is at-most-once: a
        lost event only costs the wait until `webhook_recheck_s`. On Redis Cluster the records
        are published on sharded channels, which have no pattern subscription: deliveries are
        found by polling alone (`webhook_poll_s`, a job not yet ended every
        `webhook_recheck_s`)."""
        if not self.outbox.state.has_job_events:
            return
        while True:
            try:
                async for data in self.outbox.state.job_events():
                    self._on_event(data)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                log.info("webhook event subscription lost (%r); polling meanwhile", err)
                await asyncio.sleep(1.0)

    def _on_event(self, data: bytes) -> None:
        if not any(marker in data for marker in _TERMINAL_MARKERS):
            return  # progress: most events; no JSON decoded for them
        try:
            record = json.loads(data)
        except ValueError:
            return
        if record.get("state") in TERMINAL_STATES and record.get("job_id"):
            self._ended.add(str(record["job_id"]))
            if record.get("batch_id"):  # the batch's deliveries: ready if it was the last file
                self._ended.add(str(record["batch_id"]))
            self._wake.set()

    async def _wake_ended(self, now: int) -> None:
        """Makes the deliveries of the jobs that ended since the last round due now."""
        ended, self._ended = list(self._ended), set()
        if ended:
            await self.outbox.state.wake(ended, now)

    async def hold_lease(self) -> bool:
        s = self.settings
        ttl_ms = int(max(s.webhook_poll_s * 3, s.webhook_timeout_s + 5) * 1000)
        return await self.outbox.state.hold_lease(self.owner, ttl_ms)

    async def dispatch_once(self) -> int:
        """One round: the due deliveries, each rescheduled, dropped, or ready (it waits for a
        slot, parser_svc/webhooks/slots.py); then as many ready ones start as slots allow,
        without waiting for them (each frees its slot and wakes the next round when it ends).
        Returns how many were due (BATCH: more are, look again at once)."""
        now = now_ms()
        await self._wake_ended(now)
        # An attempt that ends while the due set is read is read as not ended: whatever was on
        # the wire when the read began waits for the next round (its outcome is written then).
        busy = set(self.slots.on_the_wire)
        found = await self.outbox.state.due(now, BATCH)
        if not found:
            return 0
        later: dict[str, int] = {}
        gone: list[str] = []
        orphans: list[str] = []
        ready: list[tuple[str, dict[str, str], dict[str, str]]] = []
        recheck = now + int(self.settings.webhook_recheck_s * 1000)
        orphan_ms = int(self.settings.sweep_uploads_after_s * 1000)
        for delivery, spec, record, tombstone in found:
            if not spec or "ended_ms" in spec:
                gone.append(delivery)
            elif record and ended(delivery, record):
                ready.append((delivery, spec, record))
            elif record or now - int(spec.get("created_ms") or 0) < orphan_ms:
                later[delivery] = recheck  # not ended yet, or not created yet
            elif tombstone:
                await self._dead(delivery, spec, "the job's record expired before delivery")
            else:
                log.info("webhook %s dropped: its job was never created", delivery)
                orphans.append(delivery)
        # Ready ones wait here for a slot (parser_svc/webhooks/slots.py), claimed: due again
        # only after an attempt's time, a claim renewed each round while they wait.
        claim = now + int((self.settings.webhook_timeout_s + 5) * 1000)
        for delivery, spec, record in ready:
            if delivery in self.slots.on_the_wire or delivery in busy:
                continue  # its attempt reschedules it (a retry may be due before it ends)
            if delivery in self.slots.known:
                later[delivery] = claim
            elif self.slots.waiting() < MAX_WAITING:
                self.slots.add(Ready(delivery, spec, record))
                later[delivery] = claim
            else:  # enough wait here already: the outbox keeps the rest
                later[delivery] = recheck
        later.update(self._circuit_open(now))
        started = self.slots.next_batch()
        # Orphans are forgotten altogether: nothing to remember, no job will ever name them.
        await self.outbox.state.reschedule(later, gone, orphans)
        for item in started:
            task = asyncio.create_task(self._deliver(item))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(found)

    def _circuit_open(self, now: int) -> dict[str, int]:
        """The waiting deliveries to a host whose circuit is open go back to the outbox, due
        when it half-opens."""
        back: dict[str, int] = {}
        for host in self.slots.hosts_waiting():
            until = self.circuits.open_until(host, now)
            if until:
                for ready in self.slots.waiting_for(host):
                    self.slots.take_out(ready.delivery)
                    back[ready.delivery] = until
                    WEBHOOK_HELD_BACK.labels(ready.tenant, "circuit").inc()
        return back

    async def _deliver(self, ready: Ready) -> None:
        try:
            timed_out = await self._attempt(ready.delivery, ready.spec, ready.record)
            if timed_out:
                self.circuits.timed_out(ready.host, now_ms())
            else:
                self.circuits.answered(ready.host)
        except DocparseError as err:  # the store: the claim runs out, another round retries
            log.info("webhook %s: state store error %s; retried later", ready.delivery, err.reason)
        finally:
            self.slots.release(ready)
            self._wake.set()  # a slot is free: the next ready delivery starts now

    async def _attempt(self, delivery: str, spec: dict[str, str], record: dict[str, str]) -> bool:
        """One attempt; whether it timed out (no answer at all)."""
        attempts = await self.outbox.state.count_attempt(delivery)
        target = job_of(delivery)
        started = time.monotonic()
        try:
            msg_id, body, owner = await self._message(delivery, record)
            tenant = spec.get("tenant", "")
            secret = await asyncio.to_thread(self.secrets.get, tenant, spec.get("secret", ""))
            if secret is None:
                raise DeliveryFailed(f"tenant {tenant!r} has no secret {spec.get('secret')!r} now")
            if owner != tenant:  # never: a submit joins its own tenant's jobs and batches
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
            return err.timed_out
        await self.outbox.delivered(delivery)
        DELIVERIES.labels("delivered").inc()
        log.info(
            "webhook delivered: %s %s, attempt %d, %.0f ms",
            "batch" if is_batch(delivery) else "job",
            target,
            attempts,
            (time.monotonic() - started) * 1000,
            extra={"event": "webhook.delivered", "job_id": target, "webhook_id": msg_id},
        )
        return False

    async def _message(self, delivery: str, record: dict[str, str]) -> tuple[str, bytes, str]:
        """The webhook-id, body and tenant of a delivery: its job's terminal record, or its
        batch's Batch (parser_svc/webhooks/batch_deliveries.py)."""
        if is_batch(delivery):
            return await batch_message(self.store, delivery)
        state = record["state"]
        job = record_to_job(record)
        return message_id(job.job_id, state), payload(job, state), record.get("tenant", "")

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
