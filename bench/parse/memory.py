"""Memory: the parse child's peak on the 1,000,000-cell workbook, each replica at idle
(parser_svc and its fork server) and every running parse child, sampled from /proc."""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.harness.output import ROOT
from bench.harness.procfs import children, rss_kb
from docparse.local.stack import LocalStack


def peak_memory_mb(xlsx: Path) -> tuple[float, float, str]:
    """Peak RSS (MB) and seconds of the parse child on the 1M-cell workbook."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "parser_svc.child.parse_child", "xlsx", str(xlsx),
             str(Path(tmp) / "out.pb"), "300", "2048"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        out, _ = proc.communicate(b"{}")
        seconds = time.perf_counter() - started
    # The largest child this process has waited for: it has had no other child yet.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    last = out.decode().strip().splitlines()[-1]
    return usage.ru_maxrss / 1024, seconds, last


def replica_memory(stack: LocalStack) -> list[dict[str, int]]:
    out = []
    for child in stack.parsers:
        rss, _ = rss_kb(child.pid)
        zygotes = [p for p, cmd in children(child.pid).items() if b"parser_svc.child.zygote" in cmd]
        zygote_rss = rss_kb(zygotes[0])[0] if zygotes else 0
        out.append({"parser_svc_kb": rss, "fork_server_kb": zygote_rss})
    return out


class ChildSampler:
    """Samples every parse child of the given replicas every few ms: peak RSS and private."""

    def __init__(self, parents: list[int]) -> None:
        self.parents = parents
        self.peaks: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for parent in self.parents:
                for pid, cmd in children(parent).items():
                    if b"parser_svc.child.parse_child" in cmd:
                        rss, private = rss_kb(pid)
                        old = self.peaks.get(pid, (0, 0))
                        self.peaks[pid] = (max(old[0], rss), max(old[1], private))
            self._stop.wait(0.003)

    def stop(self) -> tuple[float, float, int]:
        """Median peak RSS and private MB per child, and how many children were seen."""
        self._stop.set()
        self._thread.join()
        peaks = [p for p in self.peaks.values() if p[0]]
        if not peaks:
            return 0.0, 0.0, 0
        rss = statistics.median(p[0] for p in peaks) / 1024
        private = statistics.median(p[1] for p in peaks) / 1024
        return rss, private, len(peaks)
