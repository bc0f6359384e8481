"""What dropping a parse child's uid costs (parser_svc/child/privileges.py), run as root as
`python -m bench.parse.drop_cost [N]`: N parses of a one-page PDF through one fork server with
run_parse as the worker calls it, alternately with the drop (uid 65534, the worker's scratch
directory) and without (uid 0: the child keeps root), after 4 unmeasured ones. Prints one JSON
object: the median wall-clock ms of a parse and the median CPU ms of its child, each way.
Not root: nothing to compare (no process may drop), it says so and exits 2."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from parser_svc.child.fork_server import ForkServer
from parser_svc.child.privileges import ChildScratch, can_drop
from parser_svc.child.sandbox import Limits, run_parse
from parser_svc.parsers import ParseOptions
from tests.helpers import make_pdf

WARM_UP = 4


async def _quiet(*_: object) -> None:
    return None


async def _one(server: ForkServer, maker: ChildScratch, document: Path) -> tuple[float, float]:
    """(wall ms, child CPU ms) of one parse."""
    made = maker.make()
    try:
        scratch = Path(made.name)
        options = ParseOptions.defaults(assets_dir=scratch / "assets", **maker.drop_to())
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


async def measure(runs: int) -> dict[str, float]:
    makers = {"drop": ChildScratch(65534, 65534), "keep": ChildScratch(0, 0)}
    seen: dict[str, list[tuple[float, float]]] = {"drop": [], "keep": []}
    server = ForkServer()
    server.start()
    with tempfile.TemporaryDirectory() as folder:
        document = Path(folder) / "memo.pdf"
        document.write_bytes(make_pdf(1, "a one-page memo"))
        try:
            for i in range(2 * runs + WARM_UP):
                way = "drop" if i % 2 else "keep"
                sample = await _one(server, makers[way], document)
                if i >= WARM_UP:
                    seen[way].append(sample)
        finally:
            server.close()
    result: dict[str, float] = {"runs": runs}
    for way, samples in seen.items():
        result[f"{way}_wall_ms"] = round(statistics.median(w for w, _ in samples), 2)
        result[f"{way}_child_cpu_ms"] = round(statistics.median(c for _, c in samples), 2)
    return result


def main() -> None:
    if not can_drop():
        print(f"uid {os.geteuid()} cannot drop a child's uid: run as root", file=sys.stderr)
        raise SystemExit(2)
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(json.dumps(asyncio.run(measure(runs))))


if __name__ == "__main__":
    main()
