"""The spine benchmark's helper processes, each in its own role (bench.harness.children):

    _bare     a grpc.aio server answering GetStatus with fixed bytes (bench.spine.get_status)
    _floor    a grpc.aio server answering GetStatus with one Redis read (bench.spine.get_status)
    _watch    watch client: WatchJob streams, receive times (bench.spine.watch)
    _pubsub   raw Redis pub/sub subscriber (bench.spine.pubsub)

Run as `python -m bench.spine.children ROLE ...` by the benchmark, never by hand."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from bench.spine.get_status import serve_bare, serve_floor
from bench.spine.pubsub import pubsub_client
from bench.spine.watch import watch_client
from docparse_server import loops


def child_main(role: str, argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("--response")
    parser.add_argument("--target")
    parser.add_argument("--key")
    parser.add_argument("--jobs", type=Path)
    parser.add_argument("--names", type=Path)
    parser.add_argument("--channels", type=int)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--redis-url")
    parser.add_argument("--expected", type=int)
    parser.add_argument("--loop", default="asyncio", choices=["asyncio", "uvloop"])
    parser.add_argument("--metadata", default="[]", help="JSON pairs each call sends")
    args = parser.parse_args(argv)
    if role == "_bare":
        loops.run(serve_bare(args.port, bytes.fromhex(args.response)), args.loop)
        return
    if role == "_floor":
        loops.run(serve_floor(args.port, args.redis_url, args.key), args.loop)
        return
    if role == "_watch":
        job_ids = json.loads(args.jobs.read_text())
        metadata = [tuple(pair) for pair in json.loads(args.metadata)]
        result = asyncio.run(watch_client(args.target, job_ids, args.channels, metadata))
    elif role == "_pubsub":
        channels = json.loads(args.names.read_text())
        result = asyncio.run(pubsub_client(args.redis_url, channels, args.expected))
    else:
        raise SystemExit(f"unknown role {role}")
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2:])
