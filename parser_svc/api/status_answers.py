"""Jobs encoded once per state of their record, not once per call: GetStatus answers and
ListJobs pages.

Every call still reads the records from Redis (any replica answers from the shared store, never
from what it saw before). What is kept is only the work from those bytes to the answer's bytes:
decoding the hash, building the Job and encoding it, about 45 us of a replica's CPU per
GetStatus under load, a tenth of it (bench/README.md, GetStatus pass 8), and most of a ListJobs
page's. An encoding is reused only for a record equal field for field to the one it was made
from, so it can never be older than the read; a job read again before its next write costs a
dict comparison instead.

A response is then its fields' bytes put together (the protobuf wire format: a length-delimited
field is its tag, its length and its bytes), exactly what encoding the message would give.
"""

from __future__ import annotations

from docparse.proto_wire import length_delimited
from parser_svc.state.records import decode_hash, record_to_job

# Jobs whose last encoding is kept, first in first out: about 2.6 kB each (the record as read
# and the encodings; tracemalloc and getsizeof on a corpus-sized record), so about 3 MB per
# replica.
DEFAULT_CAPACITY = 1024
# GetStatusResponse.job and ListJobsResponse.jobs are field 1, ListJobsResponse.next_page_token
# field 2.
JOB_FIELD = 1
PAGE_TOKEN_FIELD = 2


class EncodedJobs:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        # job id -> (the record, the encoded Job, the encoded GetStatusResponse)
        self._by_job: dict[str, tuple[dict[bytes, bytes], bytes, bytes]] = {}

    def __len__(self) -> int:
        return len(self._by_job)

    def status(self, job_id: str, record: dict[bytes, bytes]) -> bytes:
        """The encoded GetStatusResponse for `record`, the job's record just read."""
        return self._entry(job_id, record)[2]

    def job(self, job_id: str, record: dict[bytes, bytes]) -> bytes:
        """The encoded Job for `record`, the job's record just read."""
        return self._entry(job_id, record)[1]

    def _entry(
        self, job_id: str, record: dict[bytes, bytes]
    ) -> tuple[dict[bytes, bytes], bytes, bytes]:
        known = self._by_job.get(job_id)
        if known is not None and known[0] == record:
            return known
        job = record_to_job(decode_hash(record)).SerializeToString()
        entry = (record, job, length_delimited(JOB_FIELD, job))
        if known is None and len(self._by_job) >= self._capacity:
            del self._by_job[next(iter(self._by_job))]  # the oldest entry
        self._by_job[job_id] = entry
        return entry
