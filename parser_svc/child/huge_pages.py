"""The fork server's memory as transparent huge pages, so a fork and an exit cost little.

Each parse child is forked from the fork server (parser_svc.child.zygote): the fork copies the page
tables of its anonymous memory (about 100 MB: pymupdf, the parsers, tesseract's models) and the
child's exit tears its copy down. With 4 KB pages that is about 25,000 entries each way: 6-14 ms
per job on this project's VMs, more than the parse of a one-page PDF. The same memory as 2 MB
pages is about 50 entries. A child that writes to a shared huge page gets a copy of the 4 KB it
wrote, as before (the kernel splits the child's mapping): a child's private memory does not grow.

MADV_COLLAPSE (Linux 6.1+) turns the pages already there into huge pages now, whatever the
system's THP setting (only a range marked MADV_NOHUGEPAGE refuses). Nothing else is marked:
what children allocate later is paged as the system says. Best effort: an older kernel, or no
free huge page, leaves the memory as it was (slower forks, same results).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

MADV_COLLAPSE = 25
DEFAULT_HUGE_PAGE = 2 * 1024 * 1024


def huge_page_size() -> int:
    try:
        return int(Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").read_text())
    except (OSError, ValueError):
        return DEFAULT_HUGE_PAGE


def anonymous_ranges(maps: str, huge: int) -> list[tuple[int, int]]:
    """The whole huge pages inside this process's private writable anonymous mappings (the
    heap and anonymous mmaps; not the stack, files or special mappings), from /proc/self/maps."""
    ranges = []
    for line in maps.splitlines():
        fields = line.split()
        name = fields[5] if len(fields) > 5 else ""
        if fields[1][:2] != "rw" or fields[1][3] != "p" or name not in ("", "[heap]"):
            continue
        start, end = (int(value, 16) for value in fields[0].split("-"))
        start, end = -(-start // huge) * huge, end // huge * huge
        if end > start:
            ranges.append((start, end))
    return ranges


def collapse() -> int:
    """Makes this process's anonymous memory huge pages where it can: the bytes collapsed."""
    libc = ctypes.CDLL(None, use_errno=True)
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    collapsed = 0
    for start, end in anonymous_ranges(Path("/proc/self/maps").read_text(), huge_page_size()):
        # Fails (EINVAL) on a kernel without MADV_COLLAPSE or THP, or where no huge page is free
        # (EAGAIN, ENOMEM): that range stays as it was.
        if madvise(start, end - start, MADV_COLLAPSE) == 0:
            collapsed += end - start
    return collapsed
