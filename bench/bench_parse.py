"""Parse benchmark: run with `.venv/bin/python -m bench.bench_parse [--rounds N]`.

Two local stacks run side by side, identical but for how parse children start
(DOCPARSE_PARSE_LAUNCH): `fork_server` (forked from the pre-imported parser_svc.child.zygote) and
`spawn` (a fresh interpreter per job, as before the fork server). Each has 2 parser_svc replicas
(2 concurrent parses each), 1 gateway and its own embedded Redis, and runs as in production: API
keys required at the gateway, the internal token between gateway and parser_svc; every client
sends the key. Per round, alternating the order of the stacks:

1. Text PDFs (the corpus's text_pdf/) through each stack (submit → SUCCEEDED, 8 client
   threads) vs pymupdf's raw get_text of the same files in this one process, and in a process
   per usable CPU at once (bench.parse.all_cores: the limit, since the stack has every core):
   pages/s and their ratios. The reading package parsed in this process (no stack) is shown
   too. Beside each rate its CPU seconds per page (the stack's: parser_svc, its parse
   children and fork servers, the gateway, Redis), and the ratio that CPU allows at most with
   every core busy.
2. A generated book (hundreds of pages of running text, headings, footnotes): raw get_text vs
   the reading package in this process.
3. 60 one-page PDFs (bench.harness.documents.one_page_pdfs: each unlike the others and unlike
   the fork server's warm-up page), 8 concurrent SDK clients (docparse.client.Client.parse)
   through the gateway: jobs/s and the stack's CPU per job, next to raw pymupdf open +
   get_text of the same files (documents/s, in this process and on every core).
4. A lone one-page PDF, submit → SUCCEEDED through the gateway with the SDK, next to a
   GetStatus round trip through the same gateway.

After each round (outside the timed parts) every package the stacks made in it is downloaded
through the gateway (`Client.result`) and checked against raw pymupdf on the same file
(bench.parse.check: page count equal, characters per page within a stated tolerance): a
mismatch ends the run with exit status 1 and a line naming the file and the page.

Then: resident memory per replica (parser_svc + its fork server) at idle, and per running
parse (each parse child's peak RSS and its private part, sampled from /proc during the text
PDFs); Redis commands (round trips) and PUBLISH messages per one-page job (MONITOR on the
fork_server stack's Redis; 30 jobs one after another, then 30 from 8 concurrent clients);
OCR pages/s; the peak RSS of the 1,000,000-cell XLSX parse child (goal < 400 MB); one
one-page parse at a time forked from fork servers with and without huge pages and spawned,
and a bare fork + exit of a process the fork server's size both ways (bench.parse.fork_cost).

Inputs: the shared corpus (../shared/corpus) when present, else generated documents. Rounds
run one after the other so active-only dedupe never joins two submits of a file.

The scenarios are in bench.parse, what the benchmarks share in bench.harness.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench.harness.documents import big_xlsx, book_pdf, one_page_pdfs, scanned_pdfs, text_pdfs
from bench.harness.output import OUT_DIR, log, write_text
from bench.harness.procfs import page_fault_us
from bench.harness.stacks import API_KEY, bench_stack, running
from bench.harness.stats import median_or_zero
from bench.parse.all_cores import RawOnEveryCore
from bench.parse.check import PackageMismatch, Tally, check_jobs
from bench.parse.in_process import in_process, launch_costs, raw_extraction
from bench.parse.memory import ChildSampler, peak_memory_mb, replica_memory
from bench.parse.redis_commands import redis_per_job
from bench.parse.report import print_report
from bench.parse.stack_cpu import stack_cpu_seconds, usable_cores
from bench.parse.through_stack import Made, concurrent_sdk_jobs, lone_latencies, through_stack
from docparse.local.stack import LocalStack


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--book-pages", type=int, default=300)
    parser.add_argument("--one-page-jobs", type=int, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--lone-samples", type=int, default=10, help="per round and stack")
    parser.add_argument(
        "--launch", default="fork_server,spawn", help="stacks to compare (DOCPARSE_PARSE_LAUNCH)"
    )
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="also run a fork_server stack named `baseline` whose processes import the code of "
        "another checkout (DIR, e.g. main's): before/after of a change in the same run. Run "
        "from a directory that holds no checkout (python -m puts the working directory first)",
    )
    parser.add_argument("--skip-xlsx", action="store_true")
    parser.add_argument("--skip-ocr", action="store_true")
    parser.add_argument(
        "--no-tables",
        action="store_true",
        help="turn PDF table detection off (DOCPARSE_PDF_TABLES=false) to see what it costs",
    )
    args = parser.parse_args()
    return args


Rates = dict[str, list[float]]


def add(rates: Rates, key: str, value: float) -> None:
    rates.setdefault(key, []).append(value)


def in_process_round(rates: Rates, texts: list[Path], book: Path, tables: bool) -> None:
    """Raw get_text and the reading package in this process: pages/s and CPU per page."""
    for name, paths in (("corpus", texts), ("book", [book])):
        cpu_started = time.process_time()
        pages, seconds = raw_extraction(paths, 1)
        add(rates, f"raw_{name}", pages / seconds)
        add(rates, f"raw_{name}_cpu_ms_per_page", (time.process_time() - cpu_started) / pages * 1e3)
        cpu_started = time.process_time()
        pages, seconds = in_process(paths, 1, tables)
        add(rates, f"package_{name}", pages / seconds)
        cpu = (time.process_time() - cpu_started) / pages * 1e3
        add(rates, f"package_{name}_cpu_ms_per_page", cpu)
        add(
            rates, f"package_{name}_vs_raw", rates[f"package_{name}"][-1] / rates[f"raw_{name}"][-1]
        )
    # The same without parser_svc/parsers/native: each page run twice (text, then drawings).
    for name, paths in (("corpus", texts), ("book", [book])):
        pages, seconds = in_process(paths, 1, tables, single_pass=False)
        add(rates, f"package_{name}_two_runs_vs_raw", pages / seconds / rates[f"raw_{name}"][-1])


def stack_round(
    rates: Rates,
    mode: str,
    stack: LocalStack,
    texts: list[Path],
    memos: tuple[list[Path], list[Path]],
    args: argparse.Namespace,
    made: Made,
) -> None:
    """The text PDFs, the one-page jobs (memos[0]) and the lone jobs (memos[1]) through one
    stack: rates, CPU per page and per job, against raw's in this process and on every core."""
    address = stack.gateway_addresses[0]
    cpu_before = stack_cpu_seconds(stack)
    pages, seconds, failed = through_stack(address, texts, 1, API_KEY, made)
    stack_cpu = stack_cpu_seconds(stack) - cpu_before
    assert not failed, failed
    # Memory is sampled in a run of its own, never a timed one: the sampler walks /proc and
    # reads every child's smaps_rollup every 3 ms, a thread that takes a share of the cores
    # from the stack (a quarter of the one-page jobs/s, 39 vs 54; the text PDFs 0.49 vs 0.70
    # of raw in the run that found it).
    sampler = ChildSampler([c.pid for c in stack.parsers])
    through_stack(address, texts, 1, API_KEY, made)
    rss, private, seen = sampler.stop()
    if seen:
        add(rates, f"{mode}_child_rss_mb", rss)
        add(rates, f"{mode}_child_private_mb", private)
    add(rates, f"{mode}_stack_pages", pages / seconds)
    add(rates, f"{mode}_stack_vs_raw", pages / seconds / rates["raw_corpus"][-1])
    add(rates, f"{mode}_stack_vs_raw_all_cores", pages / seconds / rates["raw_all_cores"][-1])
    # CPU per page through the stack against raw get_text's, and the share of raw the stack
    # could reach at most with every core busy all the time (against raw on a core of its
    # own: CPU time, which a loaded machine does not stretch).
    raw_cpu = rates["raw_corpus_cpu_ms_per_page"][-1] / 1e3
    add(rates, f"{mode}_stack_cpu_ms_per_page", stack_cpu / pages * 1e3)
    add(rates, f"{mode}_stack_cpu_vs_raw", stack_cpu / pages / raw_cpu)
    add(rates, f"{mode}_stack_ceiling_vs_raw", usable_cores() * raw_cpu * pages / stack_cpu)
    one_page, lone = memos
    cpu_started = time.process_time()
    raw_docs, raw_s = raw_extraction(one_page, 1)
    add(rates, "raw_one_page_docs", raw_docs / raw_s)
    add(rates, "raw_one_page_cpu_ms", (time.process_time() - cpu_started) / raw_docs * 1e3)
    add(rates, "page_fault_us", page_fault_us())
    cpu_before = stack_cpu_seconds(stack)
    jobs, seconds = concurrent_sdk_jobs(address, one_page, args.clients, API_KEY, made)
    add(rates, f"{mode}_one_page_cpu_ms", (stack_cpu_seconds(stack) - cpu_before) / jobs * 1e3)
    add(rates, f"{mode}_one_page_jobs", jobs / seconds)
    add(rates, f"{mode}_one_page_vs_all_cores", jobs / seconds / rates["raw_one_page_all"][-1])
    latencies, status = lone_latencies(address, lone, API_KEY, made)
    rates.setdefault(f"{mode}_lone_ms", []).extend(x * 1000 for x in latencies)
    rates.setdefault(f"{mode}_status_ms", []).extend(x * 1000 for x in status)


def check(stack: LocalStack, made: Made, tally: Tally, where: str) -> None:
    """Every package in `made` downloaded and checked (bench.parse.check); ends the run on a
    mismatch. `made` is emptied."""
    log(f"checking {len(made)} packages {where}")
    problems = len(tally.problems)
    check_jobs(stack.gateway_addresses[0], API_KEY, made, tally)
    made.clear()
    if len(tally.problems) > problems:
        raise PackageMismatch(where, tally.problems[problems:])


def main() -> None:
    args = parse_args()
    tables = not args.no_tables
    modes = args.launch.split(",")
    load_start = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-parse-"))
    texts, scans = text_pdfs(work), scanned_pdfs(work)
    book = work / "book.pdf"
    book.write_bytes(book_pdf(args.book_pages))
    cores = usable_cores()
    result: dict[str, object] = {
        "text_pdf_files": len(texts),
        "rounds": args.rounds,
        "cores": cores,
    }

    if not args.skip_xlsx:
        # The 1M-cell peak first, while this process has no other children.
        peak_mb, xlsx_s, xlsx_event = peak_memory_mb(big_xlsx(work))
        result |= {
            "xlsx_1m_peak_rss_mb": round(peak_mb, 1),
            "xlsx_1m_seconds": round(xlsx_s, 2),
            "xlsx_1m_child_said": xlsx_event,
        }

    # Before any stack starts, so that nothing else competes with these one-at-a-time parses.
    result["launch"] = launch_costs(work, 15)
    raw_pool = RawOnEveryCore(cores, texts[:1])

    env = {"DOCPARSE_PDF_TABLES": "true" if tables else "false"}
    stacks = {
        mode: bench_stack(
            work / mode, replicas=2, extra_env={**env, "DOCPARSE_PARSE_LAUNCH": mode}, auth=True
        )
        for mode in modes
    }
    if args.baseline:
        baseline_env = {"DOCPARSE_PARSE_LAUNCH": "fork_server", "PYTHONPATH": args.baseline}
        stacks["baseline"] = bench_stack(
            work / "baseline", replicas=2, extra_env={**env, **baseline_env}, auth=True
        )
        modes.append("baseline")
    rates: Rates = {}
    made: dict[str, Made] = {mode: [] for mode in modes}
    tallies = {mode: Tally() for mode in modes}

    with running(stacks.values()):
        for mode, stack in stacks.items():  # warm-up: connections, fork servers, first children
            address = stack.gateway_addresses[0]
            through_stack(address, texts[:1], 1, API_KEY, made[mode])
            lone_latencies(address, one_page_pdfs(work, 4, f"warm-{mode}"), API_KEY, made[mode])
        time.sleep(2)
        idle = {mode: replica_memory(stack) for mode, stack in stacks.items()}
        for round_no in range(args.rounds):
            order = modes if round_no % 2 == 0 else modes[::-1]
            in_process_round(rates, texts, book, tables)
            pages_per_s, cpu_per_page = raw_pool.run(texts)
            add(rates, "raw_all_cores", pages_per_s)
            add(rates, "raw_all_cores_cpu_ms_per_page", cpu_per_page * 1e3)
            for mode in order:
                memos = one_page_pdfs(work, args.one_page_jobs, f"{mode}{round_no}")
                add(rates, "raw_one_page_all", raw_pool.run(memos)[0])
                lone = one_page_pdfs(work, args.lone_samples, f"lone-{mode}{round_no}")
                stack_round(rates, mode, stacks[mode], texts, (memos, lone), args, made[mode])
            for mode in order:  # outside the timed parts
                check(stacks[mode], made[mode], tallies[mode], f"of round {round_no + 1} ({mode})")
        if "fork_server" in stacks:
            redis_paths = one_page_pdfs(work, 60, "redis")
            result["redis_fork_server"] = redis_per_job(
                stacks["fork_server"], redis_paths, args.clients, API_KEY, made["fork_server"]
            )
            check(stacks["fork_server"], made["fork_server"], tallies["fork_server"], "(Redis)")
        if not args.skip_ocr:
            mode, stack = next(iter(stacks.items()))
            address = stack.gateway_addresses[0]
            ocr_pages, ocr_s, ocr_failures = through_stack(address, scans, 1, API_KEY, made[mode])
            result |= {"ocr_pages_per_s": round(ocr_pages / ocr_s, 3), "ocr_failures": ocr_failures}
            check(stack, made[mode], tallies[mode], f"of the scans ({mode})")
    raw_pool.close()

    medians = {key: round(median_or_zero(values), 3) for key, values in rates.items()}
    result |= {
        "medians": medians,
        "per_round": {
            k: [round(v, 2) for v in vs]
            for k, vs in rates.items()
            if not k.endswith(("_lone_ms", "_status_ms"))
        },
        "idle_memory_kb": idle,
        "checked": {mode: tally.as_dict() for mode, tally in tallies.items()},
        "book_pages": args.book_pages,
        "pdf_tables": tables,
        # Other processes' load skews every rate above; compare runs with similar numbers.
        "loadavg_1m_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
    }
    print_report(result, medians, idle, modes, args)
    write_text(OUT_DIR / "parse.json", json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
