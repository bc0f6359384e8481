"""Every Redis key and channel docparse uses, in one place.

One Redis (alone, with replicas, behind Sentinel): a job's keys carry the hash tag `{job_id}`
(for a file of a batch `{batch_id}`, so its terminal write can bump the batch counters), and
the indexes (pending, retained, the tenant's jobs) are one key each.

Redis Cluster (`cells` > 0, docs/scaling.md "Redis Cluster"): a job is placed in one of
`cells` **cells**, a short hash tag minted into its id (`<cell>_<hex>`, a batch's files
`<cell>_<hex>-<i>`). Everything a create or an update script touches is in that cell's slot:
the record, tombstone, result and channel, the idempotency record of its (tenant, request_id)
(the cell is chosen from them, so a retry lands where the first attempt wrote), the
active-upload pointer, and the cell's own pending and retained sets. What stays outside a cell
is written in its own step: the tenant's job index (ListJobs), the rate windows, the sweeper's
lease, and BullMQ's queue (`{bull}`: one slot, BullMQ's scripts need it).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from functools import cache

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from parser_svc.settings import Settings
from parser_svc.state.redis_conn import RedisTarget


def batch_file_id(batch_id: str, index: int) -> str:
    return f"{batch_id}-{index}"


def batch_id_of(job_id: str) -> str:
    return job_id.split("-", 1)[0] if "-" in job_id else ""


# A placed id: `c<i>x<n>_<hex>` (ids allow letters, digits, '-' and '_'; '-' ends a batch id).
_PLACED = re.compile(r"(c[0-9]+x[0-9]+)_")


def cell_of(job_id: str) -> str:
    """The cell a job or batch id was placed in ('' for an id of the single-Redis layout)."""
    placed = _PLACED.match(job_id)
    return placed.group(1) if placed else ""


def _tag(an_id: str) -> str:
    """`{id}`, or `{cell}_<rest>` for a placed id (lua/lib/tags.lua does the same)."""
    cell = cell_of(an_id)
    return f"{{{cell}}}{an_id[len(cell) :]}" if cell else f"{{{an_id}}}"


def tagged(job_id: str) -> str:
    """The job's part of its keys: `{job_id}`, for batch files `{batch_id}-i` (a file and its
    batch share a slot); for a placed id the cell is the tag: `{cell}_<hex>[-i]`."""
    batch_id = batch_id_of(job_id)
    if batch_id:
        return f"{_tag(batch_id)}{job_id[len(batch_id) :]}"
    return _tag(job_id)


@cache
def cell_tags(cells: int) -> tuple[str, ...]:
    """`cells` short tags whose slots are spread evenly over the 16384: the i-th falls in the
    i-th of `cells` equal slot ranges, so a cluster whose shards own contiguous ranges (what
    redis-cli --cluster create and our tests make) gets an even share of cells per shard."""
    tags = []
    for i in range(cells):
        low = i * REDIS_CLUSTER_HASH_SLOTS // cells
        high = (i + 1) * REDIS_CLUSTER_HASH_SLOTS // cells
        n = 0
        while not low <= key_slot(f"c{i}x{n}".encode()) < high:
            n += 1
        tags.append(f"c{i}x{n}")
    return tuple(tags)


@dataclass(frozen=True)
class Keys:
    env: str
    # 0: one Redis, keys as they always were; > 0: Redis Cluster with this many cells.
    cells: int = 0

    @classmethod
    def of(cls, settings: Settings) -> Keys:
        """The layout for the deployment's Redis: cells on Redis Cluster only."""
        cluster = RedisTarget.of(settings).cluster
        return cls(settings.env, settings.redis_cells if cluster else 0)

    def place(self, *parts: str) -> str:
        """The cell of whatever these parts name (a tenant and request_id, or an upload's
        identity); '' on one Redis. Fixed per deployment: changing `cells` moves them."""
        if not self.cells:
            return ""
        digest = hashlib.sha256("\0".join(parts).encode()).digest()
        return cell_tags(self.cells)[int.from_bytes(digest[:8], "big") % self.cells]

    def new_id(self, cell: str = "") -> str:
        """A new job or batch id, placed in `cell` (on Redis Cluster: a random one if '')."""
        if self.cells and not cell:
            cell = self.place(uuid.uuid4().hex)
        return f"{cell}_{uuid.uuid4().hex}" if cell else uuid.uuid4().hex

    def _cell_key(self, name: str, cell: str) -> str:
        return f"{self.prefix}:{name}:{{{cell}}}" if cell else f"{self.prefix}:{name}"

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

    def page_channel(self, job_id: str) -> str:
        """Told the pointer number each time one of the job's page parts is pointed at (a
        StreamResult's wake; not an ':events' channel: no record travels on it)."""
        return f"{self.job(job_id)}:page-ready"

    def page_parts(self, job_id: str) -> str:
        """The pointers to a job's page parts as they are read (state/page_parts.py)."""
        return f"{self.job(job_id)}:pages"

    def page_log(self, job_id: str) -> str:
        """Every pointer move of the job's page parts, in order (a list: entry i is the move
        numbered i + 1), so a stream reads only what came after its cursor."""
        return f"{self.job(job_id)}:page-log"

    def batch_meta(self, batch_id: str) -> str:
        return f"{self.prefix}:batch:{_tag(batch_id)}:meta"

    def batch_channel(self, batch_id: str) -> str:
        return f"{self.prefix}:batch:{_tag(batch_id)}:events"

    def batch_files(self, batch_id: str) -> str:
        """The prefix of a batch's file records: append the file's index."""
        return f"{self.job_key_prefix}{_tag(batch_id)}-"

    @property
    def batch_key_prefix(self) -> str:
        return f"{self.prefix}:batch:"

    def pending(self, job_id: str = "") -> str:
        """Sorted set of jobs created but not yet seen in the queue (score: create time, ms):
        the job's cell's on Redis Cluster. The sweeper enqueues what a lost reply or a dead
        replica left out (sweeper.py)."""
        return self._cell_key("pending", cell_of(job_id))

    def retained(self, job_id: str = "") -> str:
        """Sorted set of ended jobs by the time their record expires (ms), the job's cell's on
        Redis Cluster: the sweeper deletes their blobs (results, assets, upload) once the
        record is gone."""
        return self._cell_key("retained", cell_of(job_id))

    def index_sets(self, name: str) -> list[str]:
        """Every `pending` or `retained` set: one, or one per cell."""
        if not self.cells:
            return [self._cell_key(name, "")]
        return [self._cell_key(name, cell) for cell in cell_tags(self.cells)]

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
        return self._placed("batchreq2", digest, self.place(tenant, request_id))

    def request(self, tenant: str, request_id: str, cell: str = "") -> str:
        """Idempotency record of one (tenant, request_id), kept 24 h; on Redis Cluster in the
        cell of the job it names (`cell`)."""
        digest = hashlib.sha256(f"{tenant}\0{request_id}".encode()).hexdigest()
        return self._placed("req", digest, cell)

    def request_content(self, tenant: str, request_id: str) -> str:
        """Redis Cluster only: the sha256 of the content a (tenant, request_id) was first used
        with, in the request's own cell (its job is in its upload's cell: submit.py)."""
        digest = hashlib.sha256(f"{tenant}\0{request_id}".encode()).hexdigest()
        return self._placed("reqsha", digest, self.place(tenant, request_id))

    def active_upload(self, tenant: str, identity: str, cell: str = "") -> str:
        """Points at the job currently parsing this upload (tenant + parser + options +
        content); on Redis Cluster in the cell of the job that would point to it (`cell`)."""
        digest = hashlib.sha256(f"{tenant}\0{identity}".encode()).hexdigest()
        return self._placed("active", digest, cell)

    def _placed(self, name: str, digest: str, cell: str) -> str:
        placed = f":{{{cell}}}" if cell else ""
        return f"{self.prefix}:{name}{placed}:{digest}"

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

    def queue_list(self, queue: str, name: str) -> str:
        """One of BullMQ's own keys of a queue (`wait`, `prioritized`...)."""
        return f"{self.queue_prefix}:{queue}:{name}"

    def fair(self, queue: str) -> str:
        """The prefix of fair admission's keys for `queue` (parser_svc/state/admission.py): the
        tenants' pending lists, their virtual times, the queued and admitting indexes. In the
        queue's slot on Redis Cluster (`{bull}`), beside BullMQ's keys the script reads."""
        return f"{self.queue_prefix}:fair:{queue}:"

    @property
    def queue_prefix(self) -> str:
        """BullMQ's key prefix: the queue lives under docparse:{env}:bull:<queue>:... (on Redis
        Cluster under docparse:{env}:{bull}:<queue>:..., one slot: BullMQ's scripts need it)."""
        return f"{self.prefix}:{{bull}}" if self.cells else f"{self.prefix}:bull"

    @property
    def job_events_pattern(self) -> str:
        """Every job's event channel (a pattern subscription: the webhook dispatcher's wake)."""
        return f"{self.job_key_prefix}*:events"

    # The webhook outbox (parser_svc/webhooks/callbacks.py). On Redis Cluster every key of it is
    # in one slot, `{webhooks}`, so its script and transactions run there (webhook traffic is
    # far below one shard's).

    @property
    def _webhook_prefix(self) -> str:
        return f"{self.prefix}:{{webhooks}}" if self.cells else self.prefix

    @property
    def webhooks_due(self) -> str:
        """Sorted set of deliveries by when each is next looked at (ms)."""
        return f"{self._webhook_prefix}:webhooks:due"

    @property
    def webhooks_dead(self) -> str:
        """Sorted set of the deliveries given up on (score: when, ms)."""
        return f"{self._webhook_prefix}:webhooks:dead"

    @property
    def webhooks_lease(self) -> str:
        """The dispatcher's lease: one worker replica delivers at a time."""
        return f"{self._webhook_prefix}:webhooks:lease"

    def webhook(self, delivery_id: str) -> str:
        """A delivery's hash: its job, tenant, URL, secret name, attempts and outcome."""
        return f"{self._webhook_prefix}:webhook:{delivery_id}"

    def webhook_deliveries(self, job_id: str) -> str:
        """The set of a job's deliveries (a job that ends wakes them)."""
        return f"{self._webhook_prefix}:webhook:{job_id}:deliveries"
