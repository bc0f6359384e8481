"""How many CPUs this process may use: the least of its CPU affinity and its cgroup's CPU
quota (rounded up), never the host's core count. A pod limited to 2 CPUs on a 64-core node
gets 2; `taskset -c 0` gets 1."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _own_cgroup_dirs(root: Path) -> list[Path]:
    """The cgroup v2 directory of this process and its ancestors (a quota may be set on any
    of them), from /proc/self/cgroup ("0::/kubepods/pod.../..."); inside a container the
    namespace root is the mounted root."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return [root]
    rel = next((line[3:] for line in lines if line.startswith("0::")), "/").strip("/")
    dirs = [root]
    here = root
    for part in [p for p in rel.split("/") if p]:
        here = here / part
        dirs.append(here)
    return [d for d in dirs if d.is_dir()]


def _quota_v2(root: Path) -> float | None:
    best: float | None = None
    for directory in _own_cgroup_dirs(root):
        try:
            quota, period = (directory / "cpu.max").read_text().split()[:2]
        except (OSError, ValueError):
            continue
        if quota != "max" and int(period) > 0:
            cpus = int(quota) / int(period)
            best = cpus if best is None else min(best, cpus)
    return best


def _quota_v1(root: Path) -> float | None:
    rel = ""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _id, controllers, path = line.split(":", 2)
            if "cpu" in controllers.split(","):
                rel = path.strip("/")
    except (OSError, ValueError):
        pass
    best: float | None = None
    for directory in {root / "cpu" / rel, root / "cpu"}:
        try:
            quota = int((directory / "cpu.cfs_quota_us").read_text())
            period = int((directory / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        if quota > 0 and period > 0:
            best = quota / period if best is None else min(best, quota / period)
    return best


def cgroup_quota(root: Path = CGROUP) -> float | None:
    """CPUs' worth of time per period the cgroup allows (None: no quota)."""
    v2 = _quota_v2(root) if (root / "cgroup.controllers").exists() else None
    return v2 if v2 is not None else _quota_v1(root)


def usable_cpus(root: Path = CGROUP) -> int:
    cpus = _affinity()
    quota = cgroup_quota(root)
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus)
