"""Parse benchmark: run with `.venv/bin/python bench/bench_parse.py [--rounds N]`.

1. Text PDFs through the whole stack (submit → SUCCEEDED, one parser_svc replica with its
   default 2 concurrent parses, embedded Redis, a gateway) vs pymupdf's raw text extraction of
   the same files in this one process, in the same run: pages per second and their ratio
   (goal >= 0.7). The in-process reading-package parse (no stack) is shown too, to split the
   cost between parsing and the service around it.
2. OCR pages per second (image-only pages through the stack).
3. Peak resident memory of the 1,000,000-cell XLSX parse (the parse child alone, its
   ru_maxrss; goal < 400 MB).

The three text measurements alternate round by round (load from other processes hits them
alike). Inputs: the shared corpus (../shared/corpus: text_pdf/, scanned_pdf/,
xlsx/styles_1M.xlsx) when present, else generated documents. Each round submits every file
once; rounds run one after the other so active-only dedupe never joins two submits of a file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pymupdf  # noqa: E402

from docparse.stack import LocalStack  # noqa: E402
from docparse.v1 import job_pb2, parser_service_pb2  # noqa: E402
from parser_svc.parse_child import parse  # noqa: E402
from parser_svc.parsers import ParseOptions  # noqa: E402
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
                options = ParseOptions(assets_dir=Path(tmp) / "assets", pdf_tables=tables)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--no-tables",
        action="store_true",
        help="turn PDF table detection off (DOCPARSE_PDF_TABLES=false) to see what it costs",
    )
    args = parser.parse_args()
    tables = not args.no_tables
    load_start = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-parse-"))
    texts, scans = text_pdfs(work), scanned_pdfs(work)
    big = CORPUS / "xlsx" / "styles_1M.xlsx"
    if not big.is_file():
        big = fixtures.big_xlsx(work / "big.xlsx")

    # The 1M-cell peak first, while this process has no other children.
    peak_mb, xlsx_s, xlsx_event = peak_memory_mb(big)

    env = {"DOCPARSE_PDF_TABLES": "true" if tables else "false"}
    raw_pages = local_pages = stack_pages = 0
    raw_s = local_s = stack_s = 0.0
    failures: list[str] = []
    with LocalStack(work / "stack", replicas=1, gateways=1, env="bench", extra_env=env) as stack:
        address = stack.gateway_addresses[0]
        through_stack(address, texts[:1], 1)  # warm-up: connections, first child
        # Round by round, so that a change in the machine's load hits all three alike.
        for _ in range(args.rounds):
            pages, seconds = raw_extraction(texts, 1)
            raw_pages, raw_s = raw_pages + pages, raw_s + seconds
            pages, seconds = in_process(texts, 1, tables)
            local_pages, local_s = local_pages + pages, local_s + seconds
            pages, seconds, failed = through_stack(address, texts, 1)
            stack_pages, stack_s = stack_pages + pages, stack_s + seconds
            failures += failed
        ocr_pages, ocr_s, ocr_failures = through_stack(address, scans, 1)

    raw_rate, stack_rate = raw_pages / raw_s, stack_pages / stack_s
    result = {
        "text_pdf_files": len(texts),
        "rounds": args.rounds,
        "pdf_tables": tables,
        "raw_pymupdf_pages_per_s": round(raw_rate, 1),
        "in_process_package_pages_per_s": round(local_pages / local_s, 1),
        "stack_pages_per_s": round(stack_rate, 1),
        "stack_vs_raw": round(stack_rate / raw_rate, 3),
        "ocr_pages": ocr_pages,
        "ocr_pages_per_s": round(ocr_pages / ocr_s, 3),
        "xlsx_1m_peak_rss_mb": round(peak_mb, 1),
        "xlsx_1m_seconds": round(xlsx_s, 2),
        "failures": failures + ocr_failures,
        # Other processes' load skews every rate above; compare runs with similar numbers.
        "loadavg_1m_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
    }
    print(
        f"text PDFs: {len(texts)} files x {args.rounds} rounds = {raw_pages} pages "
        f"(table detection {'on' if tables else 'off'})"
    )
    print(f"  pymupdf raw get_text, one process : {raw_rate:8.1f} pages/s")
    print(f"  reading package, in process      : {local_pages / local_s:8.1f} pages/s")
    print(f"  through the stack (submit→done)  : {stack_rate:8.1f} pages/s")
    print(f"  stack / raw                      : {stack_rate / raw_rate:8.3f}  (goal >= 0.7)")
    print(f"OCR: {ocr_pages} image-only pages in {ocr_s:.1f} s = {ocr_pages / ocr_s:.3f} pages/s")
    print(f"1M-cell XLSX parse: peak RSS {peak_mb:.0f} MB (goal < 400), {xlsx_s:.1f} s")
    print(f"  child said: {xlsx_event}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
