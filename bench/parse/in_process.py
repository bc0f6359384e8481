"""Parsing in this process: raw pymupdf get_text against the reading package (the parse
child's `parse` with its ParseOptions), and one parse launched alone through
parser_svc.sandbox.run_parse, forked from a fork server and spawned fresh."""

from __future__ import annotations

import asyncio
import importlib
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import pymupdf

from parser_svc.parse_child import parse
from parser_svc.parsers import ParseOptions, pdf_pass
from parser_svc.sandbox import Limits, run_parse
from parser_svc.zygote import MODULES, ForkServer
from parser_svc.zygote import warm_up as zygote_warm_up
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
    """`single_pass` False: as without parser_svc/native (each PDF page run twice)."""
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
    """One one-page PDF parsed `jobs` times through parser_svc.sandbox.run_parse, one at a
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
        server = ForkServer()
        server.start()
        await measure(server)  # waits for the fork server's imports
        out: dict[str, list[float]] = {}
        for _ in range(2):
            for name, chosen in (("fork_server", server), ("spawn", None)):
                wall, cpu = await measure(chosen)
                out.setdefault(f"{name}_wall_ms", []).append(wall)
                out.setdefault(f"{name}_child_cpu_ms", []).append(cpu)
        server.close()
        return {key: round(statistics.median(values), 1) for key, values in out.items()}

    costs = asyncio.run(both())
    # A bare fork + exit of a process as large as the fork server: this process, after
    # importing and warming up what the fork server does. The cost grows with its anonymous
    # memory (page tables copied at fork, torn down at exit).
    for module in MODULES:
        importlib.import_module(module)
    zygote_warm_up()
    rollup = Path("/proc/self/smaps_rollup").read_text().splitlines()
    anon_kb = next(int(line.split()[1]) for line in rollup if line.startswith("Anonymous:"))
    costs["fork_server_size_anon_mb"] = round(anon_kb / 1024, 1)
    started = time.perf_counter()
    for _ in range(20):
        pid = os.fork()  # the child only calls _exit: safe whatever threads this process has
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    costs["bare_fork_exit_ms"] = round((time.perf_counter() - started) / 20 * 1000, 2)
    return costs
