"""`docparse up`: the whole system on one machine, as child processes.

An embedded Redis (unless a URL is given), N parser_svc replicas and M gateways. The tests use
the same class, so what they prove is what `make run` runs.

A stack owns its data directory (logs, blobs, the embedded Redis's AOF) exclusively: it holds
a lock on it for as long as it or any of its children runs, and a second stack on the same
directory is refused with the holder's pid. Every server binds its ports exclusively, so a
port that is taken stops the start with PORT_IN_USE instead of two stacks sharing it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc

from docparse.errors import DocparseError
from docparse.local.embedded_redis import EmbeddedRedis
from docparse.local.locks import DirLock
from docparse.local.readiness import replica_tls, wait_healthz
from docparse.local.readiness import wait_serving as wait_serving  # tests import it from here
from docparse.ports import HeldPorts
from docparse.reasons import ErrorReason

STACK_LOCK = ".stack.lock"
READY_PREFIX = "docparse ready"
RUNS_DIR = Path("var/stack")
KEEP_RUNS = 10


def new_run_dir(root: Path = RUNS_DIR) -> Path:
    """A fresh data directory for one `docparse up` run (`var/stack/<time>-<pid>`): runs never
    share logs, blobs or an AOF, and jobs of an earlier run do not reappear. The oldest run
    directories beyond the newest KEEP_RUNS are removed (never one a running stack holds)."""
    prune_runs(root, KEEP_RUNS - 1)
    return root / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def prune_runs(root: Path, keep: int) -> list[Path]:
    """Removes run directories under `root` beyond the newest `keep`, skipping locked ones."""
    if not root.is_dir():
        return []
    runs = sorted(
        (p for p in root.iterdir() if p.is_dir() and (p / STACK_LOCK).exists()),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    removed = []
    for run in runs[keep:]:
        if not DirLock(run, "stack data directory", STACK_LOCK).is_locked_by_other():
            shutil.rmtree(run, ignore_errors=True)
            removed.append(run)
    return removed


class Child:
    def __init__(self, name: str, address: str, args: list[str], env: dict[str, str], log: Path):
        self.name, self.address, self.args, self.env, self.log = name, address, args, env, log
        self.proc: subprocess.Popen[bytes] | None = None
        # Gateways: host:port of their HTTP side (JSON, SSE, the page); "" for others.
        self.http_address = ""
        # host:port of its Prometheus endpoint (http://<metrics_address>/metrics).
        self.metrics_address = ""
        # File descriptors the child inherits (the data directory's lock).
        self.pass_fds: tuple[int, ...] = ()

    @property
    def tls(self) -> bool:
        """A gateway whose gRPC port speaks TLS."""
        return bool(self.http_address and self.env.get("DOCPARSE_GATEWAY_TLS_CERT_FILE"))

    def start(self) -> None:
        self.log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as out:
            self.proc = subprocess.Popen(
                self.args, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, pass_fds=self.pass_fds,
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

    def check_alive(self) -> None:
        """Raises why the child ended, if it did: the error line a server writes when it
        cannot start (PORT_IN_USE, ...), else UNAVAILABLE CHILD_EXITED with its log's end."""
        if self.proc is None or self.proc.poll() is None:
            return
        tail = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
        for line in reversed(tail.splitlines()):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == "startup.failed":
                names = ("address", "port", "setting")
                metadata = {k: str(v) for k, v in record.items() if k in names}
                code = grpc.StatusCode[str(record.get("code", "FAILED_PRECONDITION"))]
                raise DocparseError(
                    code, str(record.get("reason", "")), f"{self.name}: {record.get('msg')}",
                    {"child": self.name, **metadata},
                )  # fmt: skip
        last = "\n".join(tail.splitlines()[-15:])
        raise DocparseError(
            grpc.StatusCode.UNAVAILABLE,
            ErrorReason.CHILD_EXITED,
            f"{self.name} exited with code {self.proc.returncode} before serving; "
            f"{self.log} ends:\n{last}",
            {"child": self.name, "log": str(self.log)},
        )


class LocalStack:
    """`port`: the first gateway's gRPC port; further gateways take the ports after it (a free
    one each when `port` is None). `http_port`: the first gateway's HTTP port (others free)."""

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
        self.lock = DirLock(self.data_dir, "stack data directory", STACK_LOCK)
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
        if not self.auth_required and not self.base_env.get("DOCPARSE_INTERNAL_TOKEN"):
            # No API keys: parser_svc runs without an internal token only when told by name.
            self.base_env.setdefault("DOCPARSE_DEV_MODE", "true")
        if self.auth_required and not self.base_env.get("DOCPARSE_GATEWAY_INTERNAL_TOKEN"):
            # API keys on a local stack: the gateway and parser_svc share a secret of our own.
            token = secrets.token_hex(24)
            self.base_env["DOCPARSE_GATEWAY_INTERNAL_TOKEN"] = token
            self.base_env["DOCPARSE_INTERNAL_TOKEN"] = token
        # Every port of the stack is drawn at once: all different, none of the given ones.
        given = [
            *(range(port, port + gateways) if port else []),
            *([http_port] if http_port else []),
        ]
        # Reserved until stop(): no other process is handed one of them meanwhile (ports.py).
        self._held_ports = HeldPorts(3 * replicas + 3 * gateways + 1, exclude=given)
        drawn = iter(self._held_ports.ports)
        self.redis_port = next(drawn)
        self.parsers = [
            self._child("parser_svc", i, next(drawn), "parser_svc", "DOCPARSE_LISTEN")
            for i in range(replicas)
        ]
        gateway_ports = [port + i if port else next(drawn) for i in range(gateways)]
        self.gateways = [
            self._child("gateway", i, p, "gateway", "DOCPARSE_GATEWAY_LISTEN")
            for i, p in enumerate(gateway_ports)
        ]
        for i, gateway in enumerate(self.gateways):  # HTTP port: `http_port` for the first
            gateway.http_address = f"127.0.0.1:{(http_port if i == 0 else None) or next(drawn)}"
            gateway.env["DOCPARSE_GATEWAY_HTTP_LISTEN"] = gateway.http_address
        for children, var in (
            (self.parsers, "DOCPARSE_METRICS_LISTEN"),
            (self.gateways, "DOCPARSE_GATEWAY_METRICS_LISTEN"),
        ):
            for child in children:
                child.metrics_address = f"127.0.0.1:{next(drawn)}"
                child.env[var] = child.metrics_address

    @property
    def auth_required(self) -> bool:
        return self.base_env.get("DOCPARSE_GATEWAY_AUTH") == "required"

    @property
    def tls(self) -> bool:
        return bool(self.base_env.get("DOCPARSE_GATEWAY_TLS_CERT_FILE"))

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
    def children(self) -> list[Child]:
        return self.parsers + self.gateways

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
        """Starts Redis (embedded unless a URL was given) and every child, and waits until all
        serve. DocparseError: DIR_IN_USE (another stack holds the data directory),
        PORT_IN_USE (a child's port is taken), SETTING_INVALID (a variable a child cannot use,
        metadata `setting`), CHILD_EXITED (a child died while starting)."""
        try:
            self.lock.acquire()
            # Owner only: the blobs (uploads, results, passwords' side files), logs and the
            # Redis data of a developer's stack are no other local user's to read.
            os.chmod(self.data_dir, 0o700)
            self._held_ports.hold()
            if not self.redis_url:
                password = secrets.token_urlsafe(24)
                self.redis = EmbeddedRedis(self.data_dir / "redis", self.redis_port, password)
                self.redis.start()
                self.redis_url = self.redis.url
                self.redis.write_url(self.data_dir / "redis.url")  # with its password, 0600
            backends = ",".join(self.parser_addresses)
            for child in self.children:
                child.env = {
                    **self.base_env,
                    "DOCPARSE_REDIS_URL": self.redis_url,
                    "DOCPARSE_GATEWAY_BACKENDS": backends,
                    **child.env,
                }
                child.pass_fds = self.lock.fds()
                child.start()
            for child in self.children:
                self._wait_ready(child, timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, child: Child, timeout: float) -> None:
        """DEADLINE_EXCEEDED NOT_READY when `child` is not serving within `timeout`."""
        try:
            if child.tls:  # the gRPC port speaks TLS only: ask the HTTP side, which says SERVING
                wait_healthz(child.http_address, timeout, child)
            else:  # a replica serving TLS is asked over TLS, trusting the gateways' CA
                tls = replica_tls(child.env) if child in self.parsers else None
                wait_serving(child.address, timeout, child, tls)
        except TimeoutError as err:
            raise DocparseError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                ErrorReason.NOT_READY,
                f"{child.name} was not serving after {timeout:.0f} s ({err}); see {child.log}",
                {"child": child.name, "log": str(child.log)},
            ) from err

    def restart(self, child: Child, timeout: float = 60.0) -> None:
        """Starts a stopped or killed child again on its address (same environment)."""
        if child.alive():
            child.stop()
        elif child.proc is not None:
            child.proc.wait()
        child.start()
        self._wait_ready(child, timeout)

    def auth_enforced(self) -> bool:
        """Whether the first gateway refuses a call without an API key, asked of the running
        gateway itself (a call with no key: 401, or an answer), not inferred from settings."""
        if not self.gateways or not self.gateways[0].http_address:
            return self.auth_required
        url = f"http://{self.gateways[0].http_address}/v1/jobs/auth-probe"
        try:
            with urllib.request.urlopen(url, timeout=10):
                return False
        except urllib.error.HTTPError as err:
            return err.code == 401
        except OSError:
            return self.auth_required

    def ready_line(self) -> str:
        """One line for scripts: `docparse ready key=value ...`; lists in the order of
        `gateway=` and `parser_svc=` (metrics: the replicas', then the gateways')."""
        metrics = ",".join(f"http://{c.metrics_address}/metrics" for c in self.children)
        return (
            f"{READY_PREFIX} gateway={','.join(self.gateway_addresses)} "
            f"parser_svc={','.join(self.parser_addresses)} redis={self.shown_redis_url} "
            f"data={self.data_dir} metrics={metrics} "
            f"http={','.join('http://' + a for a in self.http_addresses)}"
        )

    @property
    def shown_redis_url(self) -> str:
        """The Redis URL with its password masked, for the terminal and logs."""
        return self.redis.masked_url if self.redis is not None else self.redis_url

    def table(self) -> str:
        """What runs where, one line per process, for people."""
        lines = []
        for child in self.gateways:
            scheme = "grpcs" if child.tls else "grpc"
            lines.append(
                f"  {child.name:<13} {scheme} {child.address:<16} http http://{child.http_address}"
                f"  metrics http://{child.metrics_address}/metrics  log {child.log}"
            )
        for child in self.parsers:
            scheme = "grpcs" if child.env.get("DOCPARSE_TLS_CERT_FILE") else "grpc"
            lines.append(
                f"  {child.name:<13} {scheme} {child.address:<16} "
                f"metrics http://{child.metrics_address}/metrics  log {child.log}"
            )
        if self.redis is not None:
            lines.append(f"  {'redis':<13} {self.shown_redis_url}  data {self.redis.data_dir}")
        return "\n".join(lines)

    def stop(self) -> None:
        children = self.gateways + self.parsers
        for child in children:
            child.signal(signal.SIGTERM)
        for child in children:
            child.stop()
        if self.redis is not None:
            self.redis.stop()
        self._held_ports.release()
        self.lock.release()

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
