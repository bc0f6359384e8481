"""Spare parse children (parser_svc.child.zygote): asked by an idle worker, the fork server
forks the next job's child ahead, and the spare parses a document of its own while no job
waits. What a user relies on: the next job runs in that spare, with its own document only; a
spare never outlives its fork server or its worker, as a process or as a zombie; a spare that
died while waiting costs no job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.fork_server import ForkedChild, ForkServer
from tests.helpers import eventually, make_pdf

ROOT = Path(__file__).resolve().parents[3]


def _children() -> dict[int, str]:
    """pid -> state (R, S, Z, ...) of each process whose parent is this one, zombies too
    (other tests of this process may have children of their own: assert on known pids)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue
        if int(ppid) == os.getpid():
            found[int(entry.name)] = state
    return found


def _started_ticks(pid: int) -> int:
    """When the process started, in clock ticks after boot (/proc/PID/stat field 22)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _boot_ticks_now() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")


async def _parse(server: ForkServer, tmp_path: Path, name: str, text: str) -> tuple[int, str]:
    """(the child's pid, page 1's text) of a one-page PDF parsed in a child of `server`."""
    source, output = tmp_path / f"{name}.pdf", tmp_path / f"{name}.pb"
    source.write_bytes(make_pdf(1, text))
    child = await server.launch(["pdf", str(source), str(output), "60", "2048"], None, b"{}")
    assert isinstance(child, ForkedChild)
    events = [json.loads(line) async for line in child.stdout]
    assert await child.wait() == 0 and events[-1]["event"] == "done", events
    return child.pid, rp.ReadingPackage.FromString(output.read_bytes()).pages[0].text


async def test_the_next_job_runs_in_the_spare_forked_before_it_with_its_own_document(
    tmp_path: Path,
) -> None:
    server = ForkServer()
    server.start()
    zygote = server.pid
    try:
        first, text = await _parse(server, tmp_path, "first", "first memo")
        assert text.startswith("first memo") and not server.spare  # a launch forks none
        await server.ready_spare()
        spare = server.spare
        assert spare and spare != first and _children().get(spare) in {"R", "S"}
        await server.ready_spare()
        assert server.spare == spare, "a second spare was forked while one waited"
        # It was forked before the second job was asked for (a tick is 10 ms: wait past it).
        forked_at = _started_ticks(spare)
        eventually(lambda: _boot_ticks_now() > forked_at + 2, 5, "two clock ticks")
        second, text = await _parse(server, tmp_path, "second", "second memo")
        assert second == spare
        # Its package is its document's: nothing of the warm-up's page is in it.
        assert text.startswith("second memo") and "Spare" not in text
        assert not server.spare
        await server.ready_spare()
        last = server.spare
        assert last not in {0, first, second}
    finally:
        server.close()
    left = {first, second, last, zygote} & set(_children())
    assert not left, f"{left} outlived the fork server (as processes or zombies)"


async def test_a_spare_killed_while_waiting_costs_no_job_and_is_reaped(tmp_path: Path) -> None:
    server = ForkServer()
    server.start()
    zygote = server.pid
    try:
        await server.ready_spare()
        dead = server.spare
        os.kill(dead, signal.SIGKILL)
        eventually(lambda: _children().get(dead) == "Z", 10, f"the spare {dead} killed")
        pid, text = await _parse(server, tmp_path, "second", "second memo")
        assert pid != dead and text.startswith("second memo")
        assert dead not in _children(), "the killed spare was not reaped"
    finally:
        server.close()
    assert not {pid, zygote} & set(_children())


async def test_a_killed_fork_server_takes_its_spare_with_it(tmp_path: Path) -> None:
    server = ForkServer()
    server.start()
    try:
        await server.ready_spare()
        spare, zygote = server.spare, server.pid
        assert spare and zygote
        os.kill(zygote, signal.SIGKILL)
        # The next launch finds the fork server dead, starts another and reaps the old spare.
        pid, text = await _parse(server, tmp_path, "second", "second memo")
        assert text.startswith("second memo") and pid != spare
        assert spare not in _children(), "the dead fork server's spare is still there"
        assert server.pid != zygote
        await server.ready_spare()
        last, second_zygote = server.spare, server.pid
    finally:
        server.close()
    assert not {pid, zygote, last, second_zygote} & set(_children())


def test_a_spare_dies_with_its_worker() -> None:
    """A worker killed outright (no close) leaves no spare running: it dies with its parent."""
    script = """
import asyncio, json, time
from parser_svc.child.fork_server import ForkServer

async def main():
    server = ForkServer()
    server.start()
    await server.ready_spare()
    print(json.dumps({"spare": server.spare, "zygote": server.pid}), flush=True)
    time.sleep(60)

asyncio.run(main())
"""
    worker = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=ROOT, text=True
    )
    try:
        assert worker.stdout is not None
        pids = json.loads(worker.stdout.readline())
        spare = pids["spare"]
        assert spare and Path(f"/proc/{spare}").exists()
        worker.kill()
        worker.wait(timeout=10)
        eventually(lambda: not Path(f"/proc/{spare}").exists(), 10, f"the spare {spare} gone")
    finally:
        worker.kill()
        worker.wait(timeout=10)
