"""Every Redis key and channel docparse uses, in one place.

The `{job_id}` hash tag keeps all keys of one job in one Redis Cluster slot. Two scripts also
touch keys outside that slot (the submit-dedupe pointers and the queue lock checked at claim),
so on Redis Cluster those checks need the single-slot layout described in docs/operations.md;
a single Redis (with replicas) is the supported deployment.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    env: str

    @property
    def prefix(self) -> str:
        return f"docparse:{self.env}"

    def job(self, job_id: str) -> str:
        return f"{self.prefix}:job:{{{job_id}}}"

    def tombstone(self, job_id: str) -> str:
        return f"{self.prefix}:job:{{{job_id}}}:tomb"

    def result(self, job_id: str) -> str:
        return f"{self.prefix}:job:{{{job_id}}}:result"

    def job_channel(self, job_id: str) -> str:
        return f"{self.prefix}:job:{{{job_id}}}:events"

    def request(self, tenant: str, request_id: str) -> str:
        """Idempotency record of one (tenant, request_id), kept 24 h."""
        digest = hashlib.sha256(f"{tenant}\0{request_id}".encode()).hexdigest()
        return f"{self.prefix}:req:{digest}"

    def active_upload(self, tenant: str, identity: str) -> str:
        """Points at the job currently parsing this upload (tenant + parser + options + content)."""
        digest = hashlib.sha256(f"{tenant}\0{identity}".encode()).hexdigest()
        return f"{self.prefix}:active:{digest}"

    @property
    def job_key_prefix(self) -> str:
        return f"{self.prefix}:job:"

    def queue_lock(self, queue: str, job_id: str) -> str:
        """BullMQ's lock key for a queue job (its value is the holder's token)."""
        return f"{self.queue_prefix}:{queue}:{job_id}:lock"

    @property
    def queue_prefix(self) -> str:
        """BullMQ's key prefix: the queue lives under docparse:{env}:bull:<queue>:..."""
        return f"{self.prefix}:bull"
