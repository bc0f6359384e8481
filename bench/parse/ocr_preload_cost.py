"""What the fork server's OCR preload (`DOCPARSE_OCR_PRELOAD`) costs at its start and saves a
scan's job: `python -m bench.parse.ocr_preload_cost [ROUNDS]` (5). Each round starts a fork server
for each preload (all, latin, none; the order turns each round), waits for its warm-up through a
one-page text parse, and reads its CPU and resident memory; then parses a German scan and a
Russian scan (unhinted, OCR on: each finds its script) and a text page, each in a fresh child,
as the worker does (run_parse). Prints one JSON object: per preload, the medians of the fork
server's start (wall ms to its first parse done, its own CPU ms, its RSS in MB) and of each
job (wall ms, the child's CPU ms)."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.harness.procfs import cpu_seconds, rss_kb
from bench.parse.spare_cost import timed_parse
from parser_svc.child.fork_server import ForkServer
from tests.fixtures.scans import scan
from tests.helpers import make_pdf

PRELOADS = ("all", "latin", "none")


async def _round(preload: str, docs: dict[str, Path], folder: Path) -> dict[str, float]:
    server = ForkServer(ocr_preload=preload)
    started = time.perf_counter()
    server.start()
    try:
        await timed_parse(server, docs["text"], folder, spare=False)  # waits for the warm-up
        seen = {"start_wall_ms": (time.perf_counter() - started) * 1000}
        assert server.pid is not None
        seen["start_cpu_ms"] = cpu_seconds(server.pid) * 1000
        seen["rss_mb"] = rss_kb(server.pid)[0] / 1024
        for name in ("scan_de", "scan_ru", "text"):
            seen[f"{name}_wall_ms"], seen[f"{name}_cpu_ms"] = await timed_parse(
                server, docs[name], folder, spare=False
            )
        return seen
    finally:
        server.close()


async def measure(rounds: int) -> dict[str, dict[str, float]]:
    seen: dict[str, list[dict[str, float]]] = {p: [] for p in PRELOADS}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        docs = {
            "text": make_pdf(1, "a one-page memo"),
            "scan_de": scan("de", dpi=200, seed=21).pdf,
            "scan_ru": scan("ru", dpi=200, seed=22).pdf,
        }
        paths = {key: folder / f"{key}.pdf" for key in docs}
        for key, path in paths.items():
            path.write_bytes(docs[key])
        for i in range(rounds):
            order = PRELOADS[i % 3 :] + PRELOADS[: i % 3]
            for preload in order:
                seen[preload].append(await _round(preload, paths, folder))
    return {
        preload: {key: round(statistics.median(r[key] for r in runs), 1) for key in runs[0]}
        for preload, runs in seen.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", nargs="?", type=int, default=5)
    rounds = parser.parse_args().rounds
    print(json.dumps({"rounds": rounds, **asyncio.run(measure(rounds))}, indent=1))


if __name__ == "__main__":
    main()
