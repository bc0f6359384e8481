"""The fast subset (tests/fast_subset.py): a test that uses a fixture yielding a server is
marked `stack`, and under the fast run's guard every way to start a server fails the test,
naming what it started; tools the pure tests run (python -c, node) still run."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest

from docparse.local.embedded_redis import EmbeddedRedis, redis_server_binary
from docparse.local.stack import LocalStack
from tests.fast_subset import refusing_servers, server_argv, starts_a_server
from tests.helpers import Up

ROOT = Path(__file__).resolve().parents[2]


def yields_a_stack() -> Iterator[LocalStack]:
    raise AssertionError("never called")


def yields_a_pair() -> Iterator[tuple[EmbeddedRedis, int, int]]:
    raise AssertionError("never called")


def yields_bytes() -> bytes:
    raise AssertionError("never called")


def yields_a_grpc_server() -> Iterator[grpc.Server]:
    raise AssertionError("never called")


@pytest.mark.parametrize(
    ("fixture", "marks"),
    [(yields_a_stack, True), (yields_a_pair, True), (yields_bytes, False),
     (yields_a_grpc_server, False)],
)  # fmt: skip
def test_a_fixture_that_yields_a_server_marks_its_tests(fixture: object, marks: bool) -> None:
    assert starts_a_server(SimpleNamespace(func=fixture)) is marks


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["/usr/bin/redis-server", "redis.conf"], "a redis-server"),
        ([sys.executable, "-m", "parser_svc"], "a server process"),
        ([sys.executable, "-m", "gateway"], "a server process"),
        ([sys.executable, "-m", "docparse", "up", "--replicas", "1"], "a server process"),
        ("docparse up --replicas 1", "a server process"),
        (["/usr/bin/redis-server", "--version"], None),
        ([sys.executable, "-m", "docparse", "submit", "a.pdf"], None),
        (["node", "--test"], None),
    ],
)
def test_server_processes_are_told_from_tools(argv: object, what: str | None) -> None:
    found = server_argv(argv)
    assert (found and found.split(" (")[0]) == what, found


def test_under_the_guard_each_way_to_start_a_server_fails_naming_it(tmp_path: Path) -> None:
    starts: dict[str, Callable[[], object]] = {
        "an embedded redis-server": lambda: EmbeddedRedis(tmp_path / "redis").start(),
        "a local stack": lambda: LocalStack(tmp_path / "stack").start(),
        "`docparse up`": lambda: Up("--replicas", "1", cwd=tmp_path),
        "a redis-server": lambda: subprocess.run([redis_server_binary(), "--port", "0"]),
    }
    with refusing_servers():
        for what, start in starts.items():
            with pytest.raises(pytest.fail.Exception, match="it belongs to the stack marker") as e:
                start()
            assert str(e.value).startswith(f"this test starts {what}"), e.value
        tool = subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True)
        assert tool.stdout == b"ok\n"


@pytest.mark.slow
def test_the_fast_subset_leaves_out_stack_tests_and_keeps_pure_ones() -> None:
    """Collected as `make test-fast` collects: a module whose fixture yields a stack is left
    out whole, a test marked by hand is left out, the offline SDK tests stay."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not stack",
         "tests/gateway/test_http.py", "tests/docparse/test_sdk_offline.py",
         "tests/parser_svc/state/test_store.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    kept = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    assert kept == {"tests/docparse/test_sdk_offline.py"}, done.stdout + done.stderr
    assert "test_unreachable_redis_is_unavailable_not_not_found" not in done.stdout
