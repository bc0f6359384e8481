"""A parse process holds no secret of the service and cannot reach the network: a memory bug
in mupdf or tesseract, exploited by a tenant's document, finds no internal token, no Redis URL
or password, no key file path in its environment, and cannot open a socket to Redis. Both ways
a child starts: forked from the fork server, and spawned fresh."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from parser_svc.child.fork_server import ForkServer
from parser_svc.child.sandbox import SpawnedChild
from tests.helpers import make_pdf

ROOT = Path(__file__).resolve().parents[3]
SECRETS = {
    "DOCPARSE_INTERNAL_TOKEN": "internal-token-0f3a",
    "DOCPARSE_REDIS_URL": "redis://:redis-password-77c1@10.0.0.5:6379/0",
    "DOCPARSE_KEYS_FILE": "/etc/docparse/keys.json",
    "DOCPARSE_WEBHOOK_SECRETS_FILE": "/etc/docparse/webhook-secrets.json",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-91d2",
}


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    yield


def _slow_parse(tmp_path: Path) -> list[str]:
    source = tmp_path / "doc.pdf"
    source.write_bytes(make_pdf(3, "a tenant's document"))
    return ["pdf", str(source), str(tmp_path / "out.pb"), "60", "2048"]


def _environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _assert_confined(pid: int) -> None:
    environ = _environ(pid)
    for name, value in SECRETS.items():
        assert name.encode() not in environ and value.encode() not in environ, name
    assert b"DOCPARSE_" not in environ
    status = _status(pid)
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"  # a filter


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
async def test_a_forked_child_has_no_secret_and_a_network_filter(
    tmp_path: Path, secret_env: None
) -> None:
    server = ForkServer()
    server.start()
    try:
        child = await server.launch(_slow_parse(tmp_path))
        assert child is not None and server.pid is not None
        await child.send(b'{"page_delay_ms": 2000}')  # still parsing while we look
        first = await asyncio.wait_for(child.stdout.readline(), 60)
        assert first, "the child said nothing"
        _assert_confined(child.pid)
        _assert_confined(server.pid)
        child.kill()
        await child.wait()
    finally:
        server.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
async def test_a_spawned_child_has_no_secret_and_a_network_filter(
    tmp_path: Path, secret_env: None
) -> None:
    child = await SpawnedChild.start(_slow_parse(tmp_path))
    await child.send(b'{"page_delay_ms": 2000}')
    first = await asyncio.wait_for(child.stdout.readline(), 60)
    assert first, "the child said nothing"
    _assert_confined(child._proc.pid)
    child.kill()
    await child.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="seccomp is Linux's")
def test_a_confined_process_cannot_connect_to_redis() -> None:
    """What every parse process applies to itself (confinement.apply_limits), against a
    listening TCP port standing for Redis: socket(2) fails, nothing connects; the fork
    server's kind of socket (a Unix socket pair) still works."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        script = (
            "import socket\n"
            "from parser_svc.child.confinement import apply_limits\n"
            "apply_limits(30, 2048)\n"
            "socket.socketpair()\n"
            "for family, address in ((socket.AF_INET, ('127.0.0.1', PORT)), "
            "(socket.AF_INET6, ('::1', PORT))):\n"
            "    try:\n"
            "        socket.create_connection(address, timeout=2)\n"
            "    except PermissionError:\n"
            "        print('refused', family.name)\n"
        ).replace("PORT", str(port))
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("\n")[:2] == ["refused AF_INET", "refused AF_INET6"]
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody got through
