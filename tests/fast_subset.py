"""The fast subset (`make test-fast`): which tests are `stack`, and the guard that keeps the
marker honest.

A test is `stack` when a fixture it uses (directly or through other fixtures) yields a running
server: the fixture's return annotation names one of SERVER_TYPES (`-> Iterator[LocalStack]`).
Tests that start a server in their own body, or through a fixture annotated otherwise, say so
with `pytestmark = pytest.mark.stack` (or `@pytest.mark.stack`).

Under DOCPARSE_TEST_FAST=1 the few places that start a server refuse to, so a test missing its
marker fails the fast run with a message naming what it started instead of slowing it down.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from docparse.local.embedded_redis import EmbeddedRedis
from docparse.local.stack import Child, LocalStack
from tests import helpers, redis_servers
from tests.faultproxy import FaultProxy

SERVER_TYPES = re.compile(
    r"(?<![\w.])(LocalStack|EmbeddedRedis|ClusterSet|SentinelSet|FaultProxy|Server|Up)\b"
)


def starts_a_server(fixturedef: Any) -> bool:
    """A fixture whose return annotation names a running server."""
    annotation = getattr(fixturedef.func, "__annotations__", {}).get("return", "")
    return bool(SERVER_TYPES.search(str(annotation)))


def mark_stack_tests(items: Sequence[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function) or item.get_closest_marker("stack"):
            continue
        named = item._fixtureinfo.name2fixturedefs
        if any(starts_a_server(d) for name in item.fixturenames for d in named.get(name, ())):
            item.add_marker(pytest.mark.stack)


def refuse(what: str) -> Callable[..., Any]:
    def refused(*args: object, **kwargs: object) -> Any:
        pytest.fail(f"this test starts {what}: it belongs to the stack marker", pytrace=False)

    return refused


def server_argv(args: object) -> str | None:
    """What a child process with these arguments serves, if it is a server."""
    if isinstance(args, str | bytes | Path):
        argv = os.fsdecode(args).split()
    elif isinstance(args, Sequence):
        argv = [os.fsdecode(a) if isinstance(a, bytes | Path) else str(a) for a in args]
    else:
        argv = [str(args)]
    name = Path(argv[0]).name if argv else ""
    if name.startswith("redis-server") and not {"--version", "-v"} & set(argv[1:]):
        return f"a redis-server ({' '.join(argv)[:120]})"
    modules = {argv[i + 1] for i, word in enumerate(argv[:-1]) if word == "-m"}
    if modules & {"parser_svc", "gateway"} or ("docparse" in modules | {name} and "up" in argv):
        return f"a server process ({' '.join(argv)[:120]})"
    return None


class GuardedPopen(subprocess.Popen):  # type: ignore[type-arg]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        what = server_argv(args[0] if args else kwargs.get("args", ()))
        if what is not None:
            refuse(what)()
        super().__init__(*args, **kwargs)


@contextmanager
def refusing_servers() -> Iterator[None]:
    """While open, each way the tests start a server fails the test, naming what it started."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalStack, "start", refuse("a local stack (LocalStack)"))
        patch.setattr(EmbeddedRedis, "start", refuse("an embedded redis-server (EmbeddedRedis)"))
        patch.setattr(Child, "start", refuse("a service process (docparse.local.stack.Child)"))
        patch.setattr(redis_servers.Server, "__init__", refuse("a redis-server (redis_servers)"))
        patch.setattr(helpers.Up, "__init__", refuse("`docparse up` (tests/helpers.py Up)"))
        patch.setattr(FaultProxy, "start", refuse("a fault proxy in front of Redis (FaultProxy)"))
        patch.setattr(subprocess, "Popen", GuardedPopen)
        yield


@pytest.fixture(scope="session", autouse=True)
def fast_run_guard() -> Iterator[None]:
    """Active only under DOCPARSE_TEST_FAST=1: set up before any other fixture of the session,
    so a module's stack fixture meets it too."""
    if os.environ.get("DOCPARSE_TEST_FAST") != "1":
        yield
        return
    with refusing_servers():
        yield
