"""Capacity model: replicas, Redis shards, network and stream memory for a target load, from the
per-operation costs the capacity benchmark measured (docs/scaling.md).

    .venv/bin/python -m bench.capacity --jobs-per-s 1000 --pages 10 --streams 100000 \\
        --record-bytes 1000

Costs come from var/bench/capacity.json (written by `python -m bench.bench_capacity`) when it
exists, else from DEFAULT_COSTS (the run quoted in docs/scaling.md); `--costs FILE` picks one.

The model is linear: every job costs a fixed part plus a part per page; every record delivered
on a stream costs per record; every open stream costs memory and CPU per second (its resync
reads and heartbeats); every GetStatus call costs per call. Each parser_svc replica runs one
API process (one core at most: an event loop) and parses on its remaining cores; each gateway
is one process (one core at most)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from bench.harness.output import OUT_DIR

COSTS_FILE = OUT_DIR / "capacity.json"


@dataclass(frozen=True)
class Costs:
    """Per-operation costs. `*_us`: CPU µs; `_job` fixed per job, `_page` per page."""

    parser_svc_us_job: float  # API process: submit, queue, claim, writes, the submitter's watch
    parser_svc_us_page: float
    parse_us_job: float  # parse children (forked), per job and per page
    parse_us_page: float
    gateway_us_job: float
    gateway_us_page: float
    redis_us_job: float
    redis_us_page: float
    redis_commands_job: float  # BullMQ's included
    redis_commands_page: float
    redis_in_bytes_job: float
    redis_in_bytes_page: float
    redis_out_bytes_job: float
    redis_out_bytes_page: float
    redis_memory_bytes_job: float  # held per ended job until it expires (record, inline result)
    redis_memory_bytes_page: float
    records_job: float  # PUBLISHed records per job (create, progress, terminal)
    records_page: float
    document_bytes_page: float  # upload size per page (client -> gateway -> parser_svc)
    record_bytes: float  # size of the measured records (JSON as published)
    parser_svc_us_record: float  # one more stream receiving one record
    gateway_us_record: float
    redis_us_record: float
    redis_out_bytes_record: float
    parser_svc_kb_stream: float  # resident memory per open stream
    gateway_kb_stream: float
    redis_bytes_stream: float
    parser_svc_us_stream_s: float  # an open idle stream: resync reads, heartbeats
    gateway_us_stream_s: float
    redis_us_stream_s: float
    redis_commands_stream_s: float  # resync reads: 1 / DOCPARSE_WATCH_RESYNC_S
    # One GetStatus through the gateway (bench/README.md, the spine benchmark, GetStatus pass
    # 8: encoded answers, no access line for a successful poll; medians of three runs).
    parser_svc_us_call: float = 401.0
    gateway_us_call: float = 537.0
    redis_us_call: float = 32.0
    # Redis Cluster: the CPU per job of the node that owns BullMQ's one-slot queue beyond an
    # ordinary node's share (bench/bench_cluster.py, docs/scaling.md): one shard carries it.
    redis_us_queue_job: float = 700.0

    def per_job(self, name: str, pages: float) -> float:
        """A per-job cost for a job of `pages` pages: `name_job + pages * name_page`."""
        return float(getattr(self, f"{name}_job")) + pages * float(getattr(self, f"{name}_page"))


@dataclass(frozen=True)
class Target:
    jobs_per_s: float
    pages: float
    streams: int
    record_bytes: float
    watchers_per_job: float = 1.0  # streams on each job: 1 = the submitter's own
    polls_per_s: float = 0.0  # GetStatus calls besides the streams
    utilization: float = 0.7  # share of a core / link planned busy
    replica_cores: int = 2  # cores of one parser_svc replica (1 API + parses)
    replica_memory_mb: float = 2048.0  # per parser_svc and per gateway replica, for streams
    shard_bandwidth_mb_s: float = 125.0  # a Redis shard's network (1 Gbit/s)
    shard_memory_gb: float = 25.0  # a Redis shard's memory
    retention_s: float = 24 * 3600.0  # DOCPARSE_RETENTION_S: ended jobs kept this long
    # Results in the blob store instead of inline in Redis (DOCPARSE_INLINE_RESULT_MAX_BYTES
    # below their size): the per-page Redis bytes in and held (the result) drop out.
    results_in_blobs: bool = False


@dataclass(frozen=True)
class Projection:
    parser_svc_api_cores: float
    parse_cores: float
    gateway_cores: float
    redis_cores: float
    records_per_s: float
    redis_ops_per_s: float
    redis_in_mb_s: float
    redis_out_mb_s: float
    client_mb_s: float  # uploads in + records out, each across client-gateway-parser_svc
    parser_svc_stream_mb: float
    gateway_stream_mb: float
    redis_stream_mb: float
    redis_retained_gb: float  # ended jobs within their retention
    parser_svc_replicas: int
    gateway_replicas: int
    redis_shards: int
    # Redis Cluster: BullMQ's queue is one slot, so its CPU is one shard's whatever the count.
    redis_queue_cores: float = 0.0
    queue_fits_one_shard: bool = True


def whole(units: float) -> int:
    """Units needed for a load: rounded up, but 10.000000000000002 (7 / 0.7) is 10."""
    return math.ceil(round(units, 9))


def project(costs: Costs, target: Target) -> Projection:
    jobs, pages, streams = target.jobs_per_s, target.pages, target.streams
    extra = target.record_bytes - costs.record_bytes  # bytes per record beyond the measured
    records_per_job = costs.per_job("records", pages)
    # The submitter's stream is in the per-job costs; further watchers cost per record.
    more_records = jobs * records_per_job * max(target.watchers_per_job - 1.0, 0.0)
    records = jobs * records_per_job * target.watchers_per_job

    def cores(role: str) -> float:
        us = jobs * costs.per_job(f"{role}_us", pages)
        us += more_records * float(getattr(costs, f"{role}_us_record"))
        us += target.polls_per_s * float(getattr(costs, f"{role}_us_call"))
        return (us + streams * float(getattr(costs, f"{role}_us_stream_s"))) / 1e6

    api = cores("parser_svc")
    parse = jobs * costs.per_job("parse_us", pages) / 1e6
    gateway = cores("gateway")
    redis = cores("redis")
    ops = jobs * costs.per_job("redis_commands", pages) + streams * costs.redis_commands_stream_s
    ops += target.polls_per_s  # one HGETALL each
    in_per_job = costs.redis_in_bytes_job + (
        0.0 if target.results_in_blobs else pages * costs.redis_in_bytes_page
    )
    redis_in = jobs * (in_per_job + records_per_job * extra)
    redis_out = jobs * (
        costs.per_job("redis_out_bytes", pages) + records_per_job * extra
    ) + more_records * (costs.redis_out_bytes_record + extra)
    client = jobs * pages * costs.document_bytes_page + records * target.record_bytes
    mb = 1e6
    svc_mb = streams * costs.parser_svc_kb_stream / 1024
    gw_mb = streams * costs.gateway_kb_stream / 1024
    usable_mb = target.replica_memory_mb * target.utilization
    u = target.utilization
    parser_replicas = max(
        whole(api / u),  # one API process per replica
        whole((api + parse) / (target.replica_cores * u)),
        whole(svc_mb / usable_mb),
        1,
    )
    # A job's record is held once, at its full size: the bytes beyond the measured record.
    held = costs.redis_memory_bytes_job + max(extra, 0.0)
    if not target.results_in_blobs:
        held += pages * costs.redis_memory_bytes_page
    retained_gb = jobs * target.retention_s * held / 1e9
    shards = max(
        whole(redis / u),  # Redis runs commands on one core
        whole(max(redis_in, redis_out) / mb / (target.shard_bandwidth_mb_s * u)),
        whole(retained_gb / (target.shard_memory_gb * u)),
        1,
    )
    return Projection(
        parser_svc_api_cores=api,
        parse_cores=parse,
        gateway_cores=gateway,
        redis_cores=redis,
        records_per_s=records,
        redis_ops_per_s=ops,
        redis_in_mb_s=redis_in / mb,
        redis_out_mb_s=redis_out / mb,
        client_mb_s=2 * client / mb,
        parser_svc_stream_mb=svc_mb,
        gateway_stream_mb=gw_mb,
        redis_stream_mb=streams * costs.redis_bytes_stream / mb,
        redis_retained_gb=retained_gb,
        parser_svc_replicas=parser_replicas,
        gateway_replicas=max(whole(gateway / u), whole(gw_mb / usable_mb), 1),
        redis_shards=shards,
        redis_queue_cores=jobs * costs.redis_us_queue_job / 1e6,
        queue_fits_one_shard=jobs * costs.redis_us_queue_job / 1e6 <= u,
    )


# The run quoted in docs/scaling.md (`python -m bench.bench_capacity measure`, 2 shared cores).
DEFAULT_COSTS = Costs(
    parser_svc_us_job=9397.0,
    parser_svc_us_page=93.9,
    parse_us_job=13167.0,
    parse_us_page=1333.0,
    gateway_us_job=3459.0,
    gateway_us_page=96.4,
    redis_us_job=1489.0,
    redis_us_page=10.6,
    redis_commands_job=84.9,
    redis_commands_page=-0.022,
    redis_in_bytes_job=4791.0,
    redis_in_bytes_page=4110.0,
    redis_out_bytes_job=3465.0,
    redis_out_bytes_page=0.656,
    redis_memory_bytes_job=10202.0,
    redis_memory_bytes_page=3744.0,
    records_job=2.0,
    records_page=0.0,
    document_bytes_page=3140.0,
    record_bytes=400.0,
    parser_svc_us_record=277.0,
    gateway_us_record=315.0,
    redis_us_record=151.0,
    redis_out_bytes_record=698.0,
    parser_svc_kb_stream=31.8,
    gateway_kb_stream=48.1,
    redis_bytes_stream=289.0,
    parser_svc_us_stream_s=76.0,
    gateway_us_stream_s=0.0,
    redis_us_stream_s=8.0,
    redis_commands_stream_s=0.2,
)


def load_costs(path: Path | None = None) -> Costs:
    """The `costs` object of a capacity benchmark's JSON; DEFAULT_COSTS without a file."""
    path = path or COSTS_FILE
    if not path.exists():
        return DEFAULT_COSTS
    data = json.loads(path.read_text())["costs"]
    return Costs(**{f.name: float(data[f.name]) for f in fields(Costs) if f.name in data})


def report(costs: Costs, target: Target, result: Projection) -> str:
    lines = [f"target: {json.dumps(asdict(target))}", ""]
    lines += [f"{name:24} {value:>14,.2f}" for name, value in asdict(result).items()]
    return "\n".join(lines)


def parse_args(argv: list[str]) -> tuple[Target, Path | None]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--jobs-per-s", type=float, required=True)
    parser.add_argument("--pages", type=float, default=1.0)
    parser.add_argument("--streams", type=int, default=0)
    parser.add_argument("--record-bytes", type=float, default=1000.0)
    defaults = Target(0, 0, 0, 0)
    parser.add_argument("--watchers-per-job", type=float, default=defaults.watchers_per_job)
    parser.add_argument("--polls-per-s", type=float, default=defaults.polls_per_s)
    parser.add_argument("--utilization", type=float, default=defaults.utilization)
    parser.add_argument("--replica-cores", type=int, default=defaults.replica_cores)
    parser.add_argument("--replica-memory-mb", type=float, default=defaults.replica_memory_mb)
    parser.add_argument("--shard-bandwidth-mb-s", type=float, default=defaults.shard_bandwidth_mb_s)
    parser.add_argument("--shard-memory-gb", type=float, default=defaults.shard_memory_gb)
    parser.add_argument("--retention-s", type=float, default=defaults.retention_s)
    parser.add_argument("--results-in-blobs", action="store_true")
    parser.add_argument("--costs", type=Path, help=f"default: {COSTS_FILE} if it exists")
    args = parser.parse_args(argv)
    names = {f.name for f in fields(Target)}
    return Target(**{k: v for k, v in vars(args).items() if k in names}), args.costs


def main() -> None:
    target, path = parse_args(sys.argv[1:])
    costs = load_costs(path)
    print(report(costs, target, project(costs, target)))


if __name__ == "__main__":
    main()
