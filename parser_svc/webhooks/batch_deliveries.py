"""A batch's webhook: one `batch.completed` delivery per (batch, callback), for the whole batch.

The submit writes it before the batch's create script runs, as a job's (its id
`batch.<batch_id>.<digest>`, parser_svc/state/webhook_store.py). It becomes ready when the
batch's meta record holds `completed_ms`: update_job.lua writes it once, in the same atomic step
as the terminal transition of the batch's last file (the one that makes completed == total), so
however many replicas end files at once, exactly one step completes the batch; the dispatcher
(parser_svc/webhooks/dispatcher.py) then delivers it at least once, like a job's. The body is
`{"type": "batch.completed", "timestamp": <completed_ms>, "data": <the Batch as JSON>}`: the
files' records no longer change once all have ended, so every attempt sends the same.
The files of a batch have no webhook of their own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from google.protobuf import json_format, timestamp_pb2

from parser_svc.state.batch_records import assemble_batch
from parser_svc.state.records import TERMINAL_STATES
from parser_svc.state.store import JobStore
from parser_svc.state.webhook_store import is_batch, job_of
from parser_svc.webhooks.egress import DeliveryFailed

EVENT_TYPE = "batch.completed"


def ended(delivery: str, record: Mapping[str, str]) -> bool:
    """Whether the job (or for a batch's delivery, the batch) a due delivery is about has
    ended: its record is terminal, or its batch's meta record holds `completed_ms`."""
    if is_batch(delivery):
        return bool(record.get("completed_ms"))
    return record.get("state") in TERMINAL_STATES


def message_id(batch_id: str) -> str:
    """Stable per batch: every attempt and every re-run sends the same."""
    return f"msg_{batch_id}_completed"


async def batch_message(store: JobStore, delivery: str) -> tuple[str, bytes, str]:
    """The webhook-id, the body and the tenant of a batch's delivery, read now (one snapshot
    of the meta and file records); DeliveryFailed when the batch is gone."""
    batch_id = job_of(delivery)
    meta, files = await store.read_batch(batch_id)
    if not meta.get("completed_ms"):
        raise DeliveryFailed("the batch's record expired before delivery")
    batch = assemble_batch(batch_id, meta, files)
    when = timestamp_pb2.Timestamp()
    when.FromMilliseconds(int(meta["completed_ms"]))
    data = json_format.MessageToDict(
        batch, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    envelope = {"type": EVENT_TYPE, "timestamp": when.ToJsonString(), "data": data}
    body = json.dumps(envelope, separators=(",", ":")).encode()
    return message_id(batch_id), body, meta.get("tenant", "")
