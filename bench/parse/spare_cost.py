"""What a spare parse child saves a one-page job (parser_svc/child/zygote.py, spares):
`python -m bench.parse.spare_cost [N] [GAP_MS]`. N parses of a one-page PDF with run_parse as
the worker calls it, through two fork servers, alternated: one asked for a spare after each
parse (as an idle worker asks), one never. GAP_MS (default 30) passes between a parse and the
next, as between two jobs' parses of an idle stack (the submit, the queue, the claim); with no
gap the next job waits for the spare's own parse. Prints one JSON object: the median
wall-clock ms of a parse, and the median CPU ms of its children (the job's, and the spare's
parse of its own document when it ended in the same span), each way; after 4 unmeasured."""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from parser_svc.child.fork_server import ForkServer
from parser_svc.child.sandbox import Limits, run_parse
from parser_svc.parsers import ParseOptions
from tests.helpers import make_pdf

WARM_UP = 4


async def _quiet(*_: object) -> None:
    return None


async def timed_parse(
    server: ForkServer, document: Path, folder: Path, spare: bool
) -> tuple[float, float]:
    """(wall ms, children's CPU ms) of one parse, then a spare asked for when `spare`."""
    scratch = Path(tempfile.mkdtemp(dir=folder))
    options = ParseOptions.defaults(assets_dir=scratch / "assets")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    outcome = await run_parse(
        "pdf", document, scratch / "package.pb", Limits(60, 60, 2048), _quiet, options, server
    )
    wall = (time.perf_counter() - started) * 1000
    assert not outcome.reason, outcome
    if spare:
        await server.ready_spare()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu


async def measure(runs: int, gap_s: float) -> dict[str, float]:
    servers = {"none": ForkServer(), "spare": ForkServer()}
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
    for server in servers.values():
        server.start()
    with tempfile.TemporaryDirectory() as folder:
        document = Path(folder) / "memo.pdf"
        document.write_bytes(make_pdf(1, "a one-page memo"))
        try:
            for i in range(2 * (runs + WARM_UP)):
                name = "spare" if i % 2 else "none"
                sample = await timed_parse(servers[name], document, Path(folder), name == "spare")
                if i >= 2 * WARM_UP:
                    seen[name].append(sample)
                await asyncio.sleep(gap_s)
        finally:
            for server in servers.values():
                server.close()
    result: dict[str, float] = {"runs": runs, "gap_ms": gap_s * 1000}
    for name, samples in seen.items():
        result[f"{name}_wall_ms"] = round(statistics.median(w for w, _ in samples), 2)
        result[f"{name}_children_cpu_ms"] = round(statistics.median(c for _, c in samples), 2)
    return result


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    gap_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
    print(json.dumps(asyncio.run(measure(runs, gap_ms / 1000))))


if __name__ == "__main__":
    main()
