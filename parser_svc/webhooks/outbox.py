"""The webhook outbox: the durable record of every (job, callback) delivery, as
parser_svc/webhooks/callbacks.py describes it. Its keys and commands are the state package's
(parser_svc/state/webhook_store.py); this module decides a delivery's fields, how long they
are kept and when a failed attempt is tried again (backoff); the dispatcher
(parser_svc/webhooks/dispatcher.py) decides when to look."""

from __future__ import annotations

import hashlib
import logging
import random
from dataclasses import dataclass

from docparse.errors import DocparseError
from parser_svc.settings import Settings
from parser_svc.state.lifetimes import now_ms
from parser_svc.state.store import JobStore
from parser_svc.state.webhook_store import BATCH_DELIVERY, WebhookStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hook:
    """A checked callback: where to deliver, and the name of the secret to sign with."""

    url: str
    secret_name: str


class Outbox:
    """The deliveries of one environment's webhooks in Redis (see the module's notes)."""

    def __init__(self, settings: Settings, store: JobStore) -> None:
        self.settings = settings
        self.state = WebhookStore(store)
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

    @staticmethod
    def delivery_id(job_id: str, callback: Hook, *, batch: bool = False) -> str:
        """`<job_id>.<digest>`; a batch's (`job_id` its batch id) `batch.<batch_id>.<digest>`
        (parser_svc/state/webhook_store.py tells them apart)."""
        digest = hashlib.sha256(f"{callback.url}\0{callback.secret_name}".encode()).hexdigest()
        return f"{BATCH_DELIVERY if batch else ''}{job_id}.{digest[:16]}"

    async def add(self, job_id: str, tenant: str, callback: Hook, *, batch: bool = False) -> str:
        """Writes the delivery of a job's (or with `batch`, a batch's) callback."""
        delivery = self.delivery_id(job_id, callback, batch=batch)
        now = now_ms()
        fields = ["job_id", job_id, "tenant", tenant, "url", callback.url]
        fields += ["secret", callback.secret_name, "created_ms", str(now)]
        # Due at once: the first round reads the job (it may have ended already: a re-run of
        # the submit answering with an ended job) and, if it has not, looks again later.
        await self.state.add(delivery, job_id, fields, now, self.keep_ms)
        return delivery

    async def discard(self, job_id: str, callback: Hook, *, batch: bool = False) -> None:
        """Removes a delivery written for a job (or batch) that was not created (best effort:
        what is left is dropped by the dispatcher once its job is known never to have existed)."""
        delivery = self.delivery_id(job_id, callback, batch=batch)
        try:
            await self.state.remove(job_id, delivery)
        except DocparseError as err:
            log.info("delivery %s not discarded (%s): the dispatcher drops it", delivery, err)

    async def delivered(self, delivery: str) -> None:
        """Ends a delivery that was answered 2xx."""
        await self.state.delivered(delivery, ["ended_ms", now_ms(), "outcome", "delivered"])

    async def retry_at(self, delivery: str, due_ms: int, error: str) -> None:
        """A failed attempt: its error kept as the last one, the next attempt due at `due_ms`."""
        await self.state.retry_at(delivery, due_ms, error)

    async def dead_letter(self, delivery: str, error: str) -> None:
        """Gives a delivery up: it moves to the dead-letter set (scored by now; entries older
        than `tombstone_s` leave it), its hash keeps `error` that long."""
        now = now_ms()
        ended: list[str | int] = ["ended_ms", now, "outcome", "dead", "last_error", error]
        await self.state.dead_letter(delivery, ended, now, self.settings.tombstone_s * 1000)
