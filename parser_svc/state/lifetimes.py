"""How long each piece of job state lives in Redis: the TTL rules, in one place.

The Lua scripts apply these rules (the store passes them the durations of `Lifetimes`);
tests/parser_svc/state/test_state_machine.py checks them against a model after every write.

- QUEUED record, new or released for a retry: `queued_ttl_s` from that write.
- RUNNING record: `running_ttl_s` from its last write (the worker renews it).
- Terminal record and its inline result: `retention_s` from the terminal write.
- Terminal file of a batch that is still open: as long as the batch meta (at least retention).
- Batch meta: at least every open file's TTL + retention, pushed out by each file write.
- A finished batch and all its files: `retention_s` from the last file's end, together.
- Tombstone (GetStatus answers JOB_EXPIRED): the record's TTL + `tombstone_s`.
- request_id record (job or batch): `request_id_ttl_s` from the first create; once the job or
  batch it names is gone, a retry with it makes a new one instead of answering NOT_FOUND.
- Active-dedupe pointer: the QUEUED TTL; deleted when the job ends.
- Pending-enqueue entry: until the sweeper has seen the job's queue entry.
- Tenant job index (ListJobs): each create pushes the index's TTL to at least `listed_ms`, the
  longest a record can live from its create: every attempt may wait the queued TTL in the queue
  (a release re-queues it) and then run (a parse is stopped after `parse_timeout_s`; the record
  lives `running_ttl_s` past the last write), then the retention follows the end (a batch's
  files end with their last file, which obeys the same bound). So the index never expires
  before a job it lists. Entries whose record is gone are dropped by ListJobs when it meets
  them, by each create (the oldest few, if their record is gone) and, at the latest, by the
  first create `listed_ms` after theirs.

So a record never expires while its job can still change (a QUEUED job waits at most the queued
TTL, a retry included), a batch's files never expire before the batch, and a request_id never
answers NOT_FOUND for a job that merely ended: the retry gets the job, or a fresh one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from parser_svc.settings import Settings


@dataclass(frozen=True)
class Lifetimes:
    queued_ms: int
    running_ms: int
    retention_ms: int
    tombstone_ms: int
    request_ms: int
    listed_ms: int = 0

    @classmethod
    def of(cls, settings: Settings) -> Lifetimes:
        return cls(
            queued_ms=settings.queued_ttl_s * 1000,
            running_ms=settings.running_ttl_s * 1000,
            retention_ms=settings.retention_s * 1000,
            tombstone_ms=settings.tombstone_s * 1000,
            request_ms=settings.request_id_ttl_s * 1000,
            listed_ms=listed_ms(settings),
        )


def listed_ms(settings: Settings) -> int:
    """The longest a job record can live from its create (see the module's rules)."""
    attempt_ms = (
        settings.queued_ttl_s * 1000
        + int(settings.parse_timeout_s * 1000)
        + settings.running_ttl_s * 1000
    )
    return max(1, settings.max_attempts) * attempt_ms + settings.retention_s * 1000


def now_ms() -> int:
    """Wall-clock time in ms, as the records store it."""
    return int(time.time() * 1000)
