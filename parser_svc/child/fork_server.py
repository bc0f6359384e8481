"""The worker's side of the fork server (parser_svc.child.zygote, whose docstring holds the
protocol): `ForkServer` starts the zygote process on first use, asks it for one parse child
per job and restarts it when it is found dead; `ForkedChild` is such a child, with the same
surface as a spawned one (parser_svc.child.sandbox).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from parser_svc.child.no_network import child_environment

log = logging.getLogger(__name__)


# clone(2)'s number per architecture; elsewhere the worker spawns a fresh child per job.
SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine, 0)


# The child rewrites its command line (in place, in the memory the kernel shows as
# /proc/PID/cmdline) to what a spawned child's would be, so `ps` names each job's document.
# The zygote is started with this much blank room for it.
ARGV_ROOM = " " * 1024


REPLY_TIMEOUT_S = 30.0


# The longest event line the worker reads from a child (a forked or a spawned one): drafts
# come in lines of up to child/draft_pages.LINE_BUDGET bytes of base64.
EVENT_LINE_LIMIT = 1024 * 1024


class ForkedChild:
    """A parse child forked by the zygote: the worker's own child, with the same surface as
    the spawned one (`stdout`, `send`, `wait`, `kill`, `returncode`)."""

    def __init__(
        self,
        pid: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        sent: bool = False,
        spare: bool = False,
    ) -> None:
        self.pid = pid
        self.spare = spare  # the zygote's spare took the job (forked before the job came)
        self.stdout = reader
        self._writer = writer
        self._sent = sent  # its stdin went with the request (ForkServer.launch)
        self.returncode: int | None = None
        # A pidfd names this very process even after it exits (it is not reaped until
        # waitpid below, so its pid cannot be reused meanwhile either).
        self._pidfd = os.pidfd_open(pid)

    async def send(self, data: bytes) -> None:
        if self._sent:
            return
        self._sent = True
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._writer.write(data)
            await self._writer.drain()
            self._writer.write_eof()

    async def wait(self) -> int:
        if self.returncode is not None:
            return self.returncode
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()

        def ready() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(self._pidfd, ready)
        try:
            await exited
        finally:
            loop.remove_reader(self._pidfd)
        # It has exited (the pidfd said so): WNOHANG, and the status is there.
        _, status = os.waitpid(self.pid, os.WNOHANG)  # noqa: ASYNC222
        self.returncode = os.waitstatus_to_exitcode(status)
        os.close(self._pidfd)
        self._writer.close()
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)


class ForkServer:
    """The worker's handle on its zygote: started on first use (or by `start`), restarted when
    it is found dead. `launch` returns None when forking is not possible here (another
    architecture, clone refused): the caller then spawns a fresh child."""

    def __init__(self, huge_pages: bool = True, ocr_preload: str = "all") -> None:
        self._huge_pages = huge_pages  # parser_svc.child.huge_pages
        self._ocr_preload = ocr_preload  # the OCR models it loads (parsers/ocr.preload_scripts)
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._lock = asyncio.Lock()
        # The next job's child, forked ahead when asked (`ready_spare`, zygote.py), is a child
        # of this process: the one waiting now, and those that ended unused, to reap.
        self._spare = 0
        self._retired: list[int] = []
        self.unavailable = "" if SYS_CLONE else f"no clone(2) number for {os.uname().machine}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def spare(self) -> int:
        """The pid of the child forked for the next job, waiting (0: none known yet)."""
        return self._spare

    def start(self) -> None:
        """fork + exec of a fresh interpreter (subprocess's safe path from a threaded process);
        it imports the parsers in the background while the worker goes on."""
        self._reap()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "parser_svc.child.zygote", str(theirs.fileno()),
                 str(os.getpid()), "huge" if self._huge_pages else "small", self._ocr_preload,
                 ARGV_ROOM],
                pass_fds=[theirs.fileno()],
                env=child_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
        ours.setblocking(False)
        self._control = ours

    async def launch(
        self, argv: list[str], cwd: Path | None = None, stdin: bytes | None = None
    ) -> ForkedChild | None:
        """A forked child running parse_child with `argv` in `cwd` (None: the fork server's),
        or None: spawn one instead. `stdin`, the child's whole input, goes with the request:
        the child reads it without waiting for the fork server's answer to reach this loop."""
        if self.unavailable:
            return None
        async with self._lock:
            for _attempt in (1, 2):
                if self._control is None:
                    self.start()
                try:
                    return await self._fork(argv, cwd, stdin)
                except (OSError, TimeoutError, ValueError) as err:
                    log.warning("the parse fork server failed (%s); starting a new one", err)
                    self._stop_zygote()
        # Twice in a row: this job's child is spawned (the next job tries a fork server again),
        # so a broken fork server never costs a job an attempt.
        log.error("the parse fork server failed twice in a row; spawning this parse instead")
        return None

    async def _fork(
        self, argv: list[str], cwd: Path | None, stdin: bytes | None
    ) -> ForkedChild | None:
        assert self._control is not None
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            ours.setblocking(False)
            with theirs:
                fields = {"argv": argv, "parent": os.getpid(), "cwd": cwd and str(cwd)}
                socket.send_fds(self._control, [json.dumps(fields).encode()], [theirs.fileno()])
            if stdin is not None:
                await loop.sock_sendall(ours, stdin)
                ours.shutdown(socket.SHUT_WR)
            reply = await self._reply()
            if "error" in reply:
                self.unavailable = str(reply["error"])
                log.warning("parse children are spawned, not forked: %s", self.unavailable)
                ours.close()
                return None
            spare = self._spare_taken(int(reply["pid"]))
            reader, writer = await asyncio.open_unix_connection(sock=ours, limit=EVENT_LINE_LIMIT)
        except BaseException as err:
            ours.close()
            if not isinstance(err, (OSError, TimeoutError, ValueError)):
                # Cancelled while the fork server was answering: its reply would be read as the
                # next request's. That fork server is done; the next launch starts a new one.
                self._stop_zygote()
            raise
        return ForkedChild(int(reply["pid"]), reader, writer, stdin is not None, spare)

    async def _reply(self) -> dict[str, Any]:
        assert self._control is not None
        async with asyncio.timeout(REPLY_TIMEOUT_S):
            reply_bytes = await asyncio.get_running_loop().sock_recv(self._control, 65536)
        if not reply_bytes:
            raise ConnectionResetError("the fork server exited")
        reply: dict[str, Any] = json.loads(reply_bytes)
        return reply

    def _spare_taken(self, pid: int) -> bool:
        """The zygote answered a launch with `pid`: the spare, if one waited and lived (True)."""
        taken = self._spare == pid  # pids are never 0
        if self._spare and not taken:
            self._retired.append(self._spare)  # it had died: the zygote forked instead
        self._spare = 0
        self._reap_retired(0.0)
        return taken

    async def ready_spare(self) -> None:
        """Has the zygote fork the next job's child now, unless one waits: it copies what a
        parse writes of the fork server's memory while nobody waits for it (zygote.py). The
        worker asks when its parses have ended; a failure only costs the next job that."""
        if self.unavailable or self._spare or self._control is None:
            return
        async with self._lock:
            if self._spare or self._control is None:
                return
            try:
                self._control.send(json.dumps({"ready": True}).encode())
                self._spare = int((await self._reply()).get("spare") or 0)
            except (OSError, TimeoutError, ValueError) as err:
                log.warning("the parse fork server failed (%s); starting a new one", err)
                self._stop_zygote()
            except BaseException:
                self._stop_zygote()  # cancelled mid-answer: as in _fork
                raise

    def _reap_retired(self, wait_s: float) -> None:
        """Reaps the spares that ended unused; waits up to `wait_s` for those still running
        (they exit once their zygote's socket closes), then kills them."""
        deadline = time.monotonic() + wait_s
        left = []
        for pid in self._retired:
            try:
                while os.waitpid(pid, os.WNOHANG) == (0, 0):
                    if time.monotonic() >= deadline:
                        if wait_s:
                            os.kill(pid, signal.SIGKILL)
                            os.waitpid(pid, 0)
                        else:
                            left.append(pid)
                        break
                    time.sleep(0.005)
            except ChildProcessError:
                pass  # reaped already
        self._retired = left

    def _stop_zygote(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        self._reap()
        # On the event loop: no wait for the spare (it exits as it sees its zygote's socket
        # close); the next launch or close() reaps it.
        self._retire_spare(0.0)

    def _retire_spare(self, wait_s: float) -> None:
        """After the zygote exited: its spare exits too, and is reaped here (within `wait_s`,
        else later)."""
        if self._spare:
            self._retired.append(self._spare)
            self._spare = 0
        self._reap_retired(wait_s)

    def _reap(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            self._proc = None

    def close(self) -> None:
        """The zygote exits when its control socket closes (and is killed if it does not)."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._reap()
        self._retire_spare(2.0)
