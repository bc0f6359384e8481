"""How soon page 1 of a long PDF is readable after submit, through the gateway
(`.venv/bin/python -m bench.bench_first_page`).

A stack of one gateway and `--replicas` parser_svc replicas on an embedded Redis, idle: each
run submits a unique copy of the generated 352-page book (bench.harness.documents.book_pdf;
its metadata differs, so content dedupe joins none), opens StreamResult on the gateway as soon
as SubmitJob answers, and times from the submit to the first page part (a draft), to page 1's,
and to the terminal record. Beside it, in this process: raw pymupdf's time from the bytes to
page 1's text (open + `get_text()`), the most a parser could do. Medians (p50) over `--runs`.
Page k: when each page first came (its draft), against raw pymupdf's time from the bytes to
page k's text reading pages 1..k in order (open + `get_text()` each), at a few k; and how many
drafts were byte for byte their final page (a draft is the page before the passes that need
every page). With `--pages-per-message N` (StreamResultRequest.pages_per_message) the runs
alternate between one page a message and N, on the same stack, and both are reported. Writes
var/bench/first_page.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import pymupdf

from bench.harness.documents import book_pdf
from bench.harness.output import ROOT, log, write_text
from bench.harness.procfs import cpu_seconds
from bench.harness.stacks import bench_stack, running
from bench.parse.stack_cpu import stack_cpu_by_kind
from docparse.local.stack import LocalStack
from docparse.streamed_pages import one_page_each
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.v1 import reading_package_pb2 as rp
from tests.helpers import stub


def _copy(book: bytes, run: int) -> bytes:
    doc = pymupdf.open(stream=book)  # type: ignore[no-untyped-call]
    doc.set_metadata({"title": f"first page {run} {time.time_ns()}"})
    return bytes(doc.tobytes())  # type: ignore[no-untyped-call]


def raw_first_page(data: bytes) -> float:
    """Seconds from the bytes to page 1's text with pymupdf."""
    started = time.perf_counter()
    doc = pymupdf.open(stream=data)  # type: ignore[no-untyped-call]
    doc[0].get_text()  # type: ignore[no-untyped-call]
    seconds = time.perf_counter() - started
    doc.close()  # type: ignore[no-untyped-call]
    return seconds


def raw_page_times(data: bytes) -> list[float]:
    """Seconds from the bytes to each page's text, pages read in order (index k-1: page k)."""
    started = time.perf_counter()
    doc = pymupdf.open(stream=data)  # type: ignore[no-untyped-call]
    times = []
    for page in doc:  # type: ignore[attr-defined]
        page.get_text()
        times.append(time.perf_counter() - started)
    doc.close()  # type: ignore[no-untyped-call]
    return times


def _page(part: bytes) -> bytes:
    return rp.ReadingPackage.FromString(part).pages[0].SerializeToString(deterministic=True)


def cpu_by_kind(stack: LocalStack) -> dict[str, float]:
    """CPU seconds so far of this process (the client) and of the stack, by kind."""
    return {"client": cpu_seconds(os.getpid()), **stack_cpu_by_kind(stack)}


def through_gateway(
    stack: LocalStack, data: bytes, pages: int, per_message: int = 1
) -> dict[str, float]:
    """Seconds from submit to the first page part, to page 1's, to each page's first part
    ("page_<k>_s") and to the end; drafts equal to their final page ("same_drafts", of
    "drafts"); and from the submit to the last of the `pages` drafts ("last_draft_s"), the CPU
    time each kind of process spent, per page ("cpu_<kind>_ms_per_page": the stack's cost of
    a page while pages stream, before the passes of the end)."""
    channel, s = stub(stack.gateway_addresses[0])
    times: dict[str, float] = {}
    # Parts kept as sent and compared after the end: the client's own work during the stream
    # is no more than a reader's (one parse a part), not a comparison's.
    drafts: dict[int, bytes] = {}
    finals: dict[int, bytes] = {}
    with channel:
        before = cpu_by_kind(stack)
        started = time.perf_counter()
        request = parser_service_pb2.SubmitJobRequest(file_name="book.pdf", content=data)
        job = s.SubmitJob(request, timeout=60).job
        ask = parser_service_pb2.StreamResultRequest(
            job_id=job.job_id, pages_per_message=per_message
        )
        messages = 0
        for message in s.StreamResult(ask, timeout=600):
            messages += 1
            now = time.perf_counter() - started
            times.setdefault("first_part_s", now)
            for page in one_page_each(message):
                if not page.page_part:  # the terminal record
                    continue
                times.setdefault(f"page_{page.page_number}_s", now)
                rp.ReadingPackage.FromString(page.page_part)  # what a reader does
                (finals if page.final else drafts)[page.page_number] = page.page_part
                if len(drafts) == pages and "last_draft_s" not in times:
                    times["last_draft_s"] = now
                    after = cpu_by_kind(stack)
                    for kind, spent in after.items():
                        times[f"cpu_{kind}_ms_per_page"] = (
                            (spent - before.get(kind, 0.0)) * 1000 / pages
                        )
            if message.HasField("job"):
                assert message.job.state == job_pb2.STATE_SUCCEEDED, message.job.error
                times["end_s"] = now
    same = sum(_page(part) == _page(finals[n]) for n, part in drafts.items() if n in finals)
    times["drafts"], times["same_drafts"] = len(drafts), same
    times["messages"] = messages
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=352)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the stack's servers (DOCPARSE_PDF_SPLIT_MIN_PAGES=0: one process a "
        "parse); may repeat",
    )
    parser.add_argument(
        "--pages-per-message",
        type=int,
        default=1,
        help="more than 1: runs alternate between one page a StreamResult message and this many",
    )
    args = parser.parse_args()
    book = book_pdf(args.pages)
    settings = [1] if args.pages_per_message <= 1 else [1, args.pages_per_message]
    runs: dict[int, list[dict[str, float]]] = {per: [] for per in settings}
    with tempfile.TemporaryDirectory(prefix="bench-first-page-") as folder:
        env = dict(item.split("=", 1) for item in args.env)
        stack = bench_stack(Path(folder), replicas=args.replicas, extra_env=env)
        with running([stack]):
            # warm: the first job starts the workers
            through_gateway(stack, _copy(book, -1), args.pages)
            for run in range(args.runs):
                for per in settings:
                    data = _copy(book, run * len(settings) + per)
                    times = through_gateway(stack, data, args.pages, per)
                    times["raw_page_1_s"] = raw_first_page(data)
                    for number, seconds in enumerate(raw_page_times(data), 1):
                        times[f"raw_page_{number}_s"] = seconds
                    log(
                        f"run {run}, {per} a message: "
                        + ", ".join(
                            f"{k}={v:.3f}"
                            for k, v in times.items()
                            if not k.startswith(("page_", "raw_page_"))
                            or k.endswith(("_1_s", "_100_s"))
                        )
                    )
                    runs[per].append(times)
    report_runs: dict[str, object] = {"pages": args.pages}
    for per in settings:
        report_runs[f"{per}_a_message"] = {"runs": runs[per], "p50": report(args, per, runs[per])}
    write_text(ROOT / "var" / "bench" / "first_page.json", json.dumps(report_runs, indent=2))


def report(args: argparse.Namespace, per: int, runs: list[dict[str, float]]) -> dict[str, float]:
    # A run whose job ended before its last draft came has no CPU to the last draft.
    keys = dict.fromkeys(key for run in runs for key in run)
    p50 = {key: statistics.median(run[key] for run in runs if key in run) for key in keys}
    print(
        f"{args.pages}-page PDF through the gateway, up to {per} page(s) a message "
        f"({p50['messages']:.0f} messages), p50 of {args.runs}: first page part "
        f"{p50['first_part_s'] * 1000:.0f} ms, page 1 {p50['page_1_s'] * 1000:.0f} ms, job "
        f"end {p50['end_s'] * 1000:.0f} ms after submit; raw pymupdf to page 1's text "
        f"{p50['raw_page_1_s'] * 1000:.1f} ms"
    )
    print("page k readable (p50) against raw pymupdf reading pages 1..k in order:")
    for k in sorted(k for k in {1, 10, 50, 100, 200, args.pages} if k <= args.pages):
        ours, raw = p50[f"page_{k}_s"] * 1000, p50[f"raw_page_{k}_s"] * 1000
        print(f"  page {k}: {ours:.0f} ms vs raw {raw:.1f} ms = {ours / raw:.2f}x")
    print(f"drafts byte for byte their final page: {p50['same_drafts']:.0f} of {p50['drafts']:.0f}")
    cpu = {key[4:-12]: value for key, value in p50.items() if key.startswith("cpu_")}
    if cpu:
        print(
            f"to the last draft ({p50['last_draft_s'] * 1000:.0f} ms), CPU ms a page (p50): "
            + ", ".join(f"{kind} {ms:.2f}" for kind, ms in cpu.items())
            + f"; all {sum(cpu.values()):.2f}"
        )
    return p50


if __name__ == "__main__":
    main()
