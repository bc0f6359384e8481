"""What a WatchBatch stream costs Redis while its batch is parsed: `python -m
bench.bench_batch_watch [--files 200] [--rounds 2] [--baseline DIR]`.

A batch of one-page PDFs is parsed by a 2-replica stack, once with no watcher and once with
one WatchBatch stream through the gateway, in turns; the Redis commands the server counted
from CreateBatch to the last file's end (script-internal ones included) are compared. With
`--baseline DIR`, a second stack runs the code of another checkout (run from a directory that
holds no checkout: python -m puts the working directory first), in the same turns.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import redis as sync_redis

from bench.harness.stacks import bench_stack, running
from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2
from tests.helpers import make_pdf, stub


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", metavar="DIR", help="also run this checkout's code")
    return parser.parse_args()


def _watch(address: str, batch_id: str, seen: list[int]) -> None:
    channel, s = stub(address)
    with channel:
        request = parser_service_pb2.WatchBatchRequest(batch_id=batch_id)
        for event in s.WatchBatch(request, timeout=300):
            if event.HasField("batch"):
                seen.append(event.batch.completed)


def one_batch(
    stack: LocalStack, files: list[parser_service_pb2.BatchFile], watched: bool
) -> tuple[int, int]:
    """Redis commands from CreateBatch to the batch's end, and the snapshots the watcher got."""
    client = sync_redis.Redis.from_url(stack.redis_url)
    address = stack.gateway_addresses[0]

    def commands() -> int:
        return int(client.info("stats")["total_commands_processed"])

    channel, s = stub(address)
    seen: list[int] = []
    with channel:
        start = commands()
        request = parser_service_pb2.CreateBatchRequest(files=files)
        batch = s.CreateBatch(request, timeout=60).batch
        watcher = None
        if watched:
            watcher = threading.Thread(target=_watch, args=(address, batch.batch_id, seen))
            watcher.start()
        while True:  # the end, seen by polling (its cost is in both runs)
            now = s.GetBatch(parser_service_pb2.GetBatchRequest(batch_id=batch.batch_id)).batch
            if now.completed == now.total:
                break
            time.sleep(0.2)
        if watcher is not None:
            watcher.join()
            assert seen and seen[-1] == len(files), seen
        spent = commands() - start
    client.close()
    return spent, len(seen)


def main() -> None:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-batch-watch-"))
    files = [
        parser_service_pb2.BatchFile(file_name=f"f{i}.pdf", content=make_pdf(1, f"file {i}"))
        for i in range(args.files)
    ]
    stacks = {"this": bench_stack(work / "this", replicas=2)}
    if args.baseline:
        env = {"PYTHONPATH": args.baseline}
        stacks["baseline"] = bench_stack(work / "baseline", replicas=2, extra_env=env)
    extra: dict[str, list[int]] = {name: [] for name in stacks}
    with running(stacks.values()):
        for stack in stacks.values():
            one_batch(stack, files[:8], watched=True)  # warm-up
        for round_no in range(args.rounds):
            for name, stack in stacks.items():
                alone, _ = one_batch(stack, files, watched=False)
                watched, snapshots = one_batch(stack, files, watched=True)
                extra[name].append(watched - alone)
                print(
                    f"round {round_no + 1} {name}: {alone} commands with no watcher, {watched} "
                    f"with one (+{watched - alone}), {snapshots} snapshots"
                )
    for name, values in extra.items():
        print(f"{name}: one watcher adds a median {statistics.median(values):.0f} commands "
              f"to a {args.files}-file batch")  # fmt: skip


if __name__ == "__main__":
    main()
