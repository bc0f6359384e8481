"""What a fork-server child's confinement costs a long parse: `python -m
bench.parse.confinement_cost [--runs N]`. The generated 352-page book, one process a parse,
read each of these ways in turn (alternated, N rounds), the child's CPU ms a page (user +
system, from its rusage):

- plain_fork: `os.fork` of this process, warmed up as the fork server is (pdf.warm_up, the
  collector frozen), running `parse_child.run` with no confinement;
- server_drop_landlock: a fork-server child through run_parse, as the worker runs it (uid
  65534, Landlock on);
- server_keep_nolandlock: the same keeping root, without Landlock;
- server_no_huge_pages: a fork server without huge pages, uid dropped, Landlock on.

Root only (a drop needs it). Prints one JSON object: the min and median of each way.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import resource
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.harness.documents import book_pdf
from parser_svc.child import parse_child
from parser_svc.child.fork_server import ForkServer
from parser_svc.child.privileges import ChildScratch, can_drop
from parser_svc.child.sandbox import Draft, Limits, run_parse
from parser_svc.parsers import ParseOptions, pdf

PAGES = 352


def plain_fork(book: Path, folder: Path) -> float:
    """Child CPU ms a page of `parse_child.run` in a plain fork of this process."""
    scratch = Path(tempfile.mkdtemp(dir=folder))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.dup2(write, 1)
        sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
        options = ParseOptions.defaults(assets_dir=scratch / "assets", page_processes=1)
        parse_child.run("pdf", book.open("rb"), scratch / "package.pb", options)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as events:
        while events.read(1 << 16):
            pass
    _, status, usage = os.wait4(pid, 0)
    assert status == 0, status
    return (usage.ru_utime + usage.ru_stime) / PAGES * 1000


async def served(server: ForkServer, owner: ChildScratch, landlock: bool, book: Path) -> float:
    """Child CPU ms a page of a fork-server child through run_parse."""
    made = owner.make()
    scratch = Path(made.name)
    options = ParseOptions.defaults(
        assets_dir=scratch / "assets", page_processes=1, landlock=landlock, **owner.drop_to()
    )

    async def quiet(*_: object) -> None:
        return None

    async def drafts(_: list[Draft]) -> None:
        return None

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    outcome = await run_parse(
        "pdf", book, scratch / "package.pb", Limits(60, 60, 2048), quiet, options, server,
        on_page=drafts,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    made.cleanup()
    assert not outcome.reason, outcome
    spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return spent / PAGES * 1000


async def measure(runs: int) -> dict[str, dict[str, float]]:
    folder = Path(tempfile.mkdtemp(prefix="confinement-cost-"))
    book = folder / "book.pdf"
    book.write_bytes(book_pdf(PAGES))
    pdf.warm_up()
    gc.collect()
    gc.freeze()
    huge, flat = ForkServer(huge_pages=True), ForkServer(huge_pages=False)
    huge.start()
    flat.start()
    drop, keep = ChildScratch(65534, 65534), ChildScratch(0, 0)

    async def fork_now() -> float:
        return plain_fork(book, folder)

    ways: dict[str, Callable[[], Awaitable[float]]] = {
        "plain_fork": fork_now,
        "server_drop_landlock": lambda: served(huge, drop, True, book),
        "server_keep_nolandlock": lambda: served(huge, keep, False, book),
        "server_no_huge_pages": lambda: served(flat, drop, True, book),
    }
    seen: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for _ in range(runs):
            for name, way in ways.items():
                seen[name].append(await way())
    finally:
        huge.close()
        flat.close()
    return {
        name: {"min": round(min(v), 3), "median": round(statistics.median(v), 3)}
        for name, v in seen.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    runs = parser.parse_args().runs
    if not can_drop():
        print(f"uid {os.geteuid()} cannot drop a child's uid: run as root", file=sys.stderr)
        raise SystemExit(2)
    print(json.dumps(asyncio.run(measure(runs)), indent=1))


if __name__ == "__main__":
    main()
