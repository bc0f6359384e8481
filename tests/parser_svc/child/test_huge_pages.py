"""The fork server's memory as transparent huge pages (parser_svc.child.huge_pages): which ranges
are collapsed, and that a running fork server has them while its children still parse."""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
from pathlib import Path

import pytest

from parser_svc.child.fork_server import ForkServer
from parser_svc.child.huge_pages import MADV_COLLAPSE, anonymous_ranges
from tests.helpers import make_pdf

MB2 = 2 * 1024 * 1024

MAPS = """\
55d0a0000000-55d0a0001000 r--p 00000000 08:01 1234    /usr/bin/python3.11
55d0a0400000-55d0a1000000 rw-p 00000000 00:00 0       [heap]
7f0000100000-7f0000900000 rw-p 00000000 00:00 0
7f0001000000-7f0001100000 rw-p 00000000 00:00 0
7f0002000000-7f0002800000 r--p 00000000 00:00 0
7f0003000000-7f0003800000 rw-s 00000000 00:05 77      /dev/zero (deleted)
7f0004000000-7f0004800000 rw-p 00000000 08:01 99      /usr/lib/libmupdf.so
7ffd00000000-7ffd00800000 rw-p 00000000 00:00 0       [stack]
"""


def test_only_whole_huge_pages_of_private_writable_anonymous_memory() -> None:
    assert anonymous_ranges(MAPS, MB2) == [
        (0x55D0A0400000, 0x55D0A1000000),  # the heap: aligned, 6 huge pages
        (0x7F0000200000, 0x7F0000800000),  # anonymous, rounded inwards to whole huge pages
        # 1 MB of anonymous memory holds no whole huge page; read-only, shared, file-backed
        # and stack mappings are left alone
    ]


def _smaps_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def _kernel_collapses() -> bool:
    """Whether this kernel has MADV_COLLAPSE (Linux 6.1+ with THP): asked on a huge page of
    this process's own. Elsewhere the fork server keeps 4 KB pages, which the setting allows."""
    if not Path("/sys/kernel/mm/transparent_hugepage/enabled").exists():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    # Private anonymous memory, as the fork server's (mmap.mmap(-1, n) alone is shared memory,
    # which collapses only where shmem huge pages are enabled: EINVAL on most systems).
    with mmap.mmap(-1, 2 * MB2, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as area:
        start = ctypes.addressof(ctypes.c_char.from_buffer(area))
        aligned = -(-start // MB2) * MB2
        area.write(b"x" * len(area))
        ok = libc.madvise(aligned, MB2, MADV_COLLAPSE) == 0
        return ok or ctypes.get_errno() != errno.EINVAL


@pytest.mark.skipif(not _kernel_collapses(), reason="this kernel has no MADV_COLLAPSE (Linux 6.1+)")
async def test_a_running_fork_server_holds_huge_pages_and_its_children_parse(
    tmp_path: Path,
) -> None:
    source, output = tmp_path / "one.pdf", tmp_path / "one.pb"
    source.write_bytes(make_pdf(1, "huge"))
    server = ForkServer(huge_pages=True)
    server.start()
    try:
        # The first launch waits for the fork server's imports, warm-up and collapse.
        child = await server.launch(["pdf", str(source), str(output), "60", "2048"])
        assert child is not None and server.pid is not None
        await child.send(b"{}")
        events = [json.loads(line) async for line in child.stdout]
        assert await child.wait() == 0 and events[-1]["event"] == "done", events
        assert _smaps_kb(server.pid, "AnonHugePages") >= 16 * 1024
    finally:
        server.close()
