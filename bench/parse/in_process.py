"""Parsing in this process: raw pymupdf get_text against the reading package (the parse
child's `parse` with its ParseOptions), and one parse launched alone through
parser_svc.child.sandbox.run_parse, forked from a fork server and spawned fresh."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pymupdf

from bench.harness.output import ROOT
from bench.harness.procfs import cpu_seconds
from bench.parse.fork_cost import HUGE_MALLOC
from parser_svc.child.fork_server import ForkServer
from parser_svc.child.parse_child import parse
from parser_svc.child.sandbox import Limits, run_parse
from parser_svc.parsers import ParseOptions, pdf_pass
from tests.helpers import make_pdf


def raw_extraction(paths: list[Path], rounds: int) -> tuple[int, float]:
    pages = 0
    started = time.perf_counter()
    for _ in range(rounds):
        for path in paths:
            with pymupdf.open(path) as doc:  # type: ignore[no-untyped-call]
                for page in doc:
                    page.get_text()
                    pages += 1
    return pages, time.perf_counter() - started


def in_process(
    paths: list[Path], rounds: int, tables: bool, single_pass: bool = True
) -> tuple[int, float]:
    """`single_pass` False: as without parser_svc/parsers/native (each PDF page run twice)."""
    pages = 0
    native = pdf_pass._native
    if not single_pass:
        pdf_pass._native = None
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(rounds):
                for path in paths:
                    options = ParseOptions.defaults(
                        assets_dir=Path(tmp) / "assets", pdf_tables=tables
                    )
                    package = parse("pdf", path.read_bytes(), lambda *_: None, options)
                    package.SerializeToString()
                    pages += len(package.pages)
    finally:
        pdf_pass._native = native
    return pages, time.perf_counter() - started


def launch_costs(work: Path, jobs: int) -> dict[str, float]:
    """One one-page PDF parsed `jobs` times through parser_svc.child.sandbox.run_parse, one at a
    time, forked from a fork server and spawned fresh: wall ms per parse and the children's
    CPU ms per parse (start-up or fork, the parse, exit); plus a bare fork + exit of the
    fork server's process size, to split the fork from the parse."""
    source = work / "launch.pdf"
    source.write_bytes(make_pdf(1, "launch"))
    limits = Limits(60, 60, 2048)

    async def no_progress(done: int, total: int, stage: str) -> None:
        return None

    async def measure(server: ForkServer | None) -> tuple[float, float]:
        walls = []
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(jobs):
            started = time.perf_counter()
            outcome = await run_parse(
                "pdf", source, work / "launch.pb", limits, no_progress, None, server
            )
            walls.append(time.perf_counter() - started)
            assert not outcome.reason, outcome
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return statistics.median(walls) * 1000, cpu / jobs * 1000

    async def both() -> dict[str, float]:
        # The default fork server, and one without huge pages (parser_svc.child.huge_pages): the
        # fork server's own CPU per job (the fork) is counted for both.
        servers = {"fork_server": ForkServer(), "fork_server_small_pages": ForkServer(False)}
        for server in servers.values():
            server.start()
            await measure(server)  # waits for the fork server's imports
        out: dict[str, list[float]] = {}
        for turn in range(2):  # alternating which goes first: the first after a pause is slower
            order = [*servers.items(), ("spawn", None)]
            for name, chosen in order if turn % 2 == 0 else order[::-1]:
                fork_cpu = cpu_seconds(chosen.pid) if chosen and chosen.pid else 0.0
                wall, cpu = await measure(chosen)
                out.setdefault(f"{name}_wall_ms", []).append(wall)
                out.setdefault(f"{name}_child_cpu_ms", []).append(cpu)
                if chosen and chosen.pid:
                    fork_ms = (cpu_seconds(chosen.pid) - fork_cpu) / jobs * 1000
                    out.setdefault(f"{name}_fork_cpu_ms", []).append(fork_ms)
        for server in servers.values():
            server.close()
        return {key: round(statistics.median(values), 1) for key, values in out.items()}

    costs = asyncio.run(both())
    for name, huge in (("small", False), ("huge", True)):
        env = dict(os.environ)
        env.pop("GLIBC_TUNABLES", None)
        if huge:
            env["GLIBC_TUNABLES"] = HUGE_MALLOC
        done = subprocess.run(
            [sys.executable, "-m", "bench.parse.fork_cost"],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        measured = json.loads(done.stdout)
        costs[f"fork_server_anon_mb_{name}"] = measured["anon_mb"]
        costs[f"bare_fork_exit_{name}_pages_ms"] = measured["fork_exit_ms"]
        costs[f"fork_server_huge_mb_{name}"] = measured["huge_mb"]
    return costs
