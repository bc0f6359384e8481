"""`docparse up`: the whole system on one machine, as child processes.

An embedded Redis (unless a URL is given), N parser_svc replicas and M gateways. The tests use
the same class, so what they prove is what `make run` runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from docparse.embedded_redis import EmbeddedRedis, free_port


def wait_serving(address: str, timeout: float = 30.0, child: Child | None = None) -> None:
    """Blocks until `address` answers grpc.health.v1 Check with SERVING."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if child is not None and not child.alive():
            tail = child.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{child.name} exited before serving; its log ends:\n{tail}")
        with grpc.insecure_channel(address) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=1.0
                )
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError as err:
                last = err
        time.sleep(0.05)
    raise TimeoutError(f"{address} did not become SERVING: {last}")


class Child:
    def __init__(self, name: str, address: str, args: list[str], env: dict[str, str], log: Path):
        self.name, self.address, self.args, self.env, self.log = name, address, args, env, log
        self.proc: subprocess.Popen[bytes] | None = None
        # Gateways: host:port of their HTTP side (JSON, SSE, the page); "" for others.
        self.http_address = ""
        # host:port of its Prometheus endpoint (http://<metrics_address>/metrics).
        self.metrics_address = ""

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 25.0) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class LocalStack:
    def __init__(
        self,
        data_dir: Path,
        *,
        replicas: int = 2,
        gateways: int = 1,
        port: int | None = None,
        redis_url: str | None = None,
        env: str = "local",
        extra_env: dict[str, str] | None = None,
        http_port: int | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.redis: EmbeddedRedis | None = None
        self.redis_url = redis_url or os.environ.get("DOCPARSE_REDIS_URL") or ""
        self.base_env = {
            "DOCPARSE_GATEWAY_AUTH": "disabled",  # dev mode unless configured otherwise
            **os.environ,
            "DOCPARSE_ENV": env,
            "DOCPARSE_BLOB_DIR": str(self.data_dir / "blobs"),
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        self.parsers = [
            self._child("parser_svc", i, free_port(), "parser_svc", "DOCPARSE_LISTEN")
            for i in range(replicas)
        ]
        gateway_ports = [port or free_port()] + [free_port() for _ in range(gateways - 1)]
        self.gateways = [
            self._child("gateway", i, p, "gateway", "DOCPARSE_GATEWAY_LISTEN")
            for i, p in enumerate(gateway_ports)
        ]
        for i, gateway in enumerate(self.gateways):  # HTTP port: `http_port` for the first
            gateway.http_address = f"127.0.0.1:{(http_port if i == 0 else None) or free_port()}"
            gateway.env["DOCPARSE_GATEWAY_HTTP_LISTEN"] = gateway.http_address
        for children, var in (
            (self.parsers, "DOCPARSE_METRICS_LISTEN"),
            (self.gateways, "DOCPARSE_GATEWAY_METRICS_LISTEN"),
        ):
            for child in children:
                child.metrics_address = f"127.0.0.1:{free_port()}"
                child.env[var] = child.metrics_address

    def _child(self, name: str, index: int, port: int, module: str, listen_var: str) -> Child:
        address = f"127.0.0.1:{port}"
        return Child(
            f"{name}-{index}",
            address,
            [sys.executable, "-m", module],
            {listen_var: address},
            self.data_dir / "logs" / f"{name}-{index}.log",
        )

    @property
    def parser_addresses(self) -> list[str]:
        return [child.address for child in self.parsers]

    @property
    def gateway_addresses(self) -> list[str]:
        return [child.address for child in self.gateways]

    @property
    def http_addresses(self) -> list[str]:
        """host:port of each gateway's HTTP side; the page is at http://<address>/."""
        return [child.http_address for child in self.gateways]

    def start(self, timeout: float = 60.0) -> None:
        try:
            if not self.redis_url:
                self.redis = EmbeddedRedis(self.data_dir / "redis")
                self.redis.start()
                self.redis_url = self.redis.url
            backends = ",".join(self.parser_addresses)
            for child in self.parsers + self.gateways:
                child.env = {
                    **self.base_env,
                    "DOCPARSE_REDIS_URL": self.redis_url,
                    "DOCPARSE_GATEWAY_BACKENDS": backends,
                    **child.env,
                }
                child.start()
            for child in self.parsers + self.gateways:
                wait_serving(child.address, timeout, child)
        except BaseException:
            self.stop()
            raise

    def restart(self, child: Child, timeout: float = 60.0) -> None:
        """Starts a stopped or killed child again on its address (same environment)."""
        if child.alive():
            child.stop()
        elif child.proc is not None:
            child.proc.wait()
        child.start()
        wait_serving(child.address, timeout, child)

    def ready_line(self) -> str:
        return (
            f"docparse ready gateway={','.join(self.gateway_addresses)} "
            f"parser_svc={','.join(self.parser_addresses)} redis={self.redis_url} "
            f"http={','.join('http://' + a for a in self.http_addresses)}"
        )

    def stop(self) -> None:
        children = self.gateways + self.parsers
        for child in children:
            child.signal(signal.SIGTERM)
        for child in children:
            child.stop()
        if self.redis is not None:
            self.redis.stop()

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
