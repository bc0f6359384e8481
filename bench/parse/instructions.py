"""Instructions one PDF parse executes, counted by valgrind's callgrind: `python -m
bench.parse.instructions [--pages N]`. A count is the same run after run whatever else the
machine does (on a shared 2-core box the same timed parse moved 1.5x within an hour), so two
trees compare in one run each: run it from each (a `git worktree`, PYTHONPATH set to it, the
native module built there or copied).

The generated book of `--pages` pages (bench.harness.documents.book_pdf) is parsed as the parse
child parses it (parse_child.parse with default options: structure, tables, images) in two
processes under callgrind, once and three times; half the difference is one parse, without the
interpreter's start, the imports and the warm-up parse. Prints JSON: instructions per parse and
per page. Needs valgrind (Debian's package); a 100-page book takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness.documents import book_pdf

_COLLECTED = re.compile(r"Collected : (\d+)")


def parse_book(path: Path, times: int) -> None:
    """The driver callgrind runs: a warm-up parse (mupdf's and the parser's first-use set-up),
    then `times` parses of the book at `path`."""
    from parser_svc.child.parse_child import parse
    from parser_svc.parsers import ParseOptions, pdf_pass

    if not pdf_pass.native():
        raise SystemExit("parser_svc.parsers.native is not built: python -m ...native.build")
    data = path.read_bytes()
    for _ in range(times + 1):
        with tempfile.TemporaryDirectory() as tmp:
            options = ParseOptions.defaults(assets_dir=Path(tmp) / "assets")
            parse("pdf", data, lambda *_: None, options).SerializeToString()


def counted(path: Path, times: int, work: Path) -> int:
    """Instructions of a process parsing the book `times` times (after its warm-up), its string
    hashes seeded alike (set orders, and so the work, the same in every run)."""
    driver = [sys.executable, "-m", "bench.parse.instructions", "--driver", str(path), str(times)]
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work / f'{times}.out'}"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        command + driver, capture_output=True, text=True, timeout=3600, check=False, env=env
    )
    found = _COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"callgrind failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--driver", nargs=2, metavar=("PDF", "TIMES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        parse_book(Path(args.driver[0]), int(args.driver[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        work = Path(tmp)
        book = work / "book.pdf"
        book.write_bytes(book_pdf(args.pages))
        # Once without valgrind: the bytecode both counted runs import is compiled before them.
        subprocess.run(
            [sys.executable, "-m", "bench.parse.instructions", "--driver", str(book), "0"],
            check=True,
        )
        once, thrice = counted(book, 1, work), counted(book, 3, work)
    per_parse = (thrice - once) // 2
    out = {"pages": args.pages, "instructions_per_parse": per_parse}
    out |= {"instructions_per_page": per_parse // args.pages, "once": once, "thrice": thrice}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
