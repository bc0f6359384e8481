"""Ports on this host: whether one is free, which process listens on it, and the one error a
server or `docparse up` gives when the port it was told to use is taken.

docparse servers bind exclusively (gRPC's `grpc.so_reuseport` off, the HTTP and metrics sides
never set SO_REUSEPORT): a second process on a taken port fails at once instead of sharing
it with the first, which would split calls between two unrelated deployments.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable
from pathlib import Path

import grpc

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason

_LISTEN = "0A"  # TCP state LISTEN in /proc/net/tcp


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on `host:port` now (SO_REUSEADDR, as servers bind)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port nothing listens on right now (the kernel's choice)."""
    return free_ports(1)[0]


def free_ports(count: int, exclude: Iterable[int] = ()) -> list[int]:
    """`count` different ports nothing listens on now, none in `exclude`. All are held at once
    while they are chosen: one at a time, the kernel may hand out a port it just gave (a stack
    whose gateway drew its replica's port would refuse to start)."""
    held = HeldPorts(count, exclude)
    held.release()
    return held.ports


class HeldPorts:
    """`count` free ports (none in `exclude`) that stay reserved for our own servers until
    `release()`: each is kept bound by a socket here, with SO_REUSEADDR and never listening.

    Between drawing a port and a server listening on it, any other process asking the kernel
    for a port (bind to port 0, an outgoing connection) could be handed the same one: on a busy
    host, or with tests in parallel, a stack then fails to start with PORT_IN_USE. The kernel
    hands out no port that a socket is bound to, while our servers can still listen on it:
    Linux lets sockets that all set SO_REUSEADDR share a port as long as at most one listens,
    and every docparse server, grpc and redis-server set it. `hold()` binds the released ports
    again (best effort) for a restart."""

    def __init__(self, count: int, exclude: Iterable[int] = ()) -> None:
        self.ports: list[int] = []
        self._held: list[socket.socket] = []
        avoid, draws = set(exclude), list[socket.socket]()
        try:
            while len(self.ports) < count:
                sock = _reusable()
                draws.append(sock)  # an excluded draw stays bound too: the next one differs
                sock.bind(("127.0.0.1", 0))
                if (port := sock.getsockname()[1]) not in avoid:
                    self.ports.append(port)
                    self._held.append(sock)
        finally:
            for sock in draws:
                if sock not in self._held:
                    sock.close()

    def hold(self) -> None:
        if self._held:
            return
        for port in self.ports:
            sock = _reusable()
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # taken meanwhile: the server's own check will say by whom
                sock.close()
                continue
            self._held.append(sock)

    def release(self) -> None:
        for sock in self._held:
            sock.close()
        self._held = []


def _reusable() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def listening_sockets(port: int) -> set[str]:
    """Inodes of the TCP sockets listening on `port` (any address), from /proc."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                listening = len(fields) > 9 and fields[3] == _LISTEN
                if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


def port_holder(port: int) -> str:
    """`pid N (command line)` of a process listening on `port`, "" when it cannot be told (no
    /proc, or the process belongs to another user)."""
    inodes = {f"socket:[{inode}]" for inode in listening_sockets(port)}
    if not inodes:
        return ""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
        except OSError:
            continue
        if links & inodes:
            return f"pid {proc.name} ({process_command(int(proc.name))})"
    return ""


def process_command(pid: int) -> str:
    """The command line of `pid`, shortened; "" when it is gone or not readable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    words = [word.decode(errors="replace") for word in raw.split(b"\0") if word]
    text = " ".join(Path(words[0]).name if i == 0 else w for i, w in enumerate(words))
    return text if len(text) <= 120 else text[:117] + "..."


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (host may be `[v6]` or empty) as (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def port_in_use(address: str, what: str = "") -> DocparseError:
    """FAILED_PRECONDITION PORT_IN_USE naming the address and, when it can be found, the
    process that holds it (metadata `address`, `port`, `holder`)."""
    _host, port = split_address(address)
    holder = port_holder(port)
    by = f" by {holder}" if holder else ""
    return DocparseError(
        grpc.StatusCode.FAILED_PRECONDITION,
        ErrorReason.PORT_IN_USE,
        f"{what + ': ' if what else ''}cannot listen on {address}: the port is in use{by}",
        {"address": address, "port": str(port), "holder": holder},
    )
