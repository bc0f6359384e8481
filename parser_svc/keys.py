"""Every Redis key and channel docparse uses, in one place.

The `{job_id}` hash tag keeps all keys of one job in one Redis Cluster slot, so the scripts
that touch several of them stay valid on a cluster.
"""

from __future__ import annotations

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

    @property
    def queue_prefix(self) -> str:
        """BullMQ's key prefix: the queue lives under docparse:{env}:bull:<queue>:..."""
        return f"{self.prefix}:bull"
