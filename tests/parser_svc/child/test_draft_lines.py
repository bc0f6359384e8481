"""The lines a parse child announces its draft pages in (child/draft_pages.py): page 1 alone and
at once, later drafts gathered into lines the worker reads whole, nothing lost or repeated."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import threading
from pathlib import Path

import pytest

from parser_svc.child import draft_pages, sandbox
from parser_svc.child.draft_pages import (
    GATHER_PAGES,
    INLINE_MAX_BYTES,
    LINE_BUDGET,
    _Announcer,
    draft_path,
)
from parser_svc.child.fork_server import EVENT_LINE_LIMIT
from parser_svc.child.sandbox import Limits, SpawnedChild, run_parse
from tests.helpers import eventually


class Lines:
    """What `emit` wrote, as the child writes it (parse_child._emit: JSON, one line each)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def emit(self, **event: object) -> None:
        with self.lock:
            self.lines.append(json.dumps(event))

    def parts(self) -> list[list[list[object]]]:
        with self.lock:
            return [json.loads(line)["parts"] for line in self.lines]


def _numbers(lines: Lines) -> list[list[int]]:
    return [[int(str(number)) for number, _ in parts] for parts in lines.parts()]


def test_page_one_goes_alone_and_later_drafts_gather_until_their_window_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No page follows the third: the drafts' own thread announces 2 and 3 when their window
    ends, without waiting for the parse to close the announcer. (The window is widened to
    0.5 s: on a loaded box 3 may come more than the 4 ms after 2.)"""
    monkeypatch.setattr(draft_pages, "GATHER_S", 0.5)
    lines = Lines()
    announcer = _Announcer(tmp_path, lines.emit)
    try:
        for number in (1, 2, 3):
            announcer.send(number, f"page {number}".encode())
        assert _numbers(lines)[0] == [1]
        eventually(lambda: len(lines.lines) == 2, 5, "the gathered drafts' line")
        assert _numbers(lines) == [[1], [2, 3]]
        parts = lines.parts()[1]
        assert [base64.b64decode(str(part)) for _, part in parts] == [b"page 2", b"page 3"]
    finally:
        announcer.close()
    assert len(lines.lines) == 2


def test_lines_hold_at_most_gather_pages_and_close_sends_the_rest(tmp_path: Path) -> None:
    lines = Lines()
    announcer = _Announcer(tmp_path, lines.emit)
    total = 1 + 2 * GATHER_PAGES + 3
    for number in range(1, total + 1):
        announcer.send(number, f"page {number}".encode())
    announcer.close()
    numbers = _numbers(lines)
    assert [n for line in numbers for n in line] == list(range(1, total + 1))
    assert max(len(line) for line in numbers) <= GATHER_PAGES


def test_the_same_part_is_not_announced_twice_and_a_changed_one_is(tmp_path: Path) -> None:
    lines = Lines()
    announcer = _Announcer(tmp_path, lines.emit)
    announcer.send(1, b"first")
    announcer.send(1, b"first")
    announcer.send(1, b"second")
    announcer.close()
    sent = [(n, base64.b64decode(str(p))) for parts in lines.parts() for n, p in parts]
    assert sent == [(1, b"first"), (1, b"second")]


def test_big_parts_go_to_files_and_every_line_fits_what_the_worker_reads(
    tmp_path: Path,
) -> None:
    """Parts at the inline limit fill lines to LINE_BUDGET, a part over it is written to its
    file first and announced without bytes, and the worker's reader (a StreamReader with
    EVENT_LINE_LIMIT, as run_parse has) reads each line whole."""
    lines = Lines()
    announcer = _Announcer(tmp_path, lines.emit)
    inline = [bytes([n]) * INLINE_MAX_BYTES for n in range(1, 40)]
    big = b"x" * (INLINE_MAX_BYTES + 1)
    for number, data in enumerate([*inline, big], start=1):
        announcer.send(number, data)
    announcer.close()
    assert all(len(line) <= LINE_BUDGET + 4096 for line in lines.lines)
    last = lines.parts()[-1][-1]
    assert last == [40, None] and draft_path(tmp_path, 40).read_bytes() == big

    async def read_back() -> list[bytes]:
        reader = asyncio.StreamReader(limit=EVENT_LINE_LIMIT)
        reader.feed_data("".join(line + "\n" for line in lines.lines).encode())
        reader.feed_eof()
        return [line async for line in reader]

    got = asyncio.run(read_back())
    decoded = [base64.b64decode(p) for line in got for _, p in json.loads(line)["parts"] if p]
    assert decoded == inline


def test_writing_drafts_sends_what_is_gathered_when_the_parse_ends(tmp_path: Path) -> None:
    """The hook's drafts gathered when the block ends are announced then, and the hook and
    the relay are unset."""
    lines = Lines()
    with draft_pages.writing_drafts(tmp_path, lines.emit):
        assert draft_pages.relay is not None
        for number in (1, 2, 3):
            draft_pages.relay(number, b"part")
    assert draft_pages.relay is None
    assert [n for line in _numbers(lines) for n in line] == [1, 2, 3]


def _spawning(script: Path) -> object:
    """SpawnedChild.start running `script` instead of the parse child, as the worker reads one."""

    async def start(cls: type[SpawnedChild], argv: list[str], cwd: Path | None = None) -> object:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), cwd=cwd, limit=EVENT_LINE_LIMIT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(proc)

    return classmethod(start)


DONE = '{"event": "done", "pages": 3, "chars": 9, "processes": 1, "held": "1-3"}'


@pytest.mark.parametrize(
    ("lines", "reason", "drafts"),
    [
        # drafts of a malformed line are dropped; the job is the child's to end
        (['{"event": "pages", "parts": [["x", 1]]}', '{"event": "pages", "parts": 3}',
          '{"event": "pages", "parts": [[2, "cGFnZQ=="], [3, null]]}', DONE],
         "", [(2, b"page"), (3, None)]),
        # a line longer than the worker reads ends the parse PARSER_CRASHED
        (['{"event": "pages", "parts": [[1, "' + "A" * EVENT_LINE_LIMIT + '"]]}', DONE],
         "PARSER_CRASHED", []),
    ],
)  # fmt: skip
async def test_the_worker_reads_draft_lines_and_survives_bad_ones(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    lines: list[str],
    reason: str,
    drafts: list[tuple[int, bytes | None]],
) -> None:
    (tmp_path / "lines.txt").write_text("".join(line + "\n" for line in lines))
    script = tmp_path / "child.py"
    script.write_text(
        "import sys\nsys.stdin.read()\n"
        f"sys.stdout.write(open({str(tmp_path / 'lines.txt')!r}).read())\n"
    )
    monkeypatch.setattr(sandbox.SpawnedChild, "start", _spawning(script))
    got: list[tuple[int, bytes | None]] = []

    async def on_page(batch: list[tuple[int, bytes | None]]) -> None:
        got.extend(batch)

    async def quiet(*_: object) -> None:
        return None

    outcome = await run_parse(
        "pdf", tmp_path / "in.pdf", tmp_path / "package.pb", Limits(30, 30, 512), quiet,
        on_page=on_page,
    )  # fmt: skip
    assert outcome.reason == reason, outcome.message
    if reason:
        assert str(EVENT_LINE_LIMIT) in outcome.message
    assert got == drafts
