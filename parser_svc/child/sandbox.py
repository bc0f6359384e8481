"""Runs one parse in a child process with CPU, memory and wall-clock limits.

The child is a process of its own per job, so a crash, a runaway document or a leak kills only
the child; the worker and its event loop carry on. It is forked from the worker's fork server
(parser_svc.child.zygote: pre-imported, a few ms per child) or, with `fork_server=None` or where
forking is not possible, a fresh interpreter (`python -m parser_svc.child.parse_child`, ~0.3 s of
CPU per child). Either way it runs parse_child.main with the same limits and protocol.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from docparse.reasons import ErrorReason
from parser_svc.child.fork_server import EVENT_LINE_LIMIT, ForkServer
from parser_svc.child.no_network import child_environment
from parser_svc.parsers import ParseOptions

ProgressCallback = Callable[[int, int, str], Awaitable[None]]
# A draft page part the child sent: its page number and bytes (None: the child wrote them to
# its scratch directory, in the file child/draft_pages.draft_path names). PageCallback is told
# those of each event line, in order.
Draft = tuple[int, bytes | None]
PageCallback = Callable[[list[Draft]], Awaitable[None]]


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    cpu_s: int
    memory_mb: int


@dataclass(frozen=True)
class Outcome:
    """`reason` is empty on success; then `pages` and `chars` describe the package."""

    reason: str = ""
    message: str = ""
    pages: int = 0
    chars: int = 0
    # Processes that read the document's pages (parsers/pdf_split.py): 1 but for long PDFs.
    processes: int = 1
    # The package's page numbers as a page selection ("1-5,10"; "" for sheets or slides only).
    held_pages: str = ""
    # How its child started: "spare" (readied while the worker was idle), "forked" (by the fork
    # server when the job came) or "spawned" (a fresh interpreter).
    start: str = ""


class ParseProcess(Protocol):
    """A running parse child: its event lines, its input (sent once, then closed), its end."""

    stdout: asyncio.StreamReader

    @property
    def returncode(self) -> int | None: ...

    async def send(self, data: bytes) -> None: ...
    async def wait(self) -> int: ...
    def kill(self) -> None: ...


class SpawnedChild:
    """A fresh interpreter running `python -m parser_svc.child.parse_child ARGV`."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        self._proc = proc
        self.stdout = proc.stdout

    @classmethod
    async def start(cls, argv: list[str], cwd: Path | None = None) -> SpawnedChild:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "parser_svc.child.parse_child", *argv,
            env=child_environment(),
            cwd=cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=EVENT_LINE_LIMIT,
        )  # fmt: skip
        return cls(proc)

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def send(self, data: bytes) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(data)
            await stdin.drain()
        stdin.close()

    async def wait(self) -> int:
        return await self._proc.wait()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()


async def run_parse(
    content_type: str,
    input_path: Path,
    output_path: Path,
    limits: Limits,
    on_progress: ProgressCallback,
    options: ParseOptions | None = None,
    fork_server: ForkServer | None = None,
    on_done: Callable[[], Awaitable[None]] | None = None,
    on_page: PageCallback | None = None,
) -> Outcome:
    """`options` (the password among them; None: Settings' defaults) reach the child as JSON on
    its stdin: never on its command line, in its environment or on disk. Its command line holds
    the CPU and memory limits, which the child sets on itself before it reads the document.
    `on_done` is awaited when the child says it is done, while it exits: what it wrote may be
    read then, but the parse succeeded only if the Outcome says so (exit status 0).
    The child starts in the output's directory (its scratch directory) and is told the output
    by its name alone: no other process learns where a child writes (child/privileges.py)."""
    process_limits = [str(limits.cpu_s), str(limits.memory_mb)]
    argv = [content_type, str(input_path), output_path.name, *process_limits]
    scratch = output_path.parent
    stdin = (options.to_json() if options is not None else "{}").encode()
    forked = await fork_server.launch(argv, scratch, stdin) if fork_server is not None else None
    proc: ParseProcess = forked or await SpawnedChild.start(argv, scratch)
    start = "spawned" if forked is None else "spare" if forked.spare else "forked"
    await proc.send(stdin)  # a forked child has it already
    events = _Events(on_progress, on_page, on_done)

    try:
        async with asyncio.timeout(limits.timeout_s):
            await events.read(proc)
    except TimeoutError:
        return Outcome(
            ErrorReason.PARSE_TIMEOUT,
            f"the parse took longer than {limits.timeout_s:g} s",
            start=start,
        )
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    return dataclasses.replace(_outcome(proc.returncode, events.final), start=start)


class _Events:
    """A child's event lines, each handed to its callback; the last word (done, failed,
    memory_high) kept in `final`."""

    def __init__(
        self,
        on_progress: ProgressCallback,
        on_page: PageCallback | None,
        on_done: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self.on_progress, self.on_page, self.on_done = on_progress, on_page, on_done
        self.final: dict[str, object] = {}

    async def read(self, proc: ParseProcess) -> None:
        """Until the child closes its end (then until it exits)."""
        while True:
            try:
                line = await proc.stdout.readline()
            except ValueError:  # a line over EVENT_LINE_LIMIT: no child of ours writes one
                self.final = {
                    "event": "failed",
                    "reason": ErrorReason.PARSER_CRASHED,
                    "message": f"the parser wrote an event line over {EVENT_LINE_LIMIT} bytes",
                }
                proc.kill()
                break
            if not line:
                break
            await self._take(line)
        await proc.wait()

    async def _take(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            return
        if event.get("event") == "progress":
            await self.on_progress(int(event["done"]), int(event["total"]), str(event["stage"]))
        elif event.get("event") == "pages":  # draft parts (child/draft_pages.py)
            if self.on_page is not None:
                await self.on_page(_drafts(event.get("parts")))
        else:
            self.final.update(event)
            if event.get("event") == "done" and self.on_done is not None:
                await self.on_done()


def _drafts(parts: object) -> list[Draft]:
    """The drafts of a "pages" event: [number, base64 or null] each. A malformed event (no
    child of ours writes one) gives none: drafts are never a condition of the job."""
    if not isinstance(parts, list):
        return []
    try:
        return [
            (int(number), base64.b64decode(part) if isinstance(part, str) else None)
            for number, part in parts
        ]
    except (TypeError, ValueError):
        return []


def _outcome(returncode: int | None, final: dict[str, object]) -> Outcome:
    if final.get("event") == "done" and returncode == 0:
        return Outcome(
            pages=int(str(final["pages"])),
            chars=int(str(final["chars"])),
            processes=int(str(final.get("processes", 1))),
            held_pages=str(final.get("held", "")),
        )
    if final.get("event") == "failed":
        return Outcome(str(final["reason"]), str(final["message"]))
    if final.get("event") == "memory_high" and returncode != 0:
        # The child said it was close to its memory limit, then died without a word: C code
        # (mupdf, upb, lxml, OpenBLAS) that met a failed allocation crashes instead of raising.
        return Outcome(
            ErrorReason.DOCUMENT_TOO_LARGE,
            f"the parse ran out of memory (it reached {final.get('vm_mb')} MB of its "
            f"{final.get('limit_mb')} MB limit, then died: {_death(returncode)})",
        )
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode).name
        if -returncode in (signal.SIGXCPU, signal.SIGKILL):
            return Outcome(
                ErrorReason.PARSE_TIMEOUT
                if -returncode == signal.SIGXCPU
                else ErrorReason.PARSER_CRASHED,
                f"the parser was killed by {sig}",
            )
        return Outcome(ErrorReason.PARSER_CRASHED, f"the parser died of {sig}")
    return Outcome(ErrorReason.PARSER_CRASHED, f"the parser exited with status {returncode}")


def _death(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return signal.Signals(-returncode).name
    return f"exit status {returncode}"
