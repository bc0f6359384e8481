"""Scratch rooms (parser_svc/child/scratch_rooms.py): what a worker killed mid-parse leaves in the
temporary directory is removed by the next worker to start, and nothing of a live worker's.
Real processes: each holds a room as a worker does, with a job's scratch directory and file in
it; one is SIGKILLed (no exit handler runs), as the OOM killer or a node does it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from parser_svc.child.privileges import ChildScratch
from parser_svc.child.scratch_rooms import LOCK_NAME, ROOM_PREFIX, sweep_rooms

HOLDER = """
import sys, time
from parser_svc.child.privileges import ChildScratch
scratch = ChildScratch(0, 0)
job = scratch.make()
open(job.name + "/page-3.png", "wb").write(b"a page drawn for OCR")
print(scratch.room(), flush=True)
time.sleep(120)
"""


@pytest.fixture
def holders(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def hold_room(tmp: Path, started: list[subprocess.Popen[str]]) -> Path:
    """A process that made its room (and a job's scratch in it) under `tmp`; the room."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, env=env
    )
    started.append(process)
    assert process.stdout is not None
    return Path(process.stdout.readline().strip())


def test_a_killed_workers_room_is_swept_a_live_ones_stays(
    tmp_path: Path, holders: list[subprocess.Popen[str]]
) -> None:
    killed, alive = hold_room(tmp_path, holders), hold_room(tmp_path, holders)
    for room in (killed, alive):
        assert room.parent == tmp_path and room.name.startswith(ROOM_PREFIX)
        assert [p.name for p in room.rglob("*.png")] == ["page-3.png"]
    holders[0].send_signal(signal.SIGKILL)
    holders[0].wait()
    assert killed.exists()  # no exit handler ran
    assert sweep_rooms(tmp_path) == 1
    assert not killed.exists()
    assert [p.name for p in alive.rglob("*.png")] == ["page-3.png"]
    assert sweep_rooms(tmp_path) == 0  # its worker still holds it
    holders[1].terminate()  # SIGTERM: no exit handler runs either
    holders[1].wait()
    assert sweep_rooms(tmp_path) == 1 and not alive.exists()


def test_only_real_rooms_of_this_user_are_swept(tmp_path: Path) -> None:
    """A room without its lock (being made) stays; a link named like a room is not followed;
    a plain file named like one is left alone."""
    making = tmp_path / f"{ROOM_PREFIX}making"
    making.mkdir()
    (making / "job").mkdir()
    outside = tmp_path / "not-ours"
    outside.mkdir()
    (outside / LOCK_NAME).touch()
    (outside / "keep").write_text("someone else's")
    (tmp_path / f"{ROOM_PREFIX}link").symlink_to(outside)
    (tmp_path / f"{ROOM_PREFIX}file").write_text("x")
    assert sweep_rooms(tmp_path) == 0
    assert (making / "job").is_dir() and (outside / "keep").read_text() == "someone else's"


def test_a_worker_sweeps_when_it_starts(
    tmp_path: Path, holders: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ChildScratch, made once per worker process, sweeps first; its own room is then made
    beside the live ones."""
    dead = hold_room(tmp_path, holders)
    holders[0].kill()
    holders[0].wait()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # TMPDIR is read again
    monkeypatch.setattr(ChildScratch, "_swept", False)
    scratch = ChildScratch(0, 0)
    assert not dead.exists()
    job = scratch.make()
    assert Path(job.name).parent == scratch.room() and scratch.room().parent == tmp_path
    assert Path(job.name).stat().st_mode & 0o777 == 0o700
    job.cleanup()
