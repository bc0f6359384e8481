"""A developer's local stack keeps its data to its owner: its Redis asks for a password (a
random one per stack, never printed), and its data directory (uploads, results, passwords'
side files, logs, the Redis files) is the owner's alone."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from docparse.local.stack import LocalStack
from tests.conftest import make_stack
from tests.helpers import make_pdf, submit, wait_terminal


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = make_stack(tmp_path_factory.mktemp("secrets"), replicas=1, gateways=1)
    s.start()
    yield s
    s.stop()


def test_the_stack_redis_refuses_a_client_without_its_password(stack: LocalStack) -> None:
    url = urlsplit(stack.redis_url)
    assert url.password and len(url.password) >= 24
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host=url.hostname or "", port=url.port or 0).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host=url.hostname or "", port=url.port or 0, password="guess").ping()
    assert redis.Redis.from_url(stack.redis_url).ping()
    # The servers use it: a job runs end to end.
    address = stack.gateway_addresses[0]
    job = wait_terminal(address, submit(address, make_pdf(1, "owner only")).job_id)
    assert job.result.page_count == 1
    assert url.password not in stack.table()
    url_file = stack.data_dir / "redis.url"
    assert url_file.read_text().strip() == stack.redis_url
    assert stat.S_IMODE(url_file.stat().st_mode) == 0o600


def test_the_data_directory_and_logs_are_the_owners_alone(stack: LocalStack) -> None:
    assert stat.S_IMODE(stack.data_dir.stat().st_mode) == 0o700
    logs = list((stack.data_dir / "logs").glob("*.log"))
    assert logs and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in logs)
    assert stat.S_IMODE((stack.data_dir / "logs").stat().st_mode) == 0o700
    for path in Path(stack.data_dir).rglob("*"):
        assert not path.stat().st_mode & stat.S_IWOTH, path
