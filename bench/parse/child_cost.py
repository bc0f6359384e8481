"""What a parse child's confinement costs, one way against another: N parses of a one-page PDF
through one fork server with run_parse as the worker calls it, the ways alternated, after 4
unmeasured ones. `measure` answers the median wall-clock ms of a parse and the median CPU ms of
its child, each way (bench/parse/drop_cost.py, bench/parse/landlock_cost.py)."""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parser_svc.child.fork_server import ForkServer
from parser_svc.child.privileges import ChildScratch
from parser_svc.child.sandbox import Limits, run_parse
from parser_svc.parsers import ParseOptions
from tests.helpers import make_pdf

WARM_UP = 4


@dataclass(frozen=True)
class Way:
    """How a child runs: its scratch directory's owner (and uid to drop to), its options."""

    scratch: ChildScratch
    options: dict[str, Any] = field(default_factory=dict)


async def _quiet(*_: object) -> None:
    return None


async def _one(server: ForkServer, way: Way, document: Path) -> tuple[float, float]:
    """(wall ms, child CPU ms) of one parse."""
    made = way.scratch.make()
    try:
        scratch = Path(made.name)
        options = ParseOptions.defaults(
            assets_dir=scratch / "assets", **way.scratch.drop_to(), **way.options
        )
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        outcome = await run_parse(
            "pdf", document, scratch / "package.pb", Limits(60, 60, 2048), _quiet, options, server
        )
        wall = (time.perf_counter() - started) * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert not outcome.reason, outcome
    finally:
        made.cleanup()
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu


async def measure(ways: dict[str, Way], runs: int) -> dict[str, float]:
    """`runs` parses each way, alternated: {"<way>_wall_ms", "<way>_child_cpu_ms"} medians."""
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    names = list(ways)
    server = ForkServer()
    server.start()
    with tempfile.TemporaryDirectory() as folder:
        document = Path(folder) / "memo.pdf"
        document.write_bytes(make_pdf(1, "a one-page memo"))
        try:
            for i in range(len(names) * runs + WARM_UP):
                name = names[i % len(names)]
                sample = await _one(server, ways[name], document)
                if i >= WARM_UP:
                    seen[name].append(sample)
        finally:
            server.close()
    result: dict[str, float] = {"runs": runs}
    for name, samples in seen.items():
        result[f"{name}_wall_ms"] = round(statistics.median(w for w, _ in samples), 2)
        result[f"{name}_child_cpu_ms"] = round(statistics.median(c for _, c in samples), 2)
    return result
