"""What a Redis server has done so far, from INFO: commands, bytes in and out (pub/sub
deliveries included), PUBLISH calls and memory
(without client buffers). Two snapshots around a run give its traffic."""

from __future__ import annotations

import redis

COUNTERS = ("commands", "net_in_bytes", "net_out_bytes", "publish", "memory")


def redis_counters(url: str) -> dict[str, int]:
    """One snapshot (the INFO call itself adds one command and a few hundred bytes)."""
    client = redis.Redis.from_url(url)
    try:
        stats = client.info("stats")
        commands = client.info("commandstats")
        memory = client.info("memory")
    finally:
        client.close()
    return {
        "commands": int(stats["total_commands_processed"]),
        "net_in_bytes": int(stats["total_net_input_bytes"]),
        "net_out_bytes": int(stats["total_net_output_bytes"]),
        "publish": int(commands.get("cmdstat_publish", {}).get("calls", 0)),
        # Without the clients' buffers, which come and go with the traffic of the moment.
        "memory": int(memory["used_memory"]) - int(memory.get("mem_clients_normal", 0)),
    }


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in COUNTERS}


def subscription_bytes(url: str, channels: list[str]) -> float:
    """Redis memory per channel subscribed, as a replica's event hub subscribes (one
    connection, one SUBSCRIBE per channel; the channels as named for jobs)."""
    client = redis.Redis.from_url(url)
    pubsub = client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]
    try:
        before = redis_counters(url)["memory"]
        for start in range(0, len(channels), 500):
            pubsub.subscribe(*channels[start : start + 500])
        confirmed = 0
        while confirmed < len(channels):  # every SUBSCRIBE is in once Redis confirmed it
            message = pubsub.get_message(timeout=10)
            if message is None:
                raise RuntimeError(f"Redis confirmed {confirmed} of {len(channels)} channels")
            confirmed += message["type"] == "subscribe"
        after = redis_counters(url)["memory"]
    finally:
        pubsub.close()
        client.close()
    return (after - before) / len(channels)
