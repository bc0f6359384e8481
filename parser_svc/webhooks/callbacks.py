"""Webhooks: a job that names a callback gets its terminal record POSTed, signed, at least once.

The durable part is an outbox in Redis, written by the submit and read by one dispatcher:

- Each (job, callback) is a *delivery*: a hash `docparse:{env}:webhook:<job_id>.<digest>`
  (URL, secret name, tenant, attempts) and an entry in the due set `...:webhooks:due`, scored by
  the time it is next looked at (ms). The submit writes both *before* the create script runs
  (with the job id it is about to create; a create that answers with an earlier job moves it to
  that job), so a job with a callback never exists without its delivery, whatever reply is lost
  or whichever replica dies; a delivery whose job was never created is dropped after
  `sweep_uploads_after_s`. Writing it is idempotent: a re-run of the submit changes nothing,
  and re-adds a delivery only while it has not ended.
- One worker replica at a time (a lease, as the sweeper's) runs the dispatcher: every
  `webhook_poll_s` it takes the due deliveries, reads their jobs, and puts back the ones whose
  job has not ended (`webhook_recheck_s` later). While it holds the lease it also listens to
  every job event (one pattern subscription): a terminal record makes that job's deliveries
  (the set `...:webhook:<job_id>:deliveries`) due at once and wakes the round, so a webhook
  leaves within milliseconds; a lost event costs at most `webhook_recheck_s`. For an ended
  job it claims the delivery (moves
  it past the request's timeout, so a replica dying mid-request leaves it to be retried), then
  POSTs `{"type": "job.succeeded", "timestamp": ..., "data": <the Job as JSON>}` signed the
  Standard Webhooks way. A 2xx answer ends the delivery; anything else (another status, a
  redirect, a timeout, a refused address) schedules the next attempt with exponential backoff;
  after `webhook_max_attempts` the delivery moves to the dead-letter set `...:webhooks:dead`
  (scored by that moment; its hash keeps the last error for `tombstone_s`).
- `webhook-id` is `msg_<job_id>_<state>`: the same for every attempt (and every re-run), so a
  receiver that saw it already answers 2xx and does nothing.

Egress is SSRF-safe: the URL's host is resolved by us, every address it resolves to must be
public (or listed in `webhook_allow_cidrs`), and the connection goes to the addresses checked
(aiohttp connects to what our resolver returns, no second lookup); no proxy from the
environment, no redirect followed, a timeout, and at most `webhook_max_response_bytes` read.

A batch's callback (CreateBatch, UploadBatch) is checked the same way and is one delivery for
the whole batch, `batch.completed` when its last file ends: parser_svc/webhooks/batch_deliveries.py.

This module is the submit's side (`Callbacks`) and the start's check (`check_config`); the
rest, by capability: parser_svc/webhooks/outbox.py (a delivery's fields, backoff, the ends of
an attempt; its keys and commands in parser_svc/state/webhook_store.py, the keys built in
parser_svc/state/keys.py), parser_svc/webhooks/dispatcher.py (the lease, the
rounds, the attempts), parser_svc/webhooks/signing.py (secrets, signature, body) and
parser_svc/webhooks/egress.py (the SSRF guard and the POST).
"""

from __future__ import annotations

import asyncio

from docparse.reasons import ErrorReason
from docparse.v1 import parser_service_pb2
from docparse_server.errors import error
from parser_svc.settings import Settings
from parser_svc.state.store import JobStore
from parser_svc.webhooks.egress import (
    AddressPolicy,
    ip_literal,
    parse_cidrs,
    parse_url,
    resolve,
)
from parser_svc.webhooks.outbox import Hook, Outbox
from parser_svc.webhooks.signing import WebhookSecrets

# How long a submit waits for the callback's host to resolve before accepting it unchecked
# (every delivery checks again).
RESOLVE_AT_SUBMIT_S = 2.0


def check_config(settings: Settings) -> None:
    """Fails closed at start: WEBHOOK_CONFIG_INVALID when the secrets file or the allow-list
    cannot be read."""
    parse_cidrs(settings.webhook_allow_cidrs)
    WebhookSecrets(settings.webhook_secrets_file)


class Callbacks:
    """The submit's side: checks a request's callback and writes its delivery."""

    def __init__(self, settings: Settings, store: JobStore) -> None:
        self.secrets = WebhookSecrets(settings.webhook_secrets_file)
        self.policy = AddressPolicy(parse_cidrs(settings.webhook_allow_cidrs))
        self.outbox = Outbox(settings, store)

    async def check(self, request: parser_service_pb2.SubmitJobRequest, tenant: str) -> Hook | None:
        """The request's callback, or None; INVALID_ARGUMENT (CALLBACK_INVALID,
        CALLBACK_SECRET_UNKNOWN, CALLBACK_NOT_ALLOWED) when it cannot be delivered safely."""
        if not request.HasField("callback"):
            return None
        return await self.check_callback(request.callback, tenant)

    async def check_callback(
        self, callback: parser_service_pb2.Callback, tenant: str
    ) -> Hook | None:
        """`check` for a Callback message (a batch's: CreateBatchRequest, UploadBatchHeader);
        an empty one (an unset field reads so) is None."""
        url, name = callback.url.strip(), callback.secret_name
        if not url and not name:
            return None
        if not url or not name:
            raise error(
                ErrorReason.CALLBACK_INVALID, "a callback needs both a url and a secret_name"
            )
        target = parse_url(url)
        if await asyncio.to_thread(self.secrets.get, tenant, name) is None:
            raise error(
                ErrorReason.CALLBACK_SECRET_UNKNOWN,
                f"this tenant has no webhook secret named {name[:100]!r}"
                + ("" if self.secrets.configured else " (no webhook secrets are configured)"),
            )
        literal = ip_literal(target.host)
        if literal is not None:
            self.policy.check(target.host, [str(literal)])
            return Hook(url, name)
        try:
            async with asyncio.timeout(RESOLVE_AT_SUBMIT_S):
                addresses = await resolve(target.host, target.port)
        except TimeoutError:
            return Hook(url, name)  # every delivery checks again
        except OSError:
            addresses = []
        if not addresses or not all(self.policy.allows_text(a) for a in addresses):
            # One answer whether the name does not resolve or resolves to a private address,
            # and which: a caller learns nothing of the deployment's internal names.
            raise error(
                ErrorReason.CALLBACK_NOT_ALLOWED,
                f"the callback host {target.host!r} does not resolve to public addresses only "
                "(or DOCPARSE_WEBHOOK_ALLOW_CIDRS lists none of them)",
            )
        return Hook(url, name)
