"""Files that hold secrets are checked at start: one another local user could write (group or
others may write it, or another user owns it) refuses the start, exit 2 with one line naming
the file and its mode; one others may read starts with a warning; 0600 starts quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from docparse.local.embedded_redis import free_port
from docparse.local.readiness import wait_serving
from docparse_server.tenancy import key_digest

pytestmark = pytest.mark.stack  # runs the servers' entry points

KEYS = json.dumps({"keys": [{"sha256": key_digest("k"), "tenant": "t"}]})
SECRETS = json.dumps({"t": {"main": "whsec_" + "A" * 44}})


def gateway_env(keys_file: Path, address: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DOCPARSE_")}
    return {
        **clean,
        "DOCPARSE_GATEWAY_LOG_FORMAT": "text",
        "DOCPARSE_GATEWAY_LISTEN": address,
        "DOCPARSE_GATEWAY_HTTP_LISTEN": "",
        "DOCPARSE_GATEWAY_AUTH": "required",
        "DOCPARSE_GATEWAY_INTERNAL_TOKEN": "s",
        "DOCPARSE_GATEWAY_API_KEYS_FILE": str(keys_file),
    }


def write(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def run(module: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602])
def test_a_keys_file_others_may_write_refuses_to_start(tmp_path: Path, mode: int) -> None:
    keys = write(tmp_path / "keys.json", KEYS, mode)
    ended = run("gateway", gateway_env(keys, f"127.0.0.1:{free_port()}"))
    assert ended.returncode == 2, ended.stderr
    assert "AUTH_NOT_CONFIGURED" in ended.stderr and str(keys) in ended.stderr
    assert f"mode {mode:04o}" in ended.stderr and "Traceback" not in ended.stderr


def test_a_keys_file_of_another_user_refuses_to_start(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user takes root")
    keys = write(tmp_path / "keys.json", KEYS, 0o600)
    os.chown(keys, 65534, 65534)
    ended = run("gateway", gateway_env(keys, f"127.0.0.1:{free_port()}"))
    assert ended.returncode == 2 and "uid 65534" in ended.stderr, ended.stderr


@pytest.mark.parametrize(("mode", "warned"), [(0o600, False), (0o440, False), (0o644, True)])
def test_a_keys_file_only_its_owner_may_write_starts(
    tmp_path: Path, mode: int, warned: bool
) -> None:
    keys = write(tmp_path / "keys.json", KEYS, mode)
    address = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway"],
        env=gateway_env(keys, address),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_serving(address, timeout=30)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert ("any local user may read it" in stderr) is warned, stderr


def test_a_webhook_secrets_file_others_may_write_refuses_to_start(tmp_path: Path) -> None:
    secrets = write(tmp_path / "webhooks.json", SECRETS, 0o666)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DOCPARSE_")}
    ended = run(
        "parser_svc",
        {**clean, "DOCPARSE_LOG_FORMAT": "text", "DOCPARSE_DEV_MODE": "true",
         "DOCPARSE_LISTEN": f"127.0.0.1:{free_port()}",
         "DOCPARSE_WEBHOOK_SECRETS_FILE": str(secrets)},
    )  # fmt: skip
    assert ended.returncode == 2, ended.stderr
    assert "WEBHOOK_CONFIG_INVALID" in ended.stderr and "mode 0666" in ended.stderr
    assert str(secrets) in ended.stderr
