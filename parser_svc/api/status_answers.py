"""GetStatus answers encoded once per state of a job's record, not once per call.

Every GetStatus still reads the record from Redis (any replica answers from the shared store,
never from what it saw before). What is kept is only the work from those bytes to the answer's
bytes: decoding the hash, building the Job and encoding the response, about 45 us of a
replica's CPU per GetStatus under load, a tenth of it (bench/README.md, GetStatus pass 8). An
answer is reused only for a record equal field for field to the one it was made from, so it can
never be older than the read; a job polled again before its next write costs a dict comparison
instead.
"""

from __future__ import annotations

from docparse.v1 import parser_service_pb2
from parser_svc.state.records import decode_hash, record_to_job

# Jobs whose last answer is kept, first in first out: about 2.6 kB each (the record as read
# and the answer; tracemalloc and getsizeof on a corpus-sized record), so about 3 MB per replica.
DEFAULT_CAPACITY = 1024


class EncodedStatus:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._by_job: dict[str, tuple[dict[bytes, bytes], bytes]] = {}

    def __len__(self) -> int:
        return len(self._by_job)

    def answer(self, job_id: str, record: dict[bytes, bytes]) -> bytes:
        """The encoded GetStatusResponse for `record`, the job's record just read."""
        known = self._by_job.get(job_id)
        if known is not None and known[0] == record:
            return known[1]
        encoded = parser_service_pb2.GetStatusResponse(
            job=record_to_job(decode_hash(record))
        ).SerializeToString()
        if known is None and len(self._by_job) >= self._capacity:
            del self._by_job[next(iter(self._by_job))]  # the oldest entry
        self._by_job[job_id] = (record, encoded)
        return encoded
