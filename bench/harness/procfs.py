"""CPU time and memory of processes and of the machine, read from /proc (Linux), and what a
page fault costs here."""

from __future__ import annotations

import mmap
import os
import statistics
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def reaped_children_cpu_seconds(pid: int) -> float:
    """User + system CPU time of the children a process has waited for so far (a replica's
    parse children, forked by its fork server but reaped by the worker)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[13]) + int(fields[14])) / CLK_TCK


def cpu_snapshot(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def machine_busy_seconds() -> float:
    """CPU time all CPUs spent busy so far (user, nice, system, irq, softirq, steal)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def rss_kb(pid: int) -> tuple[int, int]:
    """Resident and private (unshared) kB of a process; (0, 0) once it is gone."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0, 0
    fields = {line.split(":")[0]: int(line.split()[1]) for line in rollup[1:] if ":" in line}
    return fields.get("Rss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def children(parent: int) -> dict[int, bytes]:
    """The command lines of a process's children, by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    found[int(entry.name)] = (entry / "cmdline").read_bytes()
            except (OSError, ValueError):
                continue
    return found


def descendants(root: int) -> dict[int, str]:
    """Every process under `root` (children, theirs, ...): their command lines, by pid."""
    parents: dict[int, int] = {}
    lines: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
                lines[int(entry.name)] = (
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                )
            except (OSError, ValueError):
                continue
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = lines.get(pid, "")
                frontier.append(pid)
    return found


def page_fault_us(megabytes: int = 64, rounds: int = 3) -> float:
    """Microseconds a first write to a fresh anonymous 4 KB page costs here (median of
    `rounds`). A fork's copy-on-write, a new process's start and a parse's allocations are
    made of such faults: where they are slow (a virtual machine's memory monitor, a host short
    of memory), one-page jobs slow down with them while a long document's pages do not
    (bench/README.md, "What the box's page faults cost")."""
    page, size, times = mmap.PAGESIZE, megabytes << 20, []
    for _ in range(rounds):
        area = mmap.mmap(-1, size)
        started = time.perf_counter()
        for offset in range(0, size, page):
            area[offset] = 1
        times.append((time.perf_counter() - started) / (size // page) * 1e6)
        area.close()
    return statistics.median(times)
