"""Every Redis key and channel docparse uses, in one place.

The `{job_id}` hash tag keeps all keys of one job in one Redis Cluster slot (for a file of a
batch, `{batch_id}`, so its terminal write can bump the batch counters). Two scripts also
touch keys outside that slot (the submit-dedupe pointers and the queue lock checked at claim),
so on Redis Cluster those checks need the single-slot layout described in docs/operations.md;
a single Redis (with replicas) is the supported deployment.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


def batch_file_id(batch_id: str, index: int) -> str:
    return f"{batch_id}-{index}"


def batch_id_of(job_id: str) -> str:
    return job_id.split("-", 1)[0] if "-" in job_id else ""


def tagged(job_id: str) -> str:
    """`{job_id}`; for batch files `{batch_id}-i`, so a file and its batch share a slot."""
    batch_id = batch_id_of(job_id)
    if batch_id:
        return f"{{{batch_id}}}{job_id[len(batch_id) :]}"
    return f"{{{job_id}}}"


@dataclass(frozen=True)
class Keys:
    env: str

    @property
    def prefix(self) -> str:
        return f"docparse:{self.env}"

    def job(self, job_id: str) -> str:
        return f"{self.prefix}:job:{tagged(job_id)}"

    def tombstone(self, job_id: str) -> str:
        return f"{self.job(job_id)}:tomb"

    def result(self, job_id: str) -> str:
        return f"{self.job(job_id)}:result"

    def job_channel(self, job_id: str) -> str:
        return f"{self.job(job_id)}:events"

    def batch_meta(self, batch_id: str) -> str:
        return f"{self.prefix}:batch:{{{batch_id}}}:meta"

    def batch_channel(self, batch_id: str) -> str:
        return f"{self.prefix}:batch:{{{batch_id}}}:events"

    def batch_files(self, batch_id: str) -> str:
        """The prefix of a batch's file records: append the file's index."""
        return f"{self.job_key_prefix}{{{batch_id}}}-"

    @property
    def batch_key_prefix(self) -> str:
        return f"{self.prefix}:batch:"

    @property
    def pending(self) -> str:
        """Sorted set of jobs created but not yet seen in the queue (score: create time, ms).
        The sweeper enqueues what a lost reply or a dead replica left out (sweeper.py)."""
        return f"{self.prefix}:pending"

    @property
    def retained(self) -> str:
        """Sorted set of ended jobs by the time their record expires (ms): the sweeper deletes
        their blobs (results, assets, upload) once the record is gone."""
        return f"{self.prefix}:retained"

    @property
    def sweeper_lease(self) -> str:
        return f"{self.prefix}:sweeper"

    def batch_of(self, job_id: str) -> str:
        """The batch meta key a job reports to, or '' for a job outside any batch."""
        batch_id = batch_id_of(job_id)
        return self.batch_meta(batch_id) if batch_id else ""

    def batch_request(self, tenant: str, request_id: str) -> str:
        """Idempotency record of one CreateBatch (a hash: batch id and content digest; the
        `batchreq2` name keeps it apart from the plain strings of earlier versions)."""
        digest = hashlib.sha256(f"{tenant}\0{request_id}".encode()).hexdigest()
        return f"{self.prefix}:batchreq2:{digest}"

    def request(self, tenant: str, request_id: str) -> str:
        """Idempotency record of one (tenant, request_id), kept 24 h."""
        digest = hashlib.sha256(f"{tenant}\0{request_id}".encode()).hexdigest()
        return f"{self.prefix}:req:{digest}"

    def active_upload(self, tenant: str, identity: str) -> str:
        """Points at the job currently parsing this upload (tenant + parser + options + content)."""
        digest = hashlib.sha256(f"{tenant}\0{identity}".encode()).hexdigest()
        return f"{self.prefix}:active:{digest}"

    def tenant_jobs(self, tenant: str) -> str:
        """The tenant's job index (ListJobs): a sorted set of job ids (batch files included)
        scored by creation time (ms), written by the create scripts in the same step as the
        record. Entries outlive their records; readers drop those whose record is gone."""
        digest = hashlib.sha256(tenant.encode()).hexdigest()[:32]
        return f"{self.prefix}:tenant-jobs:{{{digest}}}"

    def submit_count(self, tenant: str, minute: int) -> str:
        """The tenant's submits in one minute (epoch minutes), for its rate limit."""
        return f"{self.prefix}:rate:{tenant}:{minute}"

    @property
    def job_key_prefix(self) -> str:
        return f"{self.prefix}:job:"

    def queue_job(self, queue: str, job_id: str) -> str:
        """BullMQ's hash of a queue job: it exists from the add until BullMQ removes the job."""
        return f"{self.queue_prefix}:{queue}:{job_id}"

    def queue_lock(self, queue: str, job_id: str) -> str:
        """BullMQ's lock key for a queue job (its value is the holder's token)."""
        return f"{self.queue_job(queue, job_id)}:lock"

    @property
    def queue_prefix(self) -> str:
        """BullMQ's key prefix: the queue lives under docparse:{env}:bull:<queue>:..."""
        return f"{self.prefix}:bull"
