"""Fixtures: real redis-server processes and real docparse stacks (child processes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from docparse.local.embedded_redis import EmbeddedRedis
from docparse.local.stack import LocalStack
from tests.fast_subset import fast_run_guard, mark_stack_tests
from tests.faultproxy import FaultProxy
from tests.heavy_first import heaviest_first
from tests.skip_gate import install as install_skip_gate

__all__ = ["fast_run_guard"]  # a session fixture: the fast run's guard (tests/fast_subset.py)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_stack_tests(items)
    heaviest_first(items)  # the order files reach the xdist workers (tests/heavy_first.py)


def pytest_configure(config: pytest.Config) -> None:
    install_skip_gate(config)  # under CI an unlisted skip fails the run (tests/skip_gate.py)


# Short timers so resync / heartbeat paths run within a test's lifetime. No OCR models loaded
# at each fork server's start (~2 CPU s a replica; most stacks read no scan): a child that OCRs
# loads its own. The OCR stack and the corpus keep the default, all ("OCR_PRELOAD_ALL").
FAST_ENV = {
    "DOCPARSE_WATCH_RESYNC_S": "1.0",
    "DOCPARSE_WATCH_HEARTBEAT_S": "2.0",
    "DOCPARSE_REDIS_TIMEOUT_S": "1.0",
    "DOCPARSE_WORKER_CONCURRENCY": "2",
    "DOCPARSE_OCR_PRELOAD": "none",
}
OCR_PRELOAD_ALL = {"DOCPARSE_OCR_PRELOAD": "all"}


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def isolated_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """A redis-server of the test module's own, for tests that scan or count every key."""
    with EmbeddedRedis(tmp_path_factory.mktemp("isolated-redis")) as server:
        yield server


@pytest.fixture(scope="module")
def isolated_proxy(isolated_redis: EmbeddedRedis) -> Iterator[FaultProxy]:
    """tests/faultproxy.py in front of `isolated_redis`: services connect to `.url`."""
    with FaultProxy(isolated_redis.port) as running:
        yield running


@pytest.fixture(scope="session")
def big_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """4 parser_svc replicas and 2 gateways on one embedded Redis."""
    stack = LocalStack(
        tmp_path_factory.mktemp("big-stack"),
        replicas=4,
        gateways=2,
        env="test",
        extra_env=FAST_ENV,
    )
    stack.start()
    yield stack
    stack.stop()


def auth_env(keys: dict[str, object], token: str) -> dict[str, str]:
    """A stack that requires API keys: the gateway's keys and the secret it shares with
    parser_svc (each side reads its own variable)."""
    return {
        "DOCPARSE_GATEWAY_AUTH": "required",
        "DOCPARSE_GATEWAY_API_KEYS": json.dumps(keys),
        "DOCPARSE_GATEWAY_INTERNAL_TOKEN": token,
        "DOCPARSE_INTERNAL_TOKEN": token,
    }


def make_stack(path: Path, **kwargs: object) -> LocalStack:
    extra = {**FAST_ENV, **kwargs.pop("extra_env", {})}  # type: ignore[dict-item]
    return LocalStack(path, env="test", extra_env=extra, **kwargs)  # type: ignore[arg-type]
