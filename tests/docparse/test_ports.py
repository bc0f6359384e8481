"""Ports a local stack draws stay its own until it stops (docparse.ports.HeldPorts): no other
process is handed one between the draw and the server listening on it, which is what made a
stack fail to start with PORT_IN_USE on a busy host or with tests in parallel."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import grpc
import pytest

from docparse.local.embedded_redis import EmbeddedRedis
from docparse.ports import HeldPorts


def _bind_as_another_process(port: int) -> int:
    """0 when a plain bind (what a process asking the kernel for a port competes with) works,
    else its errno."""
    with socket.socket() as other:
        try:
            other.bind(("127.0.0.1", port))
        except OSError as err:
            return err.errno or -1
    return 0


def test_held_ports_are_refused_to_others_and_free_after_release() -> None:
    held = HeldPorts(3)
    assert len(set(held.ports)) == 3
    assert [_bind_as_another_process(p) for p in held.ports] == [errno.EADDRINUSE] * 3
    held.release()
    assert [_bind_as_another_process(p) for p in held.ports] == [0] * 3


async def test_our_servers_listen_on_a_held_port_and_only_one_of_them() -> None:
    held = HeldPorts(1)
    address = f"127.0.0.1:{held.ports[0]}"
    first = grpc.aio.server(options=[("grpc.so_reuseport", 0)])  # as docparse's servers bind
    assert first.add_insecure_port(address) == held.ports[0]
    await first.start()
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            await channel.channel_ready()
        second = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        with pytest.raises(RuntimeError):  # grpc: "Failed to bind"
            second.add_insecure_port(address)
    finally:
        await first.stop(None)
        held.release()


@pytest.mark.stack  # starts an EmbeddedRedis
def test_an_embedded_redis_holds_the_port_it_drew_until_it_stops(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis")
    # Drawn, not yet listening: nobody else gets it (the window the hold closes).
    assert _bind_as_another_process(server.port) == errno.EADDRINUSE
    server.start()
    server.stop()
    assert _bind_as_another_process(server.port) == 0
    server.start()  # a restart: the same port, held again, and redis listens on it
    try:
        assert server.url.endswith(f":{server.port}/0")
    finally:
        server.stop()
