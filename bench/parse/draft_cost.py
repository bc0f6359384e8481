"""What a long PDF's draft pages cost the worker's replica, without the noise of a whole stack:
`python -m bench.parse.draft_cost [--runs N]`.

The parse child's event lines for the generated 352-page book are recorded once in this
process, with their times (child/draft_pages.writing_drafts and the child's progress, as a
one-process parse writes them). A stand-in child then writes those lines at those times, and
the worker's own code reads them: run_parse (its event reader), the DraftQueue, the
PagePublisher with a BlobStore and an embedded Redis. CPU (user + system, this process and
its threads; the stand-in child apart) a page, the median of the runs, at each stage:

- read: the lines read and parsed, the drafts dropped;
- queue: and decoded and queued, nothing stored;
- store: and stored in the blob store (a thread trip a batch), no pointer written;
- all: and pointed at in Redis, as a running job does.

Each stage three ways: the lines as the child writes them (gathered); as the baseline, the
same drafts one line a page at the time each was made, read by a queue that lets them gather
4 ms on the worker's side (one_a_page: how child and worker did it before the child gathered
them); and those one-a-page lines written all at once (one_a_page_at_once: what reading them
costs without a wake of the event loop for each). The spawn of the stand-in is in the figures
(~0.01 ms a page). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.harness.documents import book_pdf
from docparse.local.embedded_redis import EmbeddedRedis
from parser_svc.child import draft_pages, sandbox
from parser_svc.child.fork_server import EVENT_LINE_LIMIT
from parser_svc.child.parse_child import parse
from parser_svc.child.sandbox import Draft, Limits, SpawnedChild, run_parse
from parser_svc.parsers import ParseOptions
from parser_svc.settings import Settings
from parser_svc.state.page_parts import PageParts
from parser_svc.state.store import JobStore, connect
from parser_svc.work.blobs import BlobStore
from parser_svc.work.page_parts import DraftQueue, PagePublisher

STAGES = ("read", "queue", "store", "all")
# Writes each line of a file of [seconds, line] pairs at its time (the stand-in child).
FEEDER = """import json, sys, time
sys.stdin.read()
lines = json.load(open(sys.argv[1]))
start = time.perf_counter()
for at, line in lines:
    wait = at - (time.perf_counter() - start)
    if wait > 0:
        time.sleep(wait)
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()
"""


def record(scratch: Path) -> tuple[list[tuple[float, str]], dict[int, float]]:
    """The child's event lines for the book (progress every 50 ms, as the child coalesces it),
    and when each page's draft was made: drafts wanted from the start (a reader with the
    submit)."""
    draft_pages.wanted_path(scratch).touch()
    lines: list[tuple[float, str]] = []
    made: dict[int, float] = {}
    start, last = time.perf_counter(), [-1.0]

    def emit(**event: object) -> None:
        lines.append((time.perf_counter() - start, json.dumps(event)))

    def progress(done: int, total: int, stage: str) -> None:
        now = time.perf_counter()
        if done == 0 or done >= total or now - last[0] >= 0.05:
            emit(event="progress", done=done, total=total, stage=stage)
            last[0] = now

    send = draft_pages._Announcer.send

    def timed(self: draft_pages._Announcer, number: int, data: bytes) -> None:
        made.setdefault(number, time.perf_counter() - start)
        send(self, number, data)

    options = ParseOptions.defaults(assets_dir=scratch / "assets", page_processes=1)
    draft_pages._Announcer.send = timed  # type: ignore[method-assign]
    try:
        with draft_pages.writing_drafts(scratch, emit):
            package = parse("pdf", book_pdf(352), progress, options)
    finally:
        draft_pages._Announcer.send = send  # type: ignore[method-assign]
    emit(event="done", pages=len(package.pages), chars=0, processes=1, held="")
    return lines, made


def one_a_page(lines: list[tuple[float, str]], made: dict[int, float]) -> list[tuple[float, str]]:
    """The same drafts, each in a line of its own at the time it was made (as the child wrote
    them before it gathered them)."""
    out = []
    for at, line in lines:
        event = json.loads(line)
        for part in event.get("parts", [None]):
            if part is None:
                out.append((at, line))
            else:
                out.append((made[part[0]], json.dumps({**event, "parts": [part]})))
    return sorted(out, key=lambda timed: timed[0])


class GatheringQueue(DraftQueue):
    """The baseline's queue: after its first batch it let drafts gather 4 ms (or 16 pages)
    before it wrote the next, as the worker did while the child sent a line a page."""

    async def _run(self) -> None:
        first = True
        while True:
            await self.wake.wait()
            self.wake.clear()
            if self.publisher.stopped:
                return
            if not first and len(self.pending) < 16:
                await asyncio.sleep(0.004)
            first = False
            drafts, self.pending = self.pending, []
            await self.publisher.publish_drafts(self.scratch, drafts)
            self.on_published()


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Bench:
    def __init__(self, root: Path, redis_url: str) -> None:
        self.root = root
        self.settings = Settings(redis_url=redis_url, env="draft-cost", blob_dir=root / "blobs")
        self.store = JobStore(connect(self.settings), self.settings)
        self.blobs = BlobStore(self.settings.blob_dir, self.settings.env)

    async def _running_job(self) -> str:
        job_id = uuid.uuid4().hex
        key = self.store.keys.job(job_id)
        await self.store._redis.hset(key, mapping={"state": "RUNNING", "fence": "bench"})
        await self.store._redis.pexpire(key, 600_000)
        return job_id

    async def _on_page(
        self, stage: str, scratch: Path, queue_type: type[DraftQueue]
    ) -> tuple[Any, DraftQueue | None]:
        if stage == "read":
            return None, None
        publisher = PagePublisher(PageParts(self.store), self.blobs, await self._running_job(),
                                  "bench", 1)  # fmt: skip
        publish: Callable[[Path, list[Draft]], Awaitable[None]] | None = None
        if stage == "queue":

            async def publish(_scratch: Path, _drafts: list[Draft]) -> None:
                return None

        elif stage == "store":

            async def publish(scratch: Path, drafts: list[Draft]) -> None:
                await asyncio.to_thread(publisher._store_drafts, scratch, drafts)

        if publish is not None:
            publisher.publish_drafts = publish  # type: ignore[method-assign,assignment]
        queue = queue_type(publisher, scratch)
        return queue.add, queue

    async def run(
        self, lines_file: Path, pages: int, stage: str, scratch: Path, queue_type: type[DraftQueue]
    ) -> float:
        """CPU ms a page of the worker reading `lines_file` through `stage`."""
        on_page, queue = await self._on_page(stage, scratch, queue_type)

        async def quiet(*_: object) -> None:
            return None

        started = _cpu()
        outcome = await run_parse(
            "pdf", lines_file, scratch / "package.pb", Limits(60, 60, 1024), quiet,
            on_page=on_page,
        )  # fmt: skip
        if queue is not None:
            await queue.close()
        assert not outcome.reason, outcome
        return (_cpu() - started) / pages * 1000


def _stand_in(feeder: Path, lines_file: Path) -> Any:
    async def start(cls: type[SpawnedChild], argv: list[str], cwd: Path | None = None) -> Any:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(feeder), str(lines_file), cwd=cwd, limit=EVENT_LINE_LIMIT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(proc)

    return classmethod(start)


async def measure(runs: int) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="draft-cost-"))
    scratch = root / "scratch"
    scratch.mkdir()
    lines, made = record(scratch)
    paced = one_a_page(lines, made)
    shapes = {
        "gathered": lines,
        "one_a_page": paced,
        "one_a_page_at_once": [(0.0, line) for _, line in paced],
    }
    queues: dict[str, type[DraftQueue]] = {
        "gathered": DraftQueue,
        "one_a_page": GatheringQueue,
        "one_a_page_at_once": GatheringQueue,
    }
    pages = sum(len(json.loads(line).get("parts", [])) for _, line in lines)
    feeder = root / "feeder.py"
    feeder.write_text(FEEDER)
    out: dict[str, object] = {"pages": pages}
    with EmbeddedRedis(root / "redis") as redis:
        bench = Bench(root, redis.url)
        results: dict[str, list[float]] = {}
        for _ in range(runs):
            for shape, shaped in shapes.items():
                lines_file = root / f"{shape}.json"
                lines_file.write_text(json.dumps(shaped))
                sandbox.SpawnedChild.start = _stand_in(feeder, lines_file)  # type: ignore[method-assign]
                for stage in STAGES:
                    cost = await bench.run(lines_file, pages, stage, scratch, queues[shape])
                    results.setdefault(f"{shape}_{stage}", []).append(cost)
        for shape, shaped in shapes.items():
            out[f"{shape}_lines"] = len(shaped)
        for name, costs in results.items():
            out[f"{name}_cpu_ms_per_page"] = round(statistics.median(costs), 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    print(json.dumps(asyncio.run(measure(parser.parse_args().runs)), indent=1))


if __name__ == "__main__":
    main()
