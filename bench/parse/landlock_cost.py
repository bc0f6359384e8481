"""What Landlock costs a parse child (parser_svc/child/landlock.py), run as
`python -m bench.parse.landlock_cost [N]`: N parses of a one-page PDF through one fork server
with run_parse as the worker calls it, alternately confined and not, after 4 unmeasured ones;
the uid drop off (child_uid 0, as in a pod that cannot drop), so only Landlock differs. Prints
one JSON object: the median wall-clock ms of a parse and the median CPU ms of its child, each
way. A kernel without Landlock: nothing to compare, it says so and exits 2."""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from parser_svc.child import landlock
from parser_svc.child.fork_server import ForkServer
from parser_svc.child.privileges import ChildScratch
from parser_svc.child.sandbox import Limits, run_parse
from parser_svc.parsers import ParseOptions
from tests.helpers import make_pdf

WARM_UP = 4


async def _quiet(*_: object) -> None:
    return None


async def _one(server: ForkServer, confined: bool, document: Path) -> tuple[float, float]:
    """(wall ms, child CPU ms) of one parse."""
    made = ChildScratch(0, 0).make()
    try:
        scratch = Path(made.name)
        options = ParseOptions.defaults(assets_dir=scratch / "assets", landlock=confined)
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
    seen: dict[str, list[tuple[float, float]]] = {"landlock": [], "open": []}
    server = ForkServer()
    server.start()
    with tempfile.TemporaryDirectory() as folder:
        document = Path(folder) / "memo.pdf"
        document.write_bytes(make_pdf(1, "a one-page memo"))
        try:
            for i in range(2 * runs + WARM_UP):
                way = "landlock" if i % 2 else "open"
                sample = await _one(server, way == "landlock", document)
                if i >= WARM_UP:
                    seen[way].append(sample)
        finally:
            server.close()
    result: dict[str, float] = {"runs": runs, "abi": landlock.available()}
    for way, samples in seen.items():
        result[f"{way}_wall_ms"] = round(statistics.median(w for w, _ in samples), 2)
        result[f"{way}_child_cpu_ms"] = round(statistics.median(c for _, c in samples), 2)
    return result


def main() -> None:
    if not landlock.available():
        print("this kernel offers no Landlock: nothing to compare", file=sys.stderr)
        raise SystemExit(2)
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(json.dumps(asyncio.run(measure(runs))))


if __name__ == "__main__":
    main()
