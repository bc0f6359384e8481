"""What docparse's Redis stack does on a real Redis Cluster today: the facts the cluster support
was built from (docs/scaling.md, "Redis Cluster"). Not a test; rerun with

    PYTHONPATH=. .venv/bin/python -m tests.cluster_probe

It starts a local cluster (3 primaries + 3 replicas, tests/redis_servers.py) and prints, one
line each: keys across slots, a script over one slot and over two, pub/sub and sharded pub/sub
through redis-py's cluster client, and a BullMQ queue and worker on a hash-tagged prefix."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from bullmq import Queue, Worker
from redis.asyncio.cluster import RedisCluster

from tests.redis_servers import redis_cluster


async def _message(pubsub: Any, kinds: tuple[str, ...]) -> Any:
    for _ in range(20):
        message = await pubsub.get_message(timeout=0.5)
        if message and message["type"] in kinds:
            return message
    return None


async def probe(port: int) -> None:
    client = RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
    await client.initialize()
    for i in range(100):
        await client.set(f"probe:{i}", i)
    print("keys across slots:", await client.get("probe:7") == "7")
    script = client.register_script("redis.call('SET', KEYS[1], 1); redis.call('SET', KEYS[2], 1)")
    await script(keys=["{job}:a", "{job}:b"])
    print("script over one slot: ok")
    try:
        await script(keys=["job:a", "job:b"])
    except Exception as err:
        print("script over two slots:", type(err).__name__, str(err)[:70])
    pubsub = client.pubsub()
    await pubsub.subscribe("events:{job}")
    await _message(pubsub, ("subscribe",))
    receivers = await client.publish("events:{job}", "hello")
    got = await _message(pubsub, ("message",))
    print("pub/sub:", receivers, "receiver(s), got", got and got["data"])
    try:
        await pubsub.ssubscribe("sevents:{job}")
        await client.spublish("sevents:{job}", "hello")
        got = None
        for _ in range(20):  # sharded messages come on the slot owner's connection
            got = await pubsub.get_sharded_message(timeout=0.5)
            if got and got["type"] == "smessage":
                break
        print("sharded pub/sub:", got and got["data"])
    except Exception as err:
        print("sharded pub/sub:", type(err).__name__, str(err)[:70])
    prefix = "docparse:probe:{bull}"
    queue = Queue("parse", {"connection": client, "prefix": prefix})
    await queue.add("job", {"n": 1}, {"jobId": "probe-1"})
    processed = asyncio.Event()

    async def process(job: Any, token: str) -> str:
        processed.set()
        return "ok"

    worker_client = RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
    worker = Worker("parse", process, {"connection": worker_client, "prefix": prefix})
    try:
        await asyncio.wait_for(processed.wait(), 15)
        print(f"BullMQ on prefix {prefix}: a job added and processed")
    except TimeoutError:
        print(f"BullMQ on prefix {prefix}: no job processed in 15 s")
    await worker.close()
    await queue.close()
    await client.aclose()


def main() -> None:
    with tempfile.TemporaryDirectory() as folder, redis_cluster(Path(folder)) as cluster:
        print("cluster:", len(cluster.primaries), "primaries,", len(cluster.replicas), "replicas")
        asyncio.run(probe(cluster.primaries[0].port))


if __name__ == "__main__":
    main()
