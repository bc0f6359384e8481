"""Warm parse workers (parser_svc.child.zygote): each job still gets a process of its own, forked
from a pre-imported fork server. What a user relies on: a job that leaks or corrupts its
process's state leaves later jobs untouched; a killed fork server or a killed child costs at
most that job's attempt; a worker that has run 1,000 jobs has not grown; the default number
of parses follows the CPUs the process may use."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis

from docparse.client import Client
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2
from docparse_server.cpus import cgroup_quota, usable_cpus
from parser_svc.work.progress_writer import PROGRESS_WRITE_INTERVAL_S
from tests.conftest import make_stack
from tests.docparse_server.test_observability import scrape, total
from tests.helpers import eventually, make_pdf, submit, wait_terminal

CORRUPT_MARKER = "DOCPARSE-TEST-CORRUPT-GLOBALS"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("warm"),
        replicas=1,
        gateways=1,
        extra_env={
            "DOCPARSE_FAULT_CORRUPT_MARKER": CORRUPT_MARKER,
            "DOCPARSE_RETRY_BACKOFF_MS": "200",
        },
    ) as running:
        yield running


def _children(parent: int) -> dict[int, bytes]:
    """pid -> command line of each live process whose parent is `parent`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == parent and state != "Z":
            found[int(entry.name)] = cmdline
    return found


def _zygote(stack: LocalStack) -> int:
    def find() -> int | None:
        kids = _children(stack.parsers[0].pid)
        return next((pid for pid, cmd in kids.items() if b"parser_svc.child.zygote" in cmd), None)

    return eventually(find, 30, "the replica's fork server")


def _parse_child(stack: LocalStack, job_id: str) -> int:
    def find() -> int | None:
        kids = _children(stack.parsers[0].pid)
        return next((pid for pid, cmd in kids.items() if f"inputs/{job_id}".encode() in cmd), None)

    return eventually(find, 30, f"the parse child of {job_id}")


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def _text(stack: LocalStack, job_id: str) -> str:
    with Client(stack.gateway_addresses[0]) as client:
        return "\n".join(page.text for page in client.result(job_id).pages)


def _parse(stack: LocalStack, content: bytes, name: str) -> job_pb2.Job:
    address = stack.gateway_addresses[0]
    return wait_terminal(address, submit(address, content, name).job_id)


def test_a_job_that_leaks_and_corrupts_globals_leaves_later_jobs_untouched(
    stack: LocalStack,
) -> None:
    warm = _parse(stack, make_pdf(1, "warm"), "warm.pdf")  # the fork server has its imports
    assert warm.state == job_pb2.STATE_SUCCEEDED, warm.error
    zygote = _zygote(stack)
    zygote_rss = _rss_kb(zygote)
    bad = _parse(stack, make_pdf(2, "bad") + f"\n% {CORRUPT_MARKER}\n".encode(), "bad.pdf")
    assert bad.state == job_pb2.STATE_SUCCEEDED, bad.error
    # The fault fired in that job's own process (its text was replaced) ...
    assert "CORRUPTED BY AN EARLIER JOB" in _text(stack, bad.job_id)
    # ... and reached no later one.
    for i in range(3):
        good = _parse(stack, make_pdf(2, f"good{i}"), f"good{i}.pdf")
        assert good.state == job_pb2.STATE_SUCCEEDED, good.error
        text = _text(stack, good.job_id)
        assert f"good{i} 1 of 2" in text and "CORRUPTED" not in text
    # The 64 MB it kept went with its process: the fork server did not take it on.
    assert _zygote(stack) == zygote
    assert _rss_kb(zygote) < zygote_rss + 16 * 1024


def _spare(stack: LocalStack) -> int | None:
    kids = _children(stack.parsers[0].pid)
    return next((pid for pid, cmd in kids.items() if b"parse_child\0(spare)" in cmd), None)


def test_an_idle_replica_readies_the_next_jobs_child_and_the_next_job_takes_it(
    stack: LocalStack,
) -> None:
    """After its parses end, with no job waiting, a replica's fork server has a spare child
    (child/zygote.py); the next job runs in it, and its package is its own document's."""
    first = _parse(stack, make_pdf(1, "first"), "first.pdf")
    assert first.state == job_pb2.STATE_SUCCEEDED, first.error
    spare = eventually(lambda: _spare(stack), 10, "a spare parse child of the idle replica")
    second = _parse(stack, make_pdf(1, "second"), "second.pdf")
    assert second.state == job_pb2.STATE_SUCCEEDED, second.error
    assert _text(stack, second.job_id).startswith("second 1 of 1")
    # The spare became the second job's child and ended with it; the idle replica has a new one.
    assert spare not in _children(stack.parsers[0].pid)
    assert eventually(lambda: _spare(stack), 10, "the next spare") != spare


def _children_started(stack: LocalStack, start: str) -> float:
    """docparse_parse_children_total{start=...} of the stack's replica."""
    samples = scrape(stack.parsers[0].metrics_address)
    return total([samples], "docparse_parse_children_total", start=start)


@pytest.mark.stack  # starts stacks in its body
def test_a_replica_starts_with_a_spare_and_has_none_when_spares_are_off(tmp_path: Path) -> None:
    """A replica readies a spare as it starts, so its first job takes a warm child (the
    replica counts it as start="spare"). With DOCPARSE_SPARE_AFTER_IDLE_MS=0 every job's child
    is forked when the job comes, and no spare is ever forked."""
    with make_stack(tmp_path / "on", replicas=1, gateways=1) as on:
        spare = eventually(lambda: _spare(on), 30, "a spare of the replica that just started")
        first = _parse(on, make_pdf(1, "first"), "first.pdf")
        assert first.state == job_pb2.STATE_SUCCEEDED, first.error
        assert _text(on, first.job_id).startswith("first 1 of 1")
        assert spare not in _children(on.parsers[0].pid)
        assert (_children_started(on, "spare"), _children_started(on, "forked")) == (1, 0)
    env = {"DOCPARSE_SPARE_AFTER_IDLE_MS": "0"}
    with make_stack(tmp_path / "off", replicas=1, gateways=1, extra_env=env) as off:
        for i in range(2):
            job = _parse(off, make_pdf(1, f"job{i}"), f"job{i}.pdf")
            assert job.state == job_pb2.STATE_SUCCEEDED, job.error
        assert (_children_started(off, "spare"), _children_started(off, "forked")) == (0, 2)
        assert _spare(off) is None


def test_a_one_page_job_publishes_once_after_its_create(stack: LocalStack) -> None:
    """A job that ends within the progress interval writes no progress of its
    own and publishes no claim: its watchers get the created record and the terminal one, which
    carries the last progress (versions strictly increasing)."""
    assert stack.redis_url
    client = redis.Redis.from_url(stack.redis_url)
    pubsub = client.pubsub()
    pubsub.psubscribe("docparse:*:job:*:events")
    assert pubsub.get_message(timeout=5)["type"] == "psubscribe"
    _parse(stack, make_pdf(1, "warm-up"), "warm-up.pdf")  # connections and fork server warm
    try:
        job = _parse(stack, make_pdf(1, "quiet"), "quiet.pdf")
        assert job.state == job_pb2.STATE_SUCCEEDED, job.error
        assert (job.progress.done, job.progress.total) == (1, 1)
        records = []
        while (message := pubsub.get_message(timeout=0.5)) is not None:
            record = json.loads(message["data"])
            if record["job_id"] == job.job_id:
                records.append((int(record["version"]), record["state"]))
    finally:
        pubsub.close()
        client.close()
    versions = [version for version, _ in records]
    assert versions == sorted(set(versions)) and versions[-1] == job.version, records
    assert records[0][1] == "QUEUED" and records[-1][1] == "SUCCEEDED", records
    took_ms = job.update_time.ToMilliseconds() - job.create_time.ToMilliseconds()
    if took_ms < PROGRESS_WRITE_INTERVAL_S * 1000:
        # Ended within the interval: created, then SUCCEEDED; the quiet claim's version is
        # skipped. (A loaded machine may take longer; then progress is published too.)
        assert [state for _, state in records] == ["QUEUED", "SUCCEEDED"], (records, took_ms)


@pytest.mark.stack  # starts stacks in its body
def test_a_killed_fork_server_costs_no_running_parse_and_is_replaced(
    tmp_path: Path,
) -> None:
    with make_stack(
        tmp_path, replicas=1, gateways=1, extra_env={"DOCPARSE_PARSE_PAGE_DELAY_MS": "200"}
    ) as slow:
        address = slow.gateway_addresses[0]
        job = submit(address, make_pdf(8, "long"), "long.pdf")
        child = _parse_child(slow, job.job_id)
        zygote = _zygote(slow)
        os.kill(zygote, signal.SIGKILL)
        final = wait_terminal(address, job.job_id)
        # The running parse is the worker's child, not the fork server's: it went on.
        assert final.state == job_pb2.STATE_SUCCEEDED, final.error
        assert final.attempt == 1 and final.result.page_count == 8
        assert child not in _children(slow.parsers[0].pid)  # it ended and was reaped
        after = _parse(slow, make_pdf(1, "after"), "after.pdf")
        assert after.state == job_pb2.STATE_SUCCEEDED, after.error
        assert _zygote(slow) != zygote
        assert slow.parsers[0].alive()


@pytest.mark.stack  # starts a stack in its body
def test_a_killed_forked_child_is_retried_like_a_crashed_one(tmp_path: Path) -> None:
    with make_stack(
        tmp_path,
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_PARSE_PAGE_DELAY_MS": "200", "DOCPARSE_RETRY_BACKOFF_MS": "200"},
    ) as slow:
        address = slow.gateway_addresses[0]
        job = submit(address, make_pdf(6, "killed"), "killed.pdf")
        os.kill(_parse_child(slow, job.job_id), signal.SIGKILL)
        final = wait_terminal(address, job.job_id)
        assert final.state == job_pb2.STATE_SUCCEEDED, final.error
        assert final.attempt == 2 and final.result.page_count == 6
        assert slow.parsers[0].alive()


def test_a_worker_that_ran_a_thousand_jobs_has_not_grown(stack: LocalStack) -> None:
    replica = stack.parsers[0].pid
    zygote = _zygote(stack)
    documents = [make_pdf(1, f"doc{i}") for i in range(1000)]

    def run(i: int) -> int:
        return _parse(stack, documents[i], f"doc{i}.pdf").state

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(run, range(10))) == {job_pb2.STATE_SUCCEEDED}
        first = {"replica": _rss_kb(replica), "fork server": _rss_kb(zygote)}
        assert set(pool.map(run, range(10, 1000))) == {job_pb2.STATE_SUCCEEDED}
    last = {"replica": _rss_kb(replica), "fork server": _rss_kb(zygote)}
    assert _zygote(stack) == zygote, "the fork server was replaced"
    for name, rss in last.items():
        assert rss <= first[name] * 1.2, f"{name}: {first[name]} kB after 10 jobs, {rss} after 1000"


def test_cpu_quota_bounds_the_default_concurrency(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # 1.5 CPUs
    assert cgroup_quota(tmp_path) == 1.5
    assert usable_cpus(tmp_path) == min(2, len(os.sched_getaffinity(0)))
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_quota(tmp_path) is None
    assert usable_cpus(tmp_path) == len(os.sched_getaffinity(0))


def test_cpu_affinity_bounds_the_default_concurrency() -> None:
    """A process pinned to one CPU (taskset, or a CPU-manager pod) counts one."""
    code = "from docparse_server.cpus import usable_cpus; print(usable_cpus())"
    pinned = subprocess.run(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{0}}); {code}"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    assert pinned.stdout.strip() == "1"


async def test_a_launch_cancelled_mid_answer_does_not_mix_up_the_next_job(tmp_path: Path) -> None:
    """A worker task cancelled while the fork server answers must not leave that answer to be
    read as the next job's: the next parse gets its own child, on its own document."""
    from docparse.v1 import reading_package_pb2 as rp
    from parser_svc.child.fork_server import ForkServer

    first, second = tmp_path / "first.pdf", tmp_path / "second.pdf"
    first.write_bytes(make_pdf(1, "first"))
    second.write_bytes(make_pdf(1, "second"))
    server = ForkServer()
    server.start()
    try:
        argv = ["pdf", str(first), str(tmp_path / "first.pb"), "60", "2048"]
        pending = asyncio.ensure_future(server.launch(argv))
        await asyncio.sleep(0)  # the request is sent; the task waits for the answer
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending

        output = tmp_path / "second.pb"
        child = await server.launch(["pdf", str(second), str(output), "60", "2048"])
        assert child is not None
        # The child it answered with is the one made for this request: alive (it waits for its
        # options) and, once it has renamed itself (right after the fork, so the fork server's
        # reply can come first), named after its document.
        eventually(
            lambda: str(second).encode() in _children(os.getpid()).get(child.pid, b""),
            10,
            f"the child {child.pid} named after {second.name}",
        )
        await child.send(b"{}")
        events = [json.loads(line) async for line in child.stdout]
        assert await child.wait() == 0 and events[-1]["event"] == "done", events
        package = rp.ReadingPackage.FromString(output.read_bytes())
        assert package.pages[0].text.startswith("second 1 of 1")
    finally:
        server.close()
