"""What the CLI draws on a real terminal: `docparse submit DIR --watch` with 40 files in a pty
of 24 rows (more files than rows), read back through a terminal emulator (pyte). The screen
and its scrollback must read as clean lines: each file's end once, the bars gone, one overall
bar, the summary, nothing overwritten or interleaved."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pyte
import pytest

from docparse.client import Client
from docparse.local.stack import LocalStack
from tests.conftest import make_stack
from tests.helpers import make_pdf

ROOT = Path(__file__).resolve().parents[2]
ROWS, COLUMNS, FILES = 24, 120, 40


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("terminal"),
        replicas=2,
        gateways=1,
        extra_env={"DOCPARSE_PARSE_PAGE_DELAY_MS": "30"},
    ) as running:
        yield running


def run_in_pty(args: list[str]) -> tuple[int, bytes]:
    """Runs `args` with a pty of ROWS x COLUMNS as stdin, stdout and stderr; everything it
    wrote, and its exit code."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(ROWS)}
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env)
    os.close(slave)
    output = bytearray()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    return proc.wait(timeout=30), bytes(output)


def test_forty_files_render_cleanly_on_a_small_terminal(stack: LocalStack, tmp_path: Path) -> None:
    folder = tmp_path / "forty"
    folder.mkdir()
    names = [f"doc-{i:02d}.pdf" for i in range(FILES)]
    for index, name in enumerate(names):
        (folder / name).write_bytes(make_pdf(3 + index % 4, f"file {index}"))
    target = stack.gateway_addresses[0]
    code, raw = run_in_pty([sys.executable, "-m", "docparse", "submit", str(folder), "--watch",
                            "--target", target])  # fmt: skip
    screen = pyte.HistoryScreen(COLUMNS, ROWS, history=5000)
    stream = pyte.ByteStream(screen)
    stream.feed(raw)
    scrolled = [
        "".join(line[x].data for x in range(COLUMNS)).rstrip() for line in screen.history.top
    ]
    transcript = scrolled + [line.rstrip() for line in screen.display]
    assert code == 0, "\n".join(transcript)
    print("\n".join(screen.display))

    # Each file left exactly one line as it ended, with its full bar and state, then one
    # summary row; no line holds pieces of two files (what redraws over the wrong rows leave).
    for name in names:
        ended = [line for line in transcript if line.startswith(name) and "[" in line]
        assert len(ended) == 1, (name, ended)
        pages = ended[0].split("]")[1].split()[0]  # "4/4"
        assert pages.split("/")[0] == pages.split("/")[1] != "0", ended
        assert ended[0].endswith("SUCCEEDED"), ended
        summary = [line for line in transcript if line.startswith(name) and "[" not in line]
        assert len(summary) == 1 and " SUCCEEDED " in summary[0], (name, summary)
    for line in transcript:
        assert sum(line.count(name) for name in names) <= 1, line
    # The live bars are gone; the overall bar stays once, complete.
    overall = [line for line in transcript if line.startswith("overall")]
    assert len(overall) == 1 and f"{FILES}/{FILES} files ended" in overall[0], overall
    assert not any("waiting" in line for line in transcript)
    # The summary ends the output: its last row is the last file's.
    assert [line for line in screen.display if line.strip()][-1].startswith(names[-1])


def test_result_prints_markdown_on_a_terminal(stack: LocalStack) -> None:
    with Client(stack.gateway_addresses[0]) as client:
        job = client.parse(make_pdf(2, "shown"), file_name="shown.pdf")
    code, raw = run_in_pty([sys.executable, "-m", "docparse", "result", job.job_id,
                            "--target", stack.gateway_addresses[0]])  # fmt: skip
    text = raw.decode()
    assert code == 0, text
    assert "<!-- page 1 -->" in text and "<!-- page 2 -->" in text  # breaks, not headings
    assert "job state lives in Redis" in text
    assert '"pages"' not in text  # not the JSON a pipe gets
