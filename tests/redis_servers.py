"""Real redis-server processes for the tests that need more than one plain server: a server
with its own configuration (TLS, ACL users), and a Sentinel-guarded primary with replicas and a
Sentinel trio (tests/test_redis_urls.py, tests/test_failover.py)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis

from docparse.local.embedded_redis import free_port, redis_server_binary
from tests.helpers import eventually

SERVICE = "docparse"


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


class Server:
    """One redis-server (or sentinel) child process, killed at the end."""

    def __init__(self, binary: str, folder: Path, port: int, config: list[str]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.config = folder / "redis.conf"
        self.config.write_text(
            "\n".join([f"dir {folder}", "bind 127.0.0.1", 'save ""', *config]) + "\n"
        )
        sentinel = any(line.startswith("sentinel ") for line in config)
        self.proc = subprocess.Popen(
            [binary, str(self.config), *(["--sentinel"] if sentinel else [])],
            stdout=(folder / "server.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        eventually(lambda: self.proc.poll() is not None or listening(port), 20, f"port {port}")
        assert self.proc.poll() is None, (folder / "server.log").read_text()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@dataclass
class SentinelSet:
    primary: Server
    replicas: list[Server]
    sentinels: list[Server]

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def ask(self) -> redis.Redis:
        """A client of the first sentinel."""
        return redis.Redis(port=self.sentinels[0].port, decode_responses=True)

    def primary_port(self) -> int:
        """The port the sentinels name as the primary now."""
        with self.ask() as ask:
            _, port = ask.sentinel_get_master_addr_by_name(SERVICE)
        return int(port)


@contextmanager
def sentinel_set(
    folder: Path,
    replicas: int = 1,
    down_after_ms: int = 2000,
    failover_timeout_ms: int = 10000,
    min_replicas_to_write: int = 0,
) -> Iterator[SentinelSet]:
    """A primary, `replicas` replicas of it and three sentinels (quorum 2) watching it, settled
    (the sentinels know each other and every replica); all killed at the end. Each server
    refuses writes as a primary with fewer than `min_replicas_to_write` replicas."""
    binary = redis_server_binary()
    common = [
        "maxmemory-policy noeviction",
        "appendonly no",
        f"min-replicas-to-write {min_replicas_to_write}",
        "min-replicas-max-lag 10",
    ]
    with ExitStack() as servers:

        def server(name: str, config: list[str]) -> Server:
            port = free_port()
            started = Server(binary, folder / name, port, [f"port {port}", *config])
            servers.callback(started.stop)
            return started

        primary = server("primary", common)
        copies = [
            server(f"replica{i}", [*common, f"replicaof 127.0.0.1 {primary.port}"])
            for i in range(replicas)
        ]
        watch = [
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary.port} 2",
            f"sentinel down-after-milliseconds {SERVICE} {down_after_ms}",
            f"sentinel failover-timeout {SERVICE} {failover_timeout_ms}",
        ]
        running = SentinelSet(primary, copies, [server(f"sentinel{i}", watch) for i in range(3)])
        with running.ask() as ask:

            def settled() -> bool:
                master: dict[str, object] = ask.sentinel_master(SERVICE)
                return (
                    master.get("num-other-sentinels") == 2 and master.get("num-slaves") == replicas
                )

            eventually(settled, 30, "the sentinels to know each other and the replicas")
        yield running
