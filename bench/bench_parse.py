"""Parse benchmark: run with `.venv/bin/python bench/bench_parse.py [--rounds N]`.

Two local stacks run side by side, identical but for how parse children start
(DOCPARSE_PARSE_LAUNCH): `fork_server` (forked from the pre-imported parser_svc.zygote) and
`spawn` (a fresh interpreter per job, the way before issue 9). Each has 2 parser_svc replicas
(2 concurrent parses each), 1 gateway and its own embedded Redis. Per round, alternating the
order of the stacks:

1. Text PDFs (the corpus's text_pdf/) through each stack (submit → SUCCEEDED, 8 client
   threads) vs pymupdf's raw get_text of the same files in this one process: pages/s and
   their ratio. The reading package parsed in this process (no stack) is shown too.
2. A generated book (hundreds of pages of running text, headings, footnotes): raw get_text vs
   the reading package in this process.
3. 60 one-page PDFs, 8 concurrent SDK clients (docparse.client.Client.parse) through the
   gateway: jobs/s, next to raw pymupdf open + get_text of the same files (documents/s).
4. A lone one-page PDF, submit → SUCCEEDED through the gateway with the SDK, next to a
   GetStatus round trip through the same gateway.

Then: resident memory per replica (parser_svc + its fork server) at idle, and per running
parse (each parse child's peak RSS and its private part, sampled from /proc); Redis commands
(round trips) and PUBLISH messages per one-page job (MONITOR on the fork_server stack's Redis;
30 jobs one after another, then 30 from 8 concurrent clients);
OCR pages/s; the peak RSS of the 1,000,000-cell XLSX parse child (goal < 400 MB).

Inputs: the shared corpus (../shared/corpus) when present, else generated documents. Rounds
run one after the other so active-only dedupe never joins two submits of a file.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pymupdf  # noqa: E402
import redis  # noqa: E402

from docparse.client import Client  # noqa: E402
from docparse.local.stack import LocalStack  # noqa: E402
from docparse.v1 import job_pb2, parser_service_pb2  # noqa: E402
from parser_svc.parse_child import parse  # noqa: E402
from parser_svc.parsers import ParseOptions  # noqa: E402
from parser_svc.sandbox import Limits, run_parse  # noqa: E402
from parser_svc.zygote import MODULES, ForkServer  # noqa: E402
from parser_svc.zygote import warm_up as zygote_warm_up  # noqa: E402
from tests import fixtures  # noqa: E402
from tests.helpers import make_pdf, stub, wait_terminal  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"


def text_pdfs(work: Path) -> list[Path]:
    found = sorted((CORPUS / "text_pdf").glob("*.pdf"))
    if found:
        return found
    paths = []
    for i in range(6):
        path = work / f"generated-{i}.pdf"
        path.write_bytes(make_pdf(40, f"generated {i}"))
        paths.append(path)
    return paths


def scanned_pdfs(work: Path) -> list[Path]:
    found = sorted((CORPUS / "scanned_pdf").glob("*.pdf"))
    if found:
        return found
    path = work / "scan.pdf"
    path.write_bytes(fixtures.image_only_pdf())
    return [path]


def raw_extraction(paths: list[Path], rounds: int) -> tuple[int, float]:
    pages = 0
    started = time.perf_counter()
    for _ in range(rounds):
        for path in paths:
            with pymupdf.open(path) as doc:
                for page in doc:
                    page.get_text()
                    pages += 1
    return pages, time.perf_counter() - started


def in_process(paths: list[Path], rounds: int, tables: bool) -> tuple[int, float]:
    pages = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for path in paths:
                options = ParseOptions.defaults(assets_dir=Path(tmp) / "assets", pdf_tables=tables)
                package = parse("pdf", path.read_bytes(), lambda *_: None, options)
                package.SerializeToString()
                pages += len(package.pages)
    return pages, time.perf_counter() - started


def through_stack(address: str, paths: list[Path], rounds: int) -> tuple[int, float, list[str]]:
    contents = [(path.name, path.read_bytes()) for path in paths]

    def one(item: tuple[str, bytes]) -> job_pb2.Job:
        channel, s = stub(address)
        with channel:
            job = s.SubmitJob(
                parser_service_pb2.SubmitJobRequest(file_name=item[0], content=item[1]), timeout=60
            ).job
        return wait_terminal(address, job.job_id, timeout=600)

    pages = 0
    failures = []
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(rounds):
            for job in pool.map(one, contents):
                if job.state == job_pb2.STATE_SUCCEEDED:
                    pages += job.result.page_count
                else:
                    failures.append(f"{job.file_name}: {job.error.reason}")
    return pages, time.perf_counter() - started, failures


def peak_memory_mb(xlsx: Path) -> tuple[float, float, str]:
    """Peak RSS (MB) and seconds of the parse child on the 1M-cell workbook."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "parser_svc.parse_child", "xlsx", str(xlsx),
             str(Path(tmp) / "out.pb"), "300", "2048"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        out, _ = proc.communicate(b"{}")
        seconds = time.perf_counter() - started
    # The largest child this process has waited for: it has had no other child yet.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    last = out.decode().strip().splitlines()[-1]
    return usage.ru_maxrss / 1024, seconds, last


_TEXT = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there one all we their has been if more when will would "
    "who so no out up into do time can only other new some could these two may first then any "
    "like now my such make over our even most me state after also made many before must through "
    "back years where much your way well down should because each just those people how too "
    "little us good very world long here between both life being under never day same another "
    "know while last might great old year off come since against go came right used take three"
)
_WORDS = _TEXT.split()


def book_pdf(pages: int, seed: int = 7) -> bytes:
    """A book-like PDF: running text in justified paragraphs, chapter and section headings,
    running heads with page numbers, and footnotes under a short rule on 40% of the pages."""
    rng = random.Random(seed)

    def words(n: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(n))

    doc = pymupdf.open()
    chapter = 0
    for number in range(1, pages + 1):
        page = doc.new_page(width=420, height=630)
        page.insert_text((40, 30), "A Generated Book", fontsize=8, fontname="helv")
        page.insert_text((370, 30), str(number), fontsize=8, fontname="helv")
        y = 50.0
        if number % 12 == 1:
            chapter += 1
            title = f"Chapter {chapter}. {words(3).title()}"
            page.insert_text((40, y + 20), title, fontsize=16, fontname="hebo")
            y += 40
        notes = rng.random() < 0.4
        bottom = 520 if notes else 590
        while y < bottom - 40:
            if rng.random() < 0.15:
                heading = f"{chapter}.{rng.randint(1, 9)} {words(4).title()}"
                page.insert_text((40, y + 12), heading, fontsize=11, fontname="hebo")
                y += 22
            paragraph = words(rng.randint(60, 110)).capitalize() + "."
            box = pymupdf.Rect(40, y, 380, min(y + 110, bottom))
            page.insert_textbox(box, paragraph, fontsize=9.5, fontname="tiro", align=3)
            y += 115
        if notes:
            page.draw_line((40, 530), (160, 530), width=0.5)
            footnotes = f"1 {words(30)}.\n2 {words(20)}."
            page.insert_textbox(pymupdf.Rect(40, 535, 380, 600), footnotes, fontsize=7)
    data: bytes = doc.tobytes(garbage=3, deflate=True)
    return data


def one_page_pdfs(work: Path, count: int, tag: str) -> list[Path]:
    folder = work / f"one-page-{tag}"
    folder.mkdir(exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"memo-{tag}-{i}.pdf"
        path.write_bytes(make_pdf(1, f"memo {tag} {i}"))
        paths.append(path)
    return paths


def concurrent_sdk_jobs(address: str, paths: list[Path], clients: int) -> tuple[int, float]:
    """Each of `clients` threads has its own SDK client and parses files one after another."""
    queue = list(paths)
    lock = threading.Lock()
    done = 0

    def client_loop() -> None:
        nonlocal done
        with Client(address) as client:
            while True:
                with lock:
                    if not queue:
                        return
                    path = queue.pop()
                job = client.parse(path)
                assert job.state == job_pb2.STATE_SUCCEEDED, job
                with lock:
                    done += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done, time.perf_counter() - started


def lone_latencies(address: str, paths: list[Path]) -> tuple[list[float], list[float]]:
    """submit → SUCCEEDED of one file at a time, and GetStatus round trips of those jobs."""
    latencies, status = [], []
    with Client(address) as client:
        for path in paths:
            data = path.read_bytes()
            started = time.perf_counter()
            job = client.parse(data, file_name=path.name)
            latencies.append(time.perf_counter() - started)
            assert job.state == job_pb2.STATE_SUCCEEDED, job
            for _ in range(3):
                started = time.perf_counter()
                client.status(job.job_id)
                status.append(time.perf_counter() - started)
    return latencies, status


def _rss_kb(pid: int) -> tuple[int, int]:
    """Resident and private (unshared) kB of a process; (0, 0) once it is gone."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0, 0
    fields = {line.split(":")[0]: int(line.split()[1]) for line in rollup[1:] if ":" in line}
    return fields.get("Rss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def _children(parent: int) -> dict[int, bytes]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    found[int(entry.name)] = (entry / "cmdline").read_bytes()
            except (OSError, ValueError):
                continue
    return found


def replica_memory(stack: LocalStack) -> list[dict[str, int]]:
    out = []
    for child in stack.parsers:
        rss, _ = _rss_kb(child.pid)
        zygotes = [p for p, cmd in _children(child.pid).items() if b"parser_svc.zygote" in cmd]
        zygote_rss = _rss_kb(zygotes[0])[0] if zygotes else 0
        out.append({"parser_svc_kb": rss, "fork_server_kb": zygote_rss})
    return out


class ChildSampler:
    """Samples every parse child of the given replicas every few ms: peak RSS and private."""

    def __init__(self, parents: list[int]) -> None:
        self.parents = parents
        self.peaks: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for parent in self.parents:
                for pid, cmd in _children(parent).items():
                    if b"parser_svc.parse_child" in cmd:
                        rss, private = _rss_kb(pid)
                        old = self.peaks.get(pid, (0, 0))
                        self.peaks[pid] = (max(old[0], rss), max(old[1], private))
            self._stop.wait(0.003)

    def stop(self) -> tuple[float, float, int]:
        """Median peak RSS and private MB per child, and how many children were seen."""
        self._stop.set()
        self._thread.join()
        peaks = [p for p in self.peaks.values() if p[0]]
        if not peaks:
            return 0.0, 0.0, 0
        rss = statistics.median(p[0] for p in peaks) / 1024
        private = statistics.median(p[1] for p in peaks) / 1024
        return rss, private, len(peaks)


def redis_per_job(stack: LocalStack, paths: list[Path], clients: int) -> dict[str, float]:
    """Redis commands from clients (round trips; `bullmq_*`: those of BullMQ's queue, whose
    workers poll per parse slot), commands run inside scripts, and PUBLISH messages per
    one-page job, minus the same window's idle rate. Twice: the jobs one after another
    (`sequential_*`), then with `clients` concurrent SDK clients (`concurrent_*`)."""
    assert stack.redis_url is not None
    client = redis.Redis.from_url(stack.redis_url)
    counts: Counter[str] = Counter()
    marker = f"bench-stop-{os.getpid()}"

    def watch() -> None:
        with client.monitor() as monitor:
            for command in monitor.listen():
                text = command["command"]
                if marker in text:
                    return
                kind = "script" if command["client_type"] == "lua" else "client"
                counts[kind] += 1
                words = text.split(" ", 4)
                first_key = words[3:4] if words[0].upper() in ("EVALSHA", "EVAL") else words[1:2]
                if kind == "client" and ":bull:" in str(first_key):
                    counts["bullmq"] += 1
                if text.split(" ", 1)[0].upper() == "PUBLISH":
                    counts["publish"] += 1

    def window(action: object) -> tuple[Counter[str], float]:
        counts.clear()
        thread = threading.Thread(target=watch)
        thread.start()
        time.sleep(0.2)  # MONITOR is on before the window starts
        counts.clear()
        started = time.perf_counter()
        action() if callable(action) else time.sleep(float(str(action)))
        seconds = time.perf_counter() - started
        time.sleep(1.5)  # what a job's end leaves (the event hub's batched UNSUBSCRIBE)
        client.echo(marker)
        thread.join(10)
        return Counter(counts), seconds + 1.5

    half = len(paths) // 2
    address = stack.gateway_addresses[0]
    with Client(address) as sdk:
        sequential = window(lambda: [sdk.parse(p) for p in paths[:half]])
    concurrent = window(lambda: concurrent_sdk_jobs(address, paths[half:], clients))
    idle, idle_s = window(sequential[1] - 1.5)
    client.close()
    per_job = {}
    for name, (busy, busy_s), jobs in (
        ("sequential", sequential, half),
        ("concurrent", concurrent, len(paths) - half),
    ):
        for kind in ("client", "bullmq", "script", "publish"):
            extra = busy[kind] - idle[kind] * busy_s / idle_s
            per_job[f"{name}_{kind}_per_job"] = round(extra / jobs, 1)
    per_job["idle_client_per_s"] = round(idle["client"] / idle_s, 1)
    return per_job


def launch_costs(work: Path, jobs: int) -> dict[str, float]:
    """One one-page PDF parsed `jobs` times through parser_svc.sandbox.run_parse, one at a
    time, forked from a fork server and spawned fresh: wall ms per parse and the children's
    CPU ms per parse (start-up or fork, the parse, exit); plus a bare fork + exit of the
    fork server's process size, to split the fork from the parse."""
    source = work / "launch.pdf"
    source.write_bytes(make_pdf(1, "launch"))
    limits = Limits(60, 60, 2048)

    async def no_progress(done: int, total: int, stage: str) -> None:
        return None

    async def measure(server: ForkServer | None) -> tuple[float, float]:
        walls = []
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(jobs):
            started = time.perf_counter()
            outcome = await run_parse(
                "pdf", source, work / "launch.pb", limits, no_progress, None, server
            )
            walls.append(time.perf_counter() - started)
            assert not outcome.reason, outcome
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return statistics.median(walls) * 1000, cpu / jobs * 1000

    async def both() -> dict[str, float]:
        server = ForkServer()
        server.start()
        await measure(server)  # waits for the fork server's imports
        out: dict[str, list[float]] = {}
        for _ in range(2):
            for name, chosen in (("fork_server", server), ("spawn", None)):
                wall, cpu = await measure(chosen)
                out.setdefault(f"{name}_wall_ms", []).append(wall)
                out.setdefault(f"{name}_child_cpu_ms", []).append(cpu)
        server.close()
        return {key: round(statistics.median(values), 1) for key, values in out.items()}

    costs = asyncio.run(both())
    # A bare fork + exit of a process as large as the fork server: this process, after
    # importing and warming up what the fork server does. The cost grows with its anonymous
    # memory (page tables copied at fork, torn down at exit).
    for module in MODULES:
        importlib.import_module(module)
    zygote_warm_up()
    rollup = Path("/proc/self/smaps_rollup").read_text().splitlines()
    anon_kb = next(int(line.split()[1]) for line in rollup if line.startswith("Anonymous:"))
    costs["fork_server_size_anon_mb"] = round(anon_kb / 1024, 1)
    started = time.perf_counter()
    for _ in range(20):
        pid = os.fork()  # the child only calls _exit: safe whatever threads this process has
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    costs["bare_fork_exit_ms"] = round((time.perf_counter() - started) / 20 * 1000, 2)
    return costs


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--book-pages", type=int, default=300)
    parser.add_argument("--one-page-jobs", type=int, default=60)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--lone-samples", type=int, default=10, help="per round and stack")
    parser.add_argument(
        "--launch", default="fork_server,spawn", help="stacks to compare (DOCPARSE_PARSE_LAUNCH)"
    )
    parser.add_argument("--skip-xlsx", action="store_true")
    parser.add_argument("--skip-ocr", action="store_true")
    parser.add_argument(
        "--no-tables",
        action="store_true",
        help="turn PDF table detection off (DOCPARSE_PDF_TABLES=false) to see what it costs",
    )
    args = parser.parse_args()
    tables = not args.no_tables
    modes = args.launch.split(",")
    load_start = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-parse-"))
    texts, scans = text_pdfs(work), scanned_pdfs(work)
    book = work / "book.pdf"
    book.write_bytes(book_pdf(args.book_pages))
    result: dict[str, object] = {"text_pdf_files": len(texts), "rounds": args.rounds}

    if not args.skip_xlsx:
        big = CORPUS / "xlsx" / "styles_1M.xlsx"
        if not big.is_file():
            big = fixtures.big_xlsx(work / "big.xlsx")
        # The 1M-cell peak first, while this process has no other children.
        peak_mb, xlsx_s, xlsx_event = peak_memory_mb(big)
        result |= {
            "xlsx_1m_peak_rss_mb": round(peak_mb, 1),
            "xlsx_1m_seconds": round(xlsx_s, 2),
            "xlsx_1m_child_said": xlsx_event,
        }

    # Before any stack starts, so that nothing else competes with these one-at-a-time parses.
    result["launch"] = launch_costs(work, 15)

    env = {"DOCPARSE_PDF_TABLES": "true" if tables else "false"}
    stacks = {
        mode: LocalStack(
            work / mode,
            replicas=2,
            gateways=1,
            env="bench",
            extra_env={**env, "DOCPARSE_PARSE_LAUNCH": mode},
        )
        for mode in modes
    }
    rates: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        rates.setdefault(key, []).append(value)

    try:
        for stack in stacks.values():
            stack.start()
        for stack in stacks.values():  # warm-up: connections, fork servers, first children
            address = stack.gateway_addresses[0]
            through_stack(address, texts[:1], 1)
            lone_latencies(address, one_page_pdfs(work, 4, f"warm{id(stack)}"))
        time.sleep(2)
        idle = {mode: replica_memory(stack) for mode, stack in stacks.items()}
        for round_no in range(args.rounds):
            order = modes if round_no % 2 == 0 else modes[::-1]
            pages, seconds = raw_extraction(texts, 1)
            add("raw_corpus", pages / seconds)
            pages, seconds = in_process(texts, 1, tables)
            add("package_corpus", pages / seconds)
            pages, seconds = raw_extraction([book], 1)
            add("raw_book", pages / seconds)
            pages, seconds = in_process([book], 1, tables)
            add("package_book", pages / seconds)
            add("package_corpus_vs_raw", rates["package_corpus"][-1] / rates["raw_corpus"][-1])
            add("package_book_vs_raw", rates["package_book"][-1] / rates["raw_book"][-1])
            for mode in order:
                stack = stacks[mode]
                address = stack.gateway_addresses[0]
                sampler = ChildSampler([c.pid for c in stack.parsers])
                pages, seconds, failed = through_stack(address, texts, 1)
                assert not failed, failed
                add(f"{mode}_stack_pages", pages / seconds)
                add(f"{mode}_stack_vs_raw", pages / seconds / rates["raw_corpus"][-1])
                memos = one_page_pdfs(work, args.one_page_jobs, f"{mode}{round_no}")
                raw_docs, raw_s = raw_extraction(memos, 1)
                jobs, seconds = concurrent_sdk_jobs(address, memos, args.clients)
                add(f"{mode}_one_page_jobs", jobs / seconds)
                add("raw_one_page_docs", raw_docs / raw_s)
                rss, private, seen = sampler.stop()
                if seen:
                    add(f"{mode}_child_rss_mb", rss)
                    add(f"{mode}_child_private_mb", private)
                lone = one_page_pdfs(work, args.lone_samples, f"lone-{mode}{round_no}")
                latencies, status = lone_latencies(address, lone)
                rates.setdefault(f"{mode}_lone_ms", []).extend(x * 1000 for x in latencies)
                rates.setdefault(f"{mode}_status_ms", []).extend(x * 1000 for x in status)
        if "fork_server" in stacks:
            redis_paths = one_page_pdfs(work, 60, "redis")
            result["redis_fork_server"] = redis_per_job(
                stacks["fork_server"], redis_paths, args.clients
            )
        if not args.skip_ocr:
            address = next(iter(stacks.values())).gateway_addresses[0]
            ocr_pages, ocr_s, ocr_failures = through_stack(address, scans, 1)
            result |= {"ocr_pages_per_s": round(ocr_pages / ocr_s, 3), "ocr_failures": ocr_failures}
    finally:
        for stack in stacks.values():
            stack.stop()

    medians = {key: round(_median(values), 3) for key, values in rates.items()}
    result |= {
        "medians": medians,
        "per_round": {k: [round(v, 2) for v in vs] for k, vs in rates.items() if "_ms" not in k},
        "idle_memory_kb": idle,
        "book_pages": args.book_pages,
        "pdf_tables": tables,
        # Other processes' load skews every rate above; compare runs with similar numbers.
        "loadavg_1m_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
    }
    m = medians
    print(f"text PDFs: {len(texts)} files; book: {args.book_pages} pages; {args.rounds} rounds")
    print(f"  raw pymupdf get_text, corpus     : {m['raw_corpus']:8.1f} pages/s")
    print(f"  reading package in process       : {m['package_corpus']:8.1f} pages/s"
          f"  = {m['package_corpus_vs_raw']:.2f} of raw (goal 0.7)")  # fmt: skip
    print(f"  raw pymupdf get_text, book       : {m['raw_book']:8.1f} pages/s")
    print(f"  reading package in process, book : {m['package_book']:8.1f} pages/s"
          f"  = {m['package_book_vs_raw']:.2f} of raw (goal 0.7)")  # fmt: skip
    for mode in modes:
        print(f"[{mode}]")
        print(f"  text PDFs through the stack      : {m[f'{mode}_stack_pages']:8.1f} pages/s"
              f"  = {m[f'{mode}_stack_vs_raw']:.2f} of raw (goal 0.8)")  # fmt: skip
        print(f"  one-page jobs, {args.clients} clients         : "
              f"{m[f'{mode}_one_page_jobs']:8.1f} jobs/s (goal 60; raw pymupdf "
              f"{m['raw_one_page_docs']:.0f} documents/s)")  # fmt: skip
        print(f"  lone one-page submit→SUCCEEDED   : p50 {m[f'{mode}_lone_ms']:6.1f} ms (goal 40;"
              f" GetStatus round trip p50 {m[f'{mode}_status_ms']:.1f} ms)")  # fmt: skip
        if f"{mode}_child_rss_mb" in m:
            print(f"  per running parse (median peak)  : RSS {m[f'{mode}_child_rss_mb']:.0f} MB,"
                  f" private {m[f'{mode}_child_private_mb']:.0f} MB")  # fmt: skip
        for i, replica in enumerate(idle[mode]):
            print(f"  replica {i} at idle               : parser_svc "
                  f"{replica['parser_svc_kb'] / 1024:.0f} MB + fork server "
                  f"{replica['fork_server_kb'] / 1024:.0f} MB RSS")  # fmt: skip
    launch = result["launch"]
    assert isinstance(launch, dict)
    print(f"one parse of a one-page PDF, alone (run_parse): forked {launch['fork_server_wall_ms']}"
          f" ms wall / {launch['fork_server_child_cpu_ms']} ms child CPU; spawned "
          f"{launch['spawn_wall_ms']} / {launch['spawn_child_cpu_ms']}; bare fork + exit of "
          f"the fork server's size ({launch['fork_server_size_anon_mb']} MB anonymous) "
          f"{launch['bare_fork_exit_ms']} ms")  # fmt: skip
    if "redis_fork_server" in result:
        print(f"Redis per one-page job (fork_server): {result['redis_fork_server']}")
    if "ocr_pages_per_s" in result:
        print(f"OCR: {result['ocr_pages_per_s']} image-only pages/s")
    if "xlsx_1m_peak_rss_mb" in result:
        print(f"1M-cell XLSX parse: peak RSS {result['xlsx_1m_peak_rss_mb']} MB (goal < 400)")
    out = ROOT / "var" / "bench" / "parse.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
