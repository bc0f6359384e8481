"""A missing secret is a refusal to start, not an open door: parser_svc without its internal
token, a gateway that must authenticate without keys or without the token it vouches with. Dev
mode is asked for by name and says so. Each refusal: exit code 2 within seconds, one error line
with a reason, no traceback, nothing listening."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from docparse.local.embedded_redis import free_port
from docparse_server.tenancy import key_digest

pytestmark = pytest.mark.stack  # runs the servers' entry points

KEYS = json.dumps({"keys": [{"sha256": key_digest("k"), "tenant": "t"}]})


def start(module: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DOCPARSE_")}
    return subprocess.run(
        [sys.executable, "-m", module],
        env={**clean, "DOCPARSE_LOG_FORMAT": "text", **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as sock:
        return sock.connect_ex((host, int(port))) == 0


@pytest.mark.parametrize(
    ("module", "env", "reason"),
    [
        ("parser_svc", {}, "INTERNAL_TOKEN_MISSING"),
        ("parser_svc", {"DOCPARSE_DEV_MODE": "false"}, "INTERNAL_TOKEN_MISSING"),
        ("gateway", {}, "AUTH_NOT_CONFIGURED"),  # auth is required by default
        ("gateway", {"DOCPARSE_GATEWAY_INTERNAL_TOKEN": "s"}, "AUTH_NOT_CONFIGURED"),
        ("gateway", {"DOCPARSE_GATEWAY_API_KEYS": KEYS}, "AUTH_NOT_CONFIGURED"),
    ],
)
def test_a_missing_secret_refuses_to_start(module: str, env: dict[str, str], reason: str) -> None:
    address = f"127.0.0.1:{free_port()}"
    listen = {"DOCPARSE_LISTEN": address, "DOCPARSE_GATEWAY_LISTEN": address}
    ended = start(module, {**listen, "DOCPARSE_GATEWAY_HTTP_LISTEN": "", **env})
    assert ended.returncode == 2, ended.stderr
    assert reason in ended.stderr and "Traceback" not in ended.stderr
    assert not listening(address)


@pytest.mark.parametrize(
    ("module", "env", "setting"),
    [
        ("parser_svc", {"DOCPARSE_WORKER_CONCURRENCY": "two"}, "DOCPARSE_WORKER_CONCURRENCY"),
        ("parser_svc", {"DOCPARSE_OCR_PRELOAD": "latin,klingon"}, "DOCPARSE_OCR_PRELOAD"),
        ("parser_svc", {"DOCPARSE_LOG_FORMAT": "xml"}, "DOCPARSE_LOG_FORMAT"),
        ("gateway", {"DOCPARSE_GATEWAY_EVENT_LOOP": "trio"}, "DOCPARSE_GATEWAY_EVENT_LOOP"),
    ],
)
def test_an_unusable_setting_refuses_to_start_naming_it(
    module: str, env: dict[str, str], setting: str
) -> None:
    address = f"127.0.0.1:{free_port()}"
    listen = {"DOCPARSE_LISTEN": address, "DOCPARSE_GATEWAY_LISTEN": address}
    ended = start(module, {**listen, "DOCPARSE_GATEWAY_HTTP_LISTEN": "", **env})
    assert ended.returncode == 2, ended.stderr
    (line,) = ended.stderr.strip().splitlines()  # one line: the refusal, no traceback
    assert "FAILED_PRECONDITION SETTING_INVALID" in line and setting in line, line
    assert not listening(address)


def test_a_refusal_names_the_setting_but_never_shows_its_value() -> None:
    """A secret pasted into the wrong variable stays out of the logs; the JSON line lists the
    variables in `setting`."""
    address = f"127.0.0.1:{free_port()}"
    secret = "sk-live-0123456789abcdef"
    env = {"DOCPARSE_LISTEN": address, "DOCPARSE_LOG_FORMAT": "json",
           "DOCPARSE_WORKER_CONCURRENCY": secret, "DOCPARSE_MAX_ATTEMPTS": "-x"}  # fmt: skip
    ended = start("parser_svc", env)
    assert ended.returncode == 2, ended.stderr
    (line,) = ended.stderr.strip().splitlines()
    record = json.loads(line)
    assert (record["event"], record["reason"]) == ("startup.failed", "SETTING_INVALID")
    assert record["setting"] == "DOCPARSE_WORKER_CONCURRENCY,DOCPARSE_MAX_ATTEMPTS"
    assert secret not in ended.stderr


def test_dev_mode_is_asked_for_by_name_and_says_so() -> None:
    """With DOCPARSE_DEV_MODE=true parser_svc starts without a token and warns; it is ended
    here once the warning is out (it would then connect to Redis, which is not the point)."""
    address = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPARSE_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "parser_svc"],
        env={**env, "DOCPARSE_DEV_MODE": "true", "DOCPARSE_LISTEN": address,
             "DOCPARSE_LOG_FORMAT": "text", "DOCPARSE_ROLE": "api",
             "DOCPARSE_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"},
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "dev mode" in line and "tenant" in line
    finally:
        proc.kill()
        proc.wait()
