"""A parse child whose worker stopped listening (the job was cancelled or timed out, or the
worker is stopping: it closed the child's stdout) leaves at once and quietly: exit status 141,
no traceback in the worker's log, and no parse for nobody (no output written). Both ways a
child starts: spawned fresh, and forked from the fork server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from parser_svc.child.parse_child import WORKER_GONE_EXIT
from tests.helpers import make_pdf

ROOT = Path(__file__).resolve().parents[3]


def _argv(tmp_path: Path) -> list[str]:
    source = tmp_path / "doc.pdf"
    source.write_bytes(make_pdf(3, "nobody reads this"))
    return ["pdf", str(source), str(tmp_path / "out.pb"), "60", "2048"]


def test_a_spawned_child_exits_quietly_when_its_stdout_is_closed(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "parser_svc.child.parse_child", *_argv(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the worker stops listening before the child has said anything
    proc.stdin.write(b"{}")
    proc.stdin.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == WORKER_GONE_EXIT, stderr
    assert "Traceback" not in stderr, stderr
    assert not (tmp_path / "out.pb").exists()


async def test_a_forked_child_exits_quietly_when_its_stdout_is_closed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from parser_svc.child.fork_server import ForkServer

    server = ForkServer()
    server.start()
    try:
        child = await server.launch(_argv(tmp_path))
        assert child is not None
        await child.send(b"{}")
        child._writer.close()  # the worker's end of the child's stdin and stdout
        assert await child.wait() == WORKER_GONE_EXIT
    finally:
        server.close()
    # The forked child writes to the fork server's stderr, which is this process's.
    assert "Traceback" not in capfd.readouterr().err
    assert not (tmp_path / "out.pb").exists()
