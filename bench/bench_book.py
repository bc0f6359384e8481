"""A long text PDF through the stack with the default options (structure, tables, images as
deployed), against raw pymupdf on every core: `.venv/bin/python -m bench.bench_book`.

The baseline is the most any parser gets from this machine: a process per usable CPU, each
running `page.get_text()` over whole copies of the book (a pool started before the clock). The
stack is one gateway and `--replicas` parser_svc replicas on an embedded Redis, each running as
many parses as it has CPUs; a job of many pages is read by forked siblings, a page range each.
Each round submits `--copies` unique copies of the generated book (its metadata differs, so
content dedupe joins none of them) from one thread each and waits for every job to succeed;
raw and stack alternate, round by round. Printed: pages/s of each, their ratio (goal ≥ 0.5),
and CPU seconds per page: raw's (the pool's children) and the stack's (every process of it,
bench.parse.stack_cpu, and by kind: replicas, parse processes, fork servers, gateway,
Redis), medians over rounds. Also the reading package in this process and
`get_text("dict")` per page, for where the time goes. Writes var/bench/book.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pymupdf

from bench.harness.documents import book_pdf
from bench.harness.jobs import run_job
from bench.harness.output import ROOT, log, write_text
from bench.harness.stacks import bench_stack, running
from bench.parse.stack_cpu import stack_cpu_by_kind, usable_cores
from docparse.v1 import job_pb2, parser_service_pb2


def _copies(book: bytes, count: int, tag: str) -> list[bytes]:
    out = []
    for i in range(count):
        doc = pymupdf.open(stream=book)  # type: ignore[no-untyped-call]
        doc.set_metadata({"title": f"book {tag} {i} {time.time_ns()}"})
        out.append(doc.tobytes())  # type: ignore[no-untyped-call]
    return out


def _raw(data: bytes) -> tuple[int, float]:
    """Pages of one copy read by get_text in a pool process, and the CPU seconds it took."""
    started = time.process_time()
    doc = pymupdf.open(stream=data)  # type: ignore[no-untyped-call]
    for index in range(doc.page_count):
        doc[index].get_text()  # type: ignore[no-untyped-call]
    return int(doc.page_count), time.process_time() - started


def raw_every_core(pool: ProcessPoolExecutor, copies: list[bytes]) -> tuple[float, float]:
    """Pages/s and CPU seconds per page of raw get_text, a copy per task."""
    started = time.perf_counter()
    done = list(pool.map(_raw, copies))
    seconds = time.perf_counter() - started
    pages = sum(p for p, _ in done)
    return pages / seconds, sum(c for _, c in done) / pages


def through_stack(address: str, copies: list[bytes]) -> tuple[int, float]:
    def one(data: bytes) -> job_pb2.Job:
        request = parser_service_pb2.SubmitJobRequest(file_name="book.pdf", content=data)
        return run_job(address, request, resume=True)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(copies)) as threads:
        jobs = list(threads.map(one, copies))
    seconds = time.perf_counter() - started
    failed = [job.error.reason for job in jobs if job.state != job_pb2.STATE_SUCCEEDED]
    if failed:
        raise SystemExit(f"jobs failed: {failed}")
    return sum(job.result.page_count for job in jobs), seconds


def in_process(book: bytes) -> dict[str, float]:
    """ms per page: the reading package in this process, get_text, get_text("dict")."""
    from parser_svc.child.parse_child import parse
    from parser_svc.parsers import ParseOptions

    doc = pymupdf.open(stream=book)  # type: ignore[no-untyped-call]
    pages = doc.page_count
    out: dict[str, list[float]] = {"package": [], "get_text": [], "get_text_dict": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(3):
            started = time.perf_counter()
            options = ParseOptions.defaults(assets_dir=Path(tmp) / "assets")
            parse("pdf", book, lambda *_: None, options).SerializeToString()
            out["package"].append(time.perf_counter() - started)
            started = time.perf_counter()
            for index in range(pages):
                doc[index].get_text()  # type: ignore[no-untyped-call]
            out["get_text"].append(time.perf_counter() - started)
            started = time.perf_counter()
            for index in range(pages):
                doc[index].get_text("dict")  # type: ignore[no-untyped-call]
            out["get_text_dict"].append(time.perf_counter() - started)
    return {k: statistics.median(v) * 1000 / pages for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=352)
    parser.add_argument("--copies", type=int, default=4, help="jobs per round")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cores = usable_cores()
    book = book_pdf(args.pages)
    work = Path(tempfile.mkdtemp(prefix="bench-book-"))
    result: dict[str, object] = {"pages": args.pages, "copies": args.copies, "cores": cores}
    result["in_process_ms_per_page"] = in_process(book)
    log(f"in process: {result['in_process_ms_per_page']}")
    rates: dict[str, list[float]] = {}
    stack = bench_stack(work / "stack", replicas=args.replicas)
    with running([stack]), ProcessPoolExecutor(max_workers=cores) as pool:
        address = stack.gateway_addresses[0]
        through_stack(address, _copies(book, 1, "warm"))  # fork servers, connections
        raw_every_core(pool, _copies(book, cores, "warm"))  # the pool's processes
        for round_no in range(args.rounds):
            copies = _copies(book, args.copies, f"r{round_no}")
            for which in ("raw", "stack") if round_no % 2 == 0 else ("stack", "raw"):
                if which == "raw":
                    rate, cpu = raw_every_core(pool, copies)
                else:
                    cpu_before = stack_cpu_by_kind(stack)
                    pages, seconds = through_stack(address, copies)
                    spent = {
                        kind: (total - cpu_before[kind]) / pages
                        for kind, total in stack_cpu_by_kind(stack).items()
                    }
                    for kind, seconds_a_page in spent.items():
                        rates.setdefault(f"stack_{kind}_cpu_ms_per_page", []).append(
                            seconds_a_page * 1000
                        )
                    rate, cpu = pages / seconds, sum(spent.values())
                rates.setdefault(f"{which}_pages_per_s", []).append(rate)
                rates.setdefault(f"{which}_cpu_ms_per_page", []).append(cpu * 1000)
            ratio = rates["stack_pages_per_s"][-1] / rates["raw_pages_per_s"][-1]
            rates.setdefault("stack_vs_raw", []).append(ratio)
            log(f"round {round_no + 1}: stack / raw on {cores} cores = {ratio:.2f}")
    result["rounds"] = {k: [round(x, 3) for x in v] for k, v in rates.items()}
    result["median"] = {k: round(statistics.median(v), 3) for k, v in rates.items()}
    result["loadavg_end"] = os.getloadavg()
    write_text(ROOT / "var" / "bench" / "book.json", json.dumps(result, indent=2))
    m = result["median"]
    assert isinstance(m, dict)
    print(
        f"book, {args.pages} pages, {args.copies} copies a round, {args.replicas} replica(s), "
        f"{cores} cores, medians of {args.rounds} rounds:\n"
        f"  raw get_text on every core : {m['raw_pages_per_s']:8.1f} pages/s, "
        f"{m['raw_cpu_ms_per_page']:.2f} CPU ms/page\n"
        f"  the stack, default options : {m['stack_pages_per_s']:8.1f} pages/s, "
        f"{m['stack_cpu_ms_per_page']:.2f} CPU ms/page ("
        + ", ".join(
            f"{key[6:-16]} {value:.2f}"
            for key, value in m.items()
            if key.startswith("stack_")
            and key.endswith("_cpu_ms_per_page")
            and key != "stack_cpu_ms_per_page"
        )
        + ")\n"
        f"  stack / raw                : {m['stack_vs_raw']:8.2f} (goal >= 0.5)\n"
        f"  in process, ms/page        : {result['in_process_ms_per_page']}"
    )


if __name__ == "__main__":
    main()
