"""A bare fork + exit of a process as large as the fork server, run as
`python -m bench.parse.fork_cost`, once with GLIBC_TUNABLES=HUGE_MALLOC (glibc 2.35+: malloc
marks its memory for transparent huge pages) and once without: this process imports and warms
up what the fork server does, then forks children that only exit. The cost grows with the page
table entries of its anonymous memory (copied at fork, torn down at exit). Prints one JSON
object: anonymous and huge-page MB, and the median ms of a fork + exit over 5 runs of 20.

The fork server does not start with HUGE_MALLOC (bench/README.md): its children inherit
malloc's huge-page alignment, which moves where their address-space limit bites."""

from __future__ import annotations

import importlib
import json
import os
import statistics
import time
from pathlib import Path

from parser_svc.child.zygote import MODULES
from parser_svc.child.zygote import warm_up as zygote_warm_up

HUGE_MALLOC = "glibc.malloc.hugetlb=1"


def main() -> None:
    for module in MODULES:
        importlib.import_module(module)
    zygote_warm_up()
    rollup = Path("/proc/self/smaps_rollup").read_text().splitlines()
    fields = {line.split(":")[0]: int(line.split()[1]) for line in rollup[1:] if ":" in line}
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(20):
            pid = os.fork()  # the child only calls _exit: safe whatever threads this process has
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        runs.append((time.perf_counter() - started) / 20 * 1000)
    print(
        json.dumps(
            {
                "anon_mb": round(fields.get("Anonymous", 0) / 1024, 1),
                "huge_mb": round(fields.get("AnonHugePages", 0) / 1024, 1),
                "fork_exit_ms": round(statistics.median(runs), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
