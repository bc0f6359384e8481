"""OCR benchmark: run with `.venv/bin/python -m bench.bench_ocr [--pages N] [--dpi 200]`.

Generated ground truth (tests/fixtures/scans.py: known text in en, de, fr, es, ru, zh, ja, ar,
scanned at --dpi with skew, noise and JPEG artefacts) read by each candidate on the same page
images in the same run, one page at a time:

- `tesseract-cli`: Debian's `tesseract` command, one thread (OMP_THREAD_LIMIT=1), told the
  page's language: what a user would run instead of docparse (process start and model load
  included, as a user pays them);
- `tesseract`: the same engine in-process through tesserocr, model loaded once, one thread,
  told the language: the raw engine speed;
- `rapidocr`: RapidOCR (PP-OCRv4 Chinese + English, the wheel's models), one thread, no
  idle spinning: the engine docparse used before;
- `docparse`: the PDF parser as the parse child runs it (render, script detection without a
  hint, tesseract), in this process;
- `stack`: a local stack (1 replica, its default parse concurrency = the CPUs it may use),
  16 Latin pages submitted as one-page PDFs at once through the gateway: pages/s end to end,
  without and with a language hint, in rounds that alternate with the raw engine and the CLI
  on the same pages (ratios per round, medians shown; unhinted goes first in odd rounds,
  hinted in even ones); then every language's pages once;
- `scripts` (`--script-pages N`, 0: skip; `--only-scripts`: nothing else): per language, so per
  script, N pages (other seeds) read in each round by the CLI told the language and through
  that stack one job at a time (submit to SUCCEEDED), without and with the language hint; the
  three take turns at going first; pages/s and the ratios to the CLI per round, medians shown,
  and the CER of each;
- `long scan` (`--long-scan N`): one N-page Latin scan as one job, through that stack (its
  pages read on as many threads as the replica has CPUs) and through a second stack whose
  replica reads them on one thread (`DOCPARSE_OCR_PAGE_THREADS=1`, the before), alternating
  with the raw engine on the same pages.

CER = character edit distance / reference length (whitespace collapsed; no whitespace for zh
and ja); WER = word edit distance / reference words (split on whitespace: glued words are
errors). Prints a table and writes var/bench/ocr.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# One OpenMP thread per engine, set before anything loads an OpenMP runtime.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

import numpy as np
from PIL import Image

from bench.harness.jobs import run_job
from bench.harness.output import OUT_DIR, write_text
from bench.harness.stacks import bench_stack
from docparse.client import Client
from docparse.v1 import job_pb2, parser_service_pb2
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions, ocr
from parser_svc.parsers.ocr_rapid import rapidocr_lines
from tests.fixtures.scans import NO_SPACES, TEXTS, Scan, cer, scan, scans_pdf, wer

LATIN = ("en", "de", "fr", "es")


def grey(page: Scan) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(page.image)).convert("L"))


def tesseract_cli(pages: list[Scan], work: Path) -> list[tuple[str, float]]:
    out = []
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    for i, page in enumerate(pages):
        path = work / f"page-{i}.png"
        Image.open(io.BytesIO(page.image)).save(path)
        model = ocr.model_for(page.language) or "eng"
        started = time.perf_counter()
        text = subprocess.run(
            ["tesseract", str(path), "-", "-l", model],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        out.append((text, time.perf_counter() - started))
    return out


def tesseract_api(pages: list[Scan]) -> list[tuple[str, float]]:
    out = []
    for page in pages:
        models = (ocr.model_for(page.language) or "eng",)
        image = grey(page)
        ocr._tesseract(image, models, exact=True)  # the model loaded, as in a warm worker
        started = time.perf_counter()
        lines, _confidence = ocr._tesseract(image, models, exact=True)
        out.append(("\n".join(line.text for line in lines), time.perf_counter() - started))
    return out


def rapidocr(pages: list[Scan]) -> list[tuple[str, float]]:
    out = []
    rapidocr_lines(grey(pages[0]), threads=1)  # load the models
    for page in pages:
        image = grey(page)
        started = time.perf_counter()
        lines = rapidocr_lines(image, threads=1)
        joiner = "" if page.language in NO_SPACES else " "
        out.append((joiner.join(line.text for line in lines), time.perf_counter() - started))
    return out


def docparse_in_process(pages: list[Scan]) -> list[tuple[str, float]]:
    out = []
    parse("pdf", pages[0].pdf, lambda *_: None, ParseOptions.defaults())  # load the Latin models
    for page in pages:
        started = time.perf_counter()
        package = parse("pdf", page.pdf, lambda *_: None, ParseOptions.defaults())
        out.append((package.pages[0].text, time.perf_counter() - started))
    return out


def through_stack(address: str, pages: list[Scan], hinted: bool = False) -> tuple[float, list[str]]:
    """All pages at once as one-page jobs; `hinted`: each names its language."""

    def one(item: tuple[int, Scan]) -> job_pb2.Job:
        request = parser_service_pb2.SubmitJobRequest(
            file_name=f"scan-{item[0]}-{item[1].language}.pdf",
            content=item[1].pdf,
            languages=[item[1].language] if hinted else [],
        )
        return run_job(address, request, resume=True)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(pages)) as pool:
        jobs = list(pool.map(one, enumerate(pages)))
    seconds = time.perf_counter() - started
    failures = [
        f"{j.file_name}: {j.error.reason}" for j in jobs if j.state != job_pb2.STATE_SUCCEEDED
    ]
    return sum(j.result.page_count for j in jobs) / seconds, failures


def one_by_one(address: str, pages: list[Scan], hinted: bool) -> list[tuple[str, float]]:
    """Each page as a one-page job, one job at a time (submit to SUCCEEDED timed; the result
    is fetched after the clock stops): its text and seconds."""
    out = []
    for i, page in enumerate(pages):
        request = parser_service_pb2.SubmitJobRequest(
            file_name=f"scan-{i}-{page.language}.pdf",
            content=page.pdf,
            languages=[page.language] if hinted else [],
        )
        started = time.perf_counter()
        job = run_job(address, request, resume=True)
        seconds = time.perf_counter() - started
        assert job.state == job_pb2.STATE_SUCCEEDED, (page.language, job.error)
        with Client(address) as client:
            out.append((client.result(job.job_id).pages[0].text, seconds))
    return out


def scripts_stack(address: str, args: argparse.Namespace, work: Path) -> dict[str, object]:
    """Per language (so per script): the same pages read by tesseract's CLI told the language
    and through the stack one job at a time, without and with the language hint, in rounds (the
    three take turns at going first); pages/s medians, ratios per round then medians, CER."""
    by_language: dict[str, dict[str, list[float]]] = {}
    for number in range(args.rounds):
        for language in args.languages.split(","):
            pages = [scan(language, args.dpi, 200 + seed) for seed in range(args.script_pages)]
            names = ["cli", "unhinted", "hinted"]
            order = names[number % 3 :] + names[: number % 3]
            rates: dict[str, float] = {}
            row = by_language.setdefault(language, {})
            for name in order:
                results = (
                    tesseract_cli(pages, work)
                    if name == "cli"
                    else one_by_one(address, pages, hinted=name == "hinted")
                )
                rates[name] = len(results) / sum(s for _t, s in results)
                errors = [
                    cer(p.truth, t, language) for p, (t, _s) in zip(pages, results, strict=True)
                ]
                row.setdefault(f"{name}_cer", []).append(statistics.mean(errors))
            for name, rate in rates.items():
                row.setdefault(name, []).append(rate)
            row.setdefault("unhinted_vs_cli", []).append(rates["unhinted"] / rates["cli"])
            row.setdefault("hinted_vs_cli", []).append(rates["hinted"] / rates["cli"])
    return {
        language: {key: round(statistics.median(values), 3) for key, values in row.items()}
        | {"rounds_unhinted_vs_cli": [round(v, 2) for v in row["unhinted_vs_cli"]]}
        | {"rounds_hinted_vs_cli": [round(v, 2) for v in row["hinted_vs_cli"]]}
        for language, row in by_language.items()
    }


def print_scripts(table: dict[str, object]) -> None:
    print(
        "| language | CLI pages/s | unhinted | hinted | unhinted / CLI | hinted / CLI "
        "| CER CLI / unhinted / hinted |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for language, row in table.items():
        r: dict[str, float] = row  # type: ignore[assignment]
        print(
            f"| {language} | {r['cli']:.2f} | {r['unhinted']:.2f} | {r['hinted']:.2f} "
            f"| {r['unhinted_vs_cli']:.2f} | {r['hinted_vs_cli']:.2f} "
            f"| {r['cli_cer']:.1%} / {r['unhinted_cer']:.1%} / {r['hinted_cer']:.1%} |"
        )


def long_scan(address: str, pages: list[Scan], threads_address: str) -> dict[str, float]:
    """One job of all `pages` through the one-thread stack and the threaded one, then the raw
    engine: pages/s of each."""
    data = scans_pdf(pages)
    rates = {}
    for name, target in (("one_thread", address), ("threads", threads_address)):
        request = parser_service_pb2.SubmitJobRequest(file_name="long-scan.pdf", content=data)
        started = time.perf_counter()
        job = run_job(target, request, resume=True)
        assert job.state == job_pb2.STATE_SUCCEEDED, job.error
        rates[name] = len(pages) / (time.perf_counter() - started)
    raw = tesseract_api(pages)
    rates["engine"] = len(raw) / sum(seconds for _t, seconds in raw)
    return rates


def long_scans(threads_address: str, args: argparse.Namespace, work: Path) -> dict[str, object]:
    pages = [scan(LATIN[i % 4], args.dpi, 300 + i) for i in range(args.long_scan)]
    one = {"DOCPARSE_OCR_PAGE_THREADS": "1"}
    rounds = []
    with bench_stack(work / "one-thread", replicas=1, extra_env=one) as stack:
        address = stack.gateway_addresses[0]
        through_stack(address, pages[:2])  # warm
        for _ in range(args.rounds):
            rounds.append(long_scan(address, pages, threads_address))
    return {
        "pages": len(pages),
        "rounds": [{k: round(v, 3) for k, v in r.items()} for r in rounds],
        **{f"median_{k}": round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]},
        "median_threads_vs_one_thread": round(
            statistics.median(r["threads"] / r["one_thread"] for r in rounds), 3
        ),
        "median_threads_vs_engine": round(
            statistics.median(r["threads"] / r["engine"] for r in rounds), 3
        ),
    }


def summarise(pages: list[Scan], results: list[tuple[str, float]]) -> dict[str, dict[str, float]]:
    by_language: dict[str, dict[str, list[float]]] = {}
    for page, (text, seconds) in zip(pages, results, strict=True):
        row = by_language.setdefault(page.language, {"cer": [], "wer": [], "s": []})
        row["cer"].append(cer(page.truth, text, page.language))
        row["wer"].append(wer(page.truth, text, page.language))
        row["s"].append(seconds)
    return {
        language: {
            "cer": statistics.mean(row["cer"]),
            "wer": statistics.mean(row["wer"]),
            "pages_per_s": len(row["s"]) / sum(row["s"]),
        }
        for language, row in by_language.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--pages", type=int, default=2, help="pages per language (seeds)")
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--languages", default=",".join(TEXTS))
    parser.add_argument("--skip-rapidocr", action="store_true")
    parser.add_argument("--skip-stack", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="stack vs engine rounds")
    parser.add_argument(
        "--long-scan", type=int, default=12, help="pages of the long scan (0: skip)"
    )
    parser.add_argument(
        "--script-pages", type=int, default=2, help="pages per language, one job at a time"
    )
    parser.add_argument("--only-scripts", action="store_true", help="only the per-script part")
    args = parser.parse_args()
    languages = args.languages.split(",")
    pages = [scan(lang, args.dpi, seed) for lang in languages for seed in range(args.pages)]
    work = Path(tempfile.mkdtemp(prefix="bench-ocr-"))
    load_start = os.getloadavg()[0]

    engines: dict[str, Callable[[], list[tuple[str, float]]]] = {
        "tesseract-cli": lambda: tesseract_cli(pages, work),
        "tesseract": lambda: tesseract_api(pages),
        "docparse": lambda: docparse_in_process(pages),
    }
    if not args.skip_rapidocr:
        engines["rapidocr"] = lambda: rapidocr(pages)
    if args.only_scripts:
        engines = {}
    table = {name: summarise(pages, run()) for name, run in engines.items()}

    result: dict[str, object] = {"dpi": args.dpi, "pages_per_language": args.pages, "table": table}
    rounds: list[dict[str, float]] = []
    failures: list[str] = []
    if not args.skip_stack:
        # Latin pages (more of them, other seeds): the raw engine, the CLI and the stack take
        # turns per round on the same pages; ratios are per round, the table shows medians.
        stack_pages = [scan(lang, args.dpi, 100 + seed) for lang in LATIN for seed in range(4)]
        with bench_stack(work / "stack", replicas=1) as stack:
            address = stack.gateway_addresses[0]
            through_stack(address, stack_pages[:2])  # warm: connections, fork server, models
            if args.script_pages:
                result["scripts"] = scripts_stack(address, args, work)
            for number in range(0 if args.only_scripts else args.rounds):
                raw = tesseract_api(stack_pages)
                cli = tesseract_cli(stack_pages, work)
                # Unhinted and hinted take turns at going first (right after the CLI): with a
                # fixed order, whichever came first paid for what the CLI left behind.
                if number % 2 == 0:
                    stack_pps, failed = through_stack(address, stack_pages)
                    hinted_pps, failed_hinted = through_stack(address, stack_pages, hinted=True)
                else:
                    hinted_pps, failed_hinted = through_stack(address, stack_pages, hinted=True)
                    stack_pps, failed = through_stack(address, stack_pages)
                failures += failed + failed_hinted
                raw_pps = len(raw) / sum(s for _t, s in raw)
                cli_pps = len(cli) / sum(s for _t, s in cli)
                rounds.append(
                    {
                        "stack": stack_pps,
                        "stack_hinted": hinted_pps,
                        "engine": raw_pps,
                        "cli": cli_pps,
                        "stack_vs_engine": stack_pps / raw_pps,
                        "stack_vs_cli": stack_pps / cli_pps,
                        "hinted_vs_engine": hinted_pps / raw_pps,
                    }
                )
            stack_all, failures_all = through_stack(address, pages) if rounds else (0.0, [])
            if args.long_scan and not args.only_scripts:
                result["long_scan"] = long_scans(address, args, work)
    if rounds:
        result["latin_stack"] = {
            "pages": len(stack_pages),
            "rounds": [{k: round(v, 3) for k, v in r.items()} for r in rounds],
            **{
                f"median_{key}": round(statistics.median(r[key] for r in rounds), 3)
                for key in rounds[0]
            },
            "all_languages_stack_pages_per_s": round(stack_all, 3),
            "failures": failures + failures_all,
        }
    result["load"] = [round(load_start, 2), round(os.getloadavg()[0], 2)]
    result["cpus"] = len(os.sched_getaffinity(0))

    names = list(table)
    if "scripts" in result:
        print_scripts(result["scripts"])  # type: ignore[arg-type]
    print(f"OCR at {args.dpi} DPI, {args.pages} pages per language, load {result['load']}")
    print("| language | " + " | ".join(f"{n} CER / WER / pages/s" for n in names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for language in languages if names else []:
        cells = []
        for name in names:
            row = table[name][language]
            wer_text = "-" if language in NO_SPACES else f"{row['wer']:.1%}"
            cells.append(f"{row['cer']:.1%} / {wer_text} / {row['pages_per_s']:.2f}")
        print(f"| {language} | " + " | ".join(cells) + " |")
    for key in ("scripts", "latin_stack", "long_scan"):
        if key in result:
            print(json.dumps(result[key], indent=2))
    write_text(OUT_DIR / "ocr.json", json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
