"""The capacity model's arithmetic (bench.capacity) on inputs whose answer is worked out by
hand, one term at a time: a wrong formula, unit or rounding changes a number below."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.capacity import DEFAULT_COSTS, Costs, Target, load_costs, project

ZERO = Costs(**{f.name: 0.0 for f in dataclasses.fields(Costs)})


def costs(**values: float) -> Costs:
    return dataclasses.replace(ZERO, **values)


def test_job_cpu_has_a_fixed_part_and_a_part_per_page() -> None:
    c = costs(parser_svc_us_job=1000, parser_svc_us_page=100, parse_us_job=2000, parse_us_page=500)
    result = project(c, Target(jobs_per_s=100, pages=10, streams=0, record_bytes=0))
    # 100 jobs/s x (1000 + 10 x 100) µs = 0.2 cores; parse 100 x (2000 + 10 x 500) µs = 0.7.
    assert result.parser_svc_api_cores == pytest.approx(0.2)
    assert result.parse_cores == pytest.approx(0.7)
    # Replicas of 2 cores at 70 %: (0.2 + 0.7) / 1.4 -> 1; the API process alone fits one.
    assert result.parser_svc_replicas == 1


def test_replicas_follow_the_busiest_limit() -> None:
    c = costs(parser_svc_us_job=1000, parse_us_page=1000)
    # API 1,000 x 1 ms = 1 core: one event loop per replica at 70 % -> 2 replicas;
    # parse 1,000 x 10 x 1 ms = 10 cores: (1 + 10) / (4 x 0.7) = 3.93 -> 4 replicas of 4 cores.
    result = project(c, Target(1000, 10, 0, 0, replica_cores=4))
    assert result.parser_svc_replicas == 4
    result = project(c, Target(1000, 10, 0, 0, replica_cores=16))
    assert result.parser_svc_replicas == 2  # (1 + 10) / 11.2 fits one, the API does not


def test_streams_cost_memory_and_idle_cpu() -> None:
    c = costs(
        parser_svc_kb_stream=32, gateway_kb_stream=48, redis_bytes_stream=100,
        parser_svc_us_stream_s=70, gateway_us_stream_s=2, redis_us_stream_s=10,
        redis_commands_stream_s=0.2,
    )  # fmt: skip
    result = project(c, Target(0, 1, 100_000, 0, replica_memory_mb=1024))
    assert result.parser_svc_stream_mb == pytest.approx(3125.0)  # 100,000 x 32 kB / 1024
    assert result.gateway_stream_mb == pytest.approx(4687.5)
    assert result.redis_stream_mb == pytest.approx(10.0)  # 100,000 x 100 B
    assert result.parser_svc_api_cores == pytest.approx(7.0)  # 100,000 x 70 µs/s
    assert result.gateway_cores == pytest.approx(0.2)
    assert result.redis_cores == pytest.approx(1.0)
    assert result.redis_ops_per_s == pytest.approx(20_000)  # a resync read per 5 s
    # Memory: 3,125 / (1,024 x 0.7) -> 5 replicas; CPU 7 cores at 0.7 per API process -> 10.
    assert result.parser_svc_replicas == 10
    assert result.gateway_replicas == 7  # 4,687.5 / 716.8 = 6.5 (CPU needs 1)


def test_more_watchers_cost_per_record_and_records_grow_the_bytes() -> None:
    c = costs(
        records_job=2, records_page=1, record_bytes=400, parser_svc_us_record=300,
        gateway_us_record=330, redis_us_record=100, redis_out_bytes_record=700,
        redis_out_bytes_job=3000,
    )  # fmt: skip
    result = project(c, Target(100, 3, 0, 1000, watchers_per_job=3))
    # 5 records a job; the submitter's stream is in the job's cost, 2 more watchers each.
    assert result.records_per_s == pytest.approx(1500)
    assert result.parser_svc_api_cores == pytest.approx(100 * 5 * 2 * 300 / 1e6)
    assert result.gateway_cores == pytest.approx(0.33)
    assert result.redis_cores == pytest.approx(0.1)
    # Out: 100 x (3,000 + 5 x 600) per job + 1,000 extra deliveries x (700 + 600).
    assert result.redis_out_mb_s == pytest.approx((100 * 6000 + 1000 * 1300) / 1e6)
    assert result.redis_in_mb_s == pytest.approx(100 * 5 * 600 / 1e6)
    # Client side: 1,500 records x 1,000 B, both hops.
    assert result.client_mb_s == pytest.approx(2 * 1500 * 1000 / 1e6)


def test_redis_shards_by_cpu_bandwidth_and_retained_memory() -> None:
    c = costs(redis_us_job=1000, redis_in_bytes_page=4000, redis_memory_bytes_page=4000)
    by_cpu = project(c, Target(2000, 1, 0, 0, retention_s=0))
    assert by_cpu.redis_cores == pytest.approx(2.0)
    assert by_cpu.redis_shards == 3  # 2 / 0.7 = 2.86
    by_bandwidth = project(c, Target(10, 10_000, 0, 0, retention_s=0))
    assert by_bandwidth.redis_in_mb_s == pytest.approx(400.0)
    assert by_bandwidth.redis_shards == 5  # 400 / (125 x 0.7) = 4.57
    by_memory = project(c, Target(100, 10, 0, 0, retention_s=3600))
    assert by_memory.redis_retained_gb == pytest.approx(14.4)  # 100 x 3,600 x 40 kB
    assert by_memory.redis_shards == 1
    assert project(c, Target(100, 10, 0, 0, retention_s=86400)).redis_shards == 20  # 345.6 GB


def test_costs_come_from_the_measuring_runs_json(tmp_path: Path) -> None:
    assert load_costs(tmp_path / "absent.json") == DEFAULT_COSTS
    measured = dataclasses.replace(DEFAULT_COSTS, parse_us_page=1234.5)
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps({"costs": dataclasses.asdict(measured), "jobs": []}))
    assert load_costs(path) == measured


def test_results_in_blobs_take_the_per_page_bytes_out_of_redis() -> None:
    c = costs(
        redis_in_bytes_job=1000, redis_in_bytes_page=4000,
        redis_memory_bytes_job=10_000, redis_memory_bytes_page=4000,
    )  # fmt: skip
    inline = project(c, Target(100, 10, 0, 0, retention_s=60))
    assert inline.redis_in_mb_s == pytest.approx(100 * 41_000 / 1e6)
    assert inline.redis_retained_gb == pytest.approx(100 * 60 * 50_000 / 1e9)
    blobs = project(c, Target(100, 10, 0, 0, retention_s=60, results_in_blobs=True))
    assert blobs.redis_in_mb_s == pytest.approx(100 * 1000 / 1e6)
    assert blobs.redis_retained_gb == pytest.approx(100 * 60 * 10_000 / 1e9)


def test_polls_cost_each_process_its_cpu_per_call() -> None:
    c = costs(parser_svc_us_call=600, gateway_us_call=700, redis_us_call=40)
    result = project(c, Target(0, 1, 0, 0, polls_per_s=5000))
    assert result.parser_svc_api_cores == pytest.approx(3.0)
    assert result.gateway_cores == pytest.approx(3.5)
    assert result.redis_cores == pytest.approx(0.2)
    assert result.redis_ops_per_s == pytest.approx(5000)
    assert result.parser_svc_replicas == 5  # 3 / 0.7 = 4.3 event loops


def test_the_queue_slot_must_fit_one_shard() -> None:
    """BullMQ's queue is one slot on Redis Cluster: its CPU does not spread over shards."""
    c = dataclasses.replace(ZERO, redis_us_queue_job=1000.0)  # 1 ms per job
    fits = project(c, Target(600, 1, 0, 0))
    assert (fits.redis_queue_cores, fits.queue_fits_one_shard) == (0.6, True)
    over = project(c, Target(800, 1, 0, 0))
    assert (round(over.redis_queue_cores, 6), over.queue_fits_one_shard) == (0.8, False)
