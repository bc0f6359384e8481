"""Fuzzes the native PDF page reader (parser_svc/parsers/native: pdf_pass.c, page_lines.c)
under AddressSanitizer and UndefinedBehaviorSanitizer.

    python scripts/fuzz_native.py [--execs N] [--jobs J] [--seed S] [--out DIR] [--corpus DIR]

Builds the module with `-fsanitize=address,undefined` into DIR (`build_sanitized`), then runs J
worker processes, each a python with that build loaded in place of the module and libasan
preloaded (python itself is not built with ASan, so the runtime must come first). A worker
mutates seed PDFs (generated here with pymupdf and saved uncompressed, plus the corpus's PDFs)
by bytes (flips, random bytes, inserted, deleted, repeated and spliced runs, truncation) and by
structure (a content stream's numbers and operators replaced, its lines repeated, the object
table's numbers changed), and runs every page of each mutant (at most 4) through
text_and_rules, page_lines and page_segments: one execution. A sanitizer report is written to
DIR/reports/; a worker that dies leaves its input in DIR/crashes/ and another starts.

Prints executions, executions/s, crashes and reports; exits 1 when there is a crash or a report.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from parser_svc.parsers.native import build  # noqa: E402

pymupdf: Any = importlib.import_module("pymupdf")  # untyped: every call through Any

CORPUS = ROOT.parent / "shared" / "corpus"
MAX_PAGES = 4
MAX_BYTES = 4 << 20  # a mutant stays a plausible upload (mupdf itself fails on > 2 GiB)
NUMBERS = [b"0", b"-1", b"1e308", b"-1e308", b"99999999999", b"-2147483649", b"nan", b"0.0000001"]
OPERATORS = [b"m", b"l", b"c", b"v", b"y", b"h", b"re", b"f", b"S", b"B", b"n", b"W", b"q", b"Q",
             b"cm", b"Tj", b"TJ", b"Tf", b"Td", b"BT", b"ET", b"Do", b"sh", b"BI", b"EI", b"gs",
             b"Tz", b"TL", b"Tr", b"d", b"w", b"'", b'"']  # fmt: skip


def build_sanitized(out: Path) -> Path:
    """The module built with ASan and UBSan into `out` (same sources and flags as
    parser_svc/parsers/native/build.py, plus the sanitizers); RuntimeError saying why not."""
    where, version = build._pymupdf()  # noqa: SLF001 (the build's own finding of mupdf)
    library = sorted(where.glob("libmupdf.so.*"))[0]
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) on PATH")
    out.mkdir(parents=True, exist_ok=True)
    target = out / build.TARGET.name
    command = [
        compiler, "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
        "-fno-sanitize-recover=undefined", "-shared", "-fPIC", "-std=c11", "-Wall",
        f"-I{sysconfig.get_paths()['include']}", f"-I{where / 'mupdf-devel' / 'include'}",
        f'-DDOCPARSE_MUPDF_VERSION="{version}"',
        *(str(source) for source in build.SOURCES if source.suffix == ".c"),
        "-o", str(target), f"-L{where}", f"-l:{library.name}", f"-Wl,-rpath,{where}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}\n{done.stderr.strip()}")
    return target


def sanitizer_env(out: Path) -> dict[str, str]:
    """The environment of a python that loads the sanitized build: libasan preloaded, reports
    to out/reports/, leaks not reported (python's own allocations are never freed)."""
    compiler = os.environ.get("CC") or shutil.which("cc") or "cc"
    # libstdc++ beside it: mupdf's C++ layer throws, and ASan's __cxa_throw interceptor needs
    # the real one loaded when the process starts.
    libraries = [
        subprocess.run(
            [compiler, f"-print-file-name={name}"], capture_output=True, text=True, check=True
        ).stdout.strip()
        for name in ("libasan.so", "libstdc++.so")
    ]
    reports = out / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "LD_PRELOAD": " ".join(libraries),
        "ASAN_OPTIONS": f"detect_leaks=0:abort_on_error=0:log_path={reports}/asan",
        "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:log_path={reports}/ubsan",
        "PYTHONPATH": str(ROOT),
        "PYTHONMALLOC": "malloc",  # python's allocations through ASan's malloc too
    }


# -- seeds -----------------------------------------------------------------------------------


def generated_seeds() -> list[bytes]:
    """Small PDFs that exercise the reader's paths: text in several fonts and sizes, lines,
    rectangles, curves, a table grid, an image, a rotated page, a form XObject."""
    seeds: list[bytes] = []
    for variant in range(6):
        doc = pymupdf.open()
        page = doc.new_page(width=300 + 40 * variant, height=400)
        for row in range(3 + variant):
            y = 40 + 22 * row
            page.insert_text((30, y), f"Row {row} cell {variant} • word", fontsize=8 + row)
            page.draw_line((25, y + 4), (260, y + 4), width=0.5 + variant / 4)
        page.draw_rect(pymupdf.Rect(20, 20, 270, 60 + 22 * variant), width=1)
        page.draw_bezier((30, 300), (80, 200), (150, 380), (250, 300))
        page.draw_circle((200, 320), 20 + variant)
        if variant % 2:
            pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 8, 8), False)
            pix.clear_with(120)
            page.insert_image(pymupdf.Rect(200, 330, 240, 370), pixmap=pix)
        if variant == 3:
            page.set_rotation(90)
        if variant == 4:
            source = pymupdf.open("pdf", doc.tobytes())
            other = doc.new_page()
            other.show_pdf_page(other.rect, source, 0)  # a form XObject
        seeds.append(doc.tobytes(expand=255, garbage=0))
        doc.close()
    return seeds


def corpus_seeds(corpus: Path, limit: int = 40) -> list[bytes]:
    """The corpus's PDFs, first pages only, uncompressed (so mutations reach the streams)."""
    seeds: list[bytes] = []
    for path in sorted(corpus.glob("*pdf/*"))[:limit] if corpus.is_dir() else []:
        try:
            with pymupdf.open(path) as doc:
                if doc.needs_pass:
                    continue
                doc.select(list(range(min(MAX_PAGES, doc.page_count))))
                seeds.append(doc.tobytes(expand=255, garbage=1))
        except Exception:  # a malformed corpus file: kept as it is
            seeds.append(path.read_bytes())
    return seeds


# -- mutations -------------------------------------------------------------------------------


def _bytes_mutation(data: bytearray, rng: random.Random, other: bytes) -> None:
    at = rng.randrange(len(data))
    span = rng.randint(1, 64)
    choice = rng.randrange(7)
    if choice == 0:
        data[at] ^= 1 << rng.randrange(8)
    elif choice == 1:
        data[at : at + span] = rng.randbytes(min(span, len(data) - at))
    elif choice == 2:
        data[at:at] = rng.randbytes(span)
    elif choice == 3:
        del data[at : at + span]
    elif choice == 4:
        data[at:at] = data[at : at + span * 8]
    elif choice == 5:
        start = rng.randrange(len(other))
        data[at : at + span] = other[start : start + span * 4]
    else:
        del data[rng.randrange(len(data) // 2, len(data)) :]


TOKEN = re.compile(rb"-?\d+(?:\.\d+)?|\b(?:" + b"|".join(re.escape(o) for o in OPERATORS) + rb")\b")


def _structure_mutation(data: bytearray, rng: random.Random) -> None:
    """A number or an operator in a stream (or anywhere) replaced, or a line repeated."""
    start = rng.randrange(len(data))
    found = TOKEN.search(data, start) or TOKEN.search(data)
    if found is None:
        return
    if rng.random() < 0.2:
        end = data.find(b"\n", found.end())
        line = data[found.start() : end if end > 0 else found.end()][:200]
        data[found.start() : found.start()] = line * rng.randint(1, 50) + b"\n"
        return
    is_number = found.group()[:1].isdigit() or found.group()[:1] == b"-"
    pool = NUMBERS if is_number and rng.random() < 0.7 else OPERATORS
    data[found.start() : found.end()] = rng.choice(pool)


def mutate(seeds: list[bytes], rng: random.Random) -> bytes:
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        if not data:
            break
        if rng.random() < 0.5:
            _structure_mutation(data, rng)
        else:
            _bytes_mutation(data, rng, rng.choice(seeds))
    return bytes(data[:MAX_BYTES])


# -- the worker (a python with the sanitized build) -----------------------------------------


def _load_sanitized(path: Path) -> None:
    """Makes `path` the module parser_svc.parsers.pdf_pass loads (before it is imported)."""
    import parser_svc.parsers.native as package

    name = "parser_svc.parsers.native._pdf_pass"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    vars(package)["_pdf_pass"] = module  # what `from ... import _pdf_pass` finds


def run_one(data: bytes) -> None:
    """One execution: every page (at most MAX_PAGES) through the three native functions."""
    from parser_svc.parsers import pdf_lines, pdf_pass

    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
        pages = min(MAX_PAGES, doc.page_count)
    except Exception:
        return  # mupdf refused the file: nothing reaches the module
    with doc:
        for index in range(pages):
            try:
                run = pdf_pass.text_and_rules(doc[index])
                pdf_lines.page_lines(run.textpage)
                pdf_lines.page_segments(run.textpage, 0.3)
            except Exception:  # a mupdf error raised to python: the parser's FAILED, not a bug
                continue


def worker(module: Path, seeds_path: Path, current: Path, seed: int, execs: int) -> None:
    _load_sanitized(module)
    from parser_svc.parsers import pdf_pass

    assert pdf_pass.native_module() is not None, "the sanitized module did not load"
    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)
    seeds = [bytes.fromhex(s) for s in json.loads(seeds_path.read_text())]
    rng = random.Random(seed)
    for done in range(1, execs + 1):
        data = mutate(seeds, rng)
        current.write_bytes(data)
        run_one(data)
        if done % 50 == 0 or done == execs:
            print(done, flush=True)


# -- the driver ------------------------------------------------------------------------------


def _worker_command(module: Path, out: Path, seed: int, execs: int, index: int) -> list[str]:
    return [
        sys.executable, __file__, "--worker", str(module), "--out", str(out),
        "--seed", str(seed), "--execs", str(execs), "--index", str(index),
    ]  # fmt: skip


def fuzz(
    out: Path, execs: int, jobs: int, seed: int, corpus: Path, batch: int = 2000
) -> dict[str, Any]:
    """Runs `execs` executions over `jobs` processes; the numbers as a dict."""
    module = build_sanitized(out / "build")
    env = sanitizer_env(out)
    seeds = generated_seeds() + corpus_seeds(corpus)
    (out / "seeds.json").write_text(json.dumps([s.hex() for s in seeds]))
    (out / "crashes").mkdir(exist_ok=True)
    started, done, crashes, next_seed = time.monotonic(), 0, 0, seed
    running: dict[int, tuple[subprocess.Popen[str], int]] = {}
    remaining, batch, shown = execs, min(batch, -(-execs // jobs)), time.monotonic()
    while remaining > 0 or running:
        if time.monotonic() - shown > 60:  # progress for a long run
            shown = time.monotonic()
            found = len(list((out / "reports").iterdir()))
            print(f"{done} executions, {crashes} crashes, {found} reports", flush=True)
        for index in range(jobs):
            if index not in running and remaining > 0:
                count = min(batch, remaining)
                remaining -= count
                command = _worker_command(module, out, next_seed, count, index)
                proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
                running[index] = (proc, count)
                next_seed += 1
        for index, (proc, count) in list(running.items()):
            if proc.poll() is None:
                continue
            lines = (proc.stdout.read() if proc.stdout else "").split()
            ran = int(lines[-1]) if lines else 0
            done += ran
            if proc.returncode != 0:
                crashes += 1
                if (out / f"current-{index}.pdf").exists():
                    shutil.copy(out / f"current-{index}.pdf", out / "crashes" / f"{proc.pid}.pdf")
                remaining += count - ran - 1  # the rest of its batch runs elsewhere
                done += 1
            del running[index]
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    reports = sorted(p.name for p in (out / "reports").iterdir())
    return {
        "executions": done,
        "seconds": round(elapsed, 1),
        "executions_per_s": round(done / elapsed, 1),
        "crashes": crashes,
        "reports": len(reports),
        "report_files": reports[:20],
        "seeds": len(seeds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execs", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "fuzz-native")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        current = args.out / f"current-{args.index}.pdf"
        worker(args.worker, args.out / "seeds.json", current, args.seed, args.execs)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    numbers = fuzz(args.out, args.execs, args.jobs, args.seed, args.corpus)
    print(json.dumps(numbers))
    sys.exit(1 if numbers["crashes"] or numbers["reports"] else 0)


if __name__ == "__main__":
    main()
