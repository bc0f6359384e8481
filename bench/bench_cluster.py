"""docparse on Redis Cluster against one Redis primary, in the same run (docs/scaling.md, "Redis
Cluster"): one-page jobs through the gateway of a stack with 2 parser_svc replicas, on a
3-primary cluster (1 replica each) and on one primary with a replica (both Debian's
redis-server 7), alternating rounds. Per round: jobs/s, and per job what each Redis node ran
(commands, those inside scripts included; CPU; bytes in and out; cluster bus messages): where
the work lands, and how much of it is the BullMQ queue's one slot.

    .venv/bin/python -m bench.bench_cluster --jobs 300 --rounds 3

Numbers are medians of the rounds. Results: var/bench/cluster.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import redis

from bench.harness.jobs import run_job
from bench.harness.output import log, write_text
from bench.harness.stacks import ENV_NAME, bench_stack, running
from docparse.v1 import job_pb2, parser_service_pb2
from parser_svc.state.keys import Keys
from tests.helpers import make_pdf
from tests.redis_servers import Server, redis_cluster, sentinel_set

OUT = Path("var/bench/cluster.json")


def node_counters(port: int) -> dict[str, float]:
    """One node's totals so far: commands (commandstats calls, inside scripts included), CPU
    seconds, bytes in and out, cluster bus messages sent."""
    with redis.Redis(port=port) as client:
        info = client.info("all")
        bus: dict[str, Any] = {}
        if info.get("cluster_enabled"):
            raw = client.execute_command("CLUSTER INFO")
            bus = raw if isinstance(raw, dict) else {}
    calls = sum(int(v["calls"]) for k, v in info.items() if k.startswith("cmdstat_"))
    return {
        "commands": calls,
        "cpu_s": float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
        "net_in": float(info["total_net_input_bytes"]),
        "net_out": float(info["total_net_output_bytes"]),
        "bus_sent": float(bus.get("cluster_stats_messages_sent", 0)),
    }


def queue_node(ports: list[int]) -> int:
    """The port of the primary that owns BullMQ's `{bull}` slot."""
    key = f"{Keys(ENV_NAME, 1).queue_prefix}:parse:wait"
    for port in ports:
        with redis.Redis(port=port) as client:
            slot = int(client.execute_command("CLUSTER KEYSLOT", key))
            for start, end, primary, *_ in client.execute_command("CLUSTER SLOTS"):
                if start <= slot <= end:
                    return int(primary[1])
    raise RuntimeError("no node owns the queue's slot")


def one_round(gateway: str, jobs: int, clients: int, tag: str) -> float:
    """`jobs` one-page jobs, `clients` at a time; their jobs/s."""
    documents = [make_pdf(1, f"{tag} {i}") for i in range(jobs)]

    def one(index: int) -> int:
        request = parser_service_pb2.SubmitJobRequest(
            file_name=f"{index}.pdf", content=documents[index], request_id=f"{tag}-{index}"
        )
        return run_job(gateway, request, resume=True).state

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        states = list(pool.map(one, range(jobs)))
    took = time.perf_counter() - started
    assert states == [job_pb2.STATE_SUCCEEDED] * jobs, "a job did not succeed"
    return jobs / took


def measure(gateway: str, ports: list[int], jobs: int, clients: int, tag: str) -> dict[str, Any]:
    before = {port: node_counters(port) for port in ports}
    rate = one_round(gateway, jobs, clients, tag)
    after = {port: node_counters(port) for port in ports}
    per_node = {
        port: {name: (after[port][name] - before[port][name]) / jobs for name in before[port]}
        for port in ports
    }
    return {"jobs_per_s": rate, "per_job": per_node}


@contextlib.contextmanager
def cluster_target(folder: Path) -> Iterator[tuple[str, list[Server]]]:
    with redis_cluster(folder) as cluster:
        yield cluster.url, cluster.primaries


@contextlib.contextmanager
def single_target(folder: Path) -> Iterator[tuple[str, list[Server]]]:
    with sentinel_set(folder, replicas=1) as servers:
        yield f"redis://127.0.0.1:{servers.primary.port}/0", [servers.primary]


def summary(rounds: list[dict[str, Any]], queue_port: int | None) -> dict[str, Any]:
    """Medians over rounds: jobs/s, and per job each node's costs and their sum."""
    ports = list(rounds[0]["per_job"])
    names = list(rounds[0]["per_job"][ports[0]])
    nodes = {
        str(port): {n: statistics.median(r["per_job"][port][n] for r in rounds) for n in names}
        for port in ports
    }
    total = {n: sum(node[n] for node in nodes.values()) for n in names}
    out: dict[str, Any] = {
        "jobs_per_s": statistics.median(r["jobs_per_s"] for r in rounds),
        "per_job_total": total,
        "per_job_nodes": nodes,
    }
    if queue_port is not None:
        queue = nodes[str(queue_port)]
        out["queue_node"] = queue_port
        out["queue_node_share"] = {n: queue[n] / total[n] if total[n] else 0.0 for n in names}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300, help="one-page jobs per round")
    parser.add_argument("--clients", type=int, default=8, help="concurrent SDK-like clients")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {"single": [], "cluster": []}
    queue_port: int | None = None
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        with single_target(root / "single") as single, cluster_target(root / "cl") as cluster:
            targets = {"single": single, "cluster": cluster}
            stacks = {
                name: bench_stack(root / f"stack-{name}", replicas=2, redis_url=url)
                for name, (url, _) in targets.items()
            }
            with running(stacks.values()):
                queue_port = queue_node([s.port for s in cluster[1]])
                for index in range(args.rounds):
                    order = ["single", "cluster"] if index % 2 == 0 else ["cluster", "single"]
                    for name in order:
                        nodes = targets[name][1]
                        gateway = stacks[name].gateway_addresses[0]
                        ports = [node.port for node in nodes]
                        got = measure(gateway, ports, args.jobs, args.clients, f"r{index}{name}")
                        results[name].append(got)
                        log(f"round {index} {name}: {got['jobs_per_s']:.1f} jobs/s")
    report = {
        "jobs": args.jobs,
        "clients": args.clients,
        "rounds": args.rounds,
        "single": summary(results["single"], None),
        "cluster": summary(results["cluster"], queue_port),
    }
    report["cluster_over_single_jobs_per_s"] = (
        report["cluster"]["jobs_per_s"] / report["single"]["jobs_per_s"]
    )
    write_text(OUT, json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
