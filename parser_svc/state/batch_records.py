"""A batch's records (its meta record and its files' records, as read from Redis) as the
`docparse.v1.Batch` message: GetBatch and WatchBatch (parser_svc/api/batch_watch.py) and the
batch's webhook (parser_svc/webhooks/batch_deliveries.py) answer with the same."""

from __future__ import annotations

from collections.abc import Mapping

from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from parser_svc.state.keys import batch_file_id
from parser_svc.state.records import record_to_job


def assemble_batch(
    batch_id: str, meta: Mapping[str, str], files: Mapping[int, Mapping[str, str]]
) -> parser_service_pb2.Batch:
    """The Batch of a meta record and the file records by index."""
    batch = parser_service_pb2.Batch(
        batch_id=batch_id,
        total=int(meta["total"]),
        completed=int(meta["completed"]),
        succeeded=int(meta["succeeded"]),
        failed=int(meta["failed"]),
        cancelled=int(meta["cancelled"]),
    )
    batch.create_time.FromMilliseconds(int(meta["create_ms"]))
    for index in range(batch.total):
        record = files.get(index)
        if record:
            batch.jobs.append(record_to_job(record))
            continue
        # A file record gone while its batch lives: it waited in the queue past its TTL
        # (files of a batch otherwise live as long as the batch). It will never end, so
        # the batch reports it as ended: FAILED JOB_EXPIRED.
        job = batch.jobs.add(job_id=batch_file_id(batch_id, index), batch_id=batch_id)
        job.state = job_pb2.STATE_FAILED
        job.error.reason = ErrorReason.JOB_EXPIRED
        job.error.message = "the file's record expired before it ran"
        batch.completed += 1
        batch.failed += 1
    # The batch's own version counter moves with every file write (same script), so it
    # never goes back when files expire; older batches without it sum their files'.
    batch.version = int(meta.get("version") or 0) or sum(job.version for job in batch.jobs)
    return batch
