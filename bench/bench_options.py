"""Pay for what was asked: page ranges and image modes, in process and through a stack.
Run with `.venv/bin/python -m bench.bench_options [--rounds N]`.

1. Pages: a generated 1,000-page text PDF read with `pages="1-5"` against a 5-page PDF of the
   same pages (and the whole 1,000 pages, for scale): the reading package in this process
   (parse_child.parse, one process) and submit → SUCCEEDED through a stack (1 replica, 1
   gateway, an embedded Redis). Goal: the range costs at most 2x the 5-page document.
2. Images: a two-page PDF showing a 2400x3200 JPEG and the same picture as raw (Flate)
   pixels (tests/fixtures/images.py), read with images none / referenced / all, the same two
   ways. `all` re-encodes the raw picture as PNG; `referenced` (the default) keeps the JPEG's
   own bytes and lists the raw picture without storing it.

Medians over `--rounds` (in process: each round a fresh parse; stack: one job after the other,
so active-only dedupe never joins two). Writes var/bench/options.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness.jobs import run_job
from bench.harness.output import OUT_DIR, log, write_text
from bench.harness.stacks import bench_stack, running
from docparse.job_options import IMAGE_MODES, image_mode
from docparse.v1 import job_pb2, parser_service_pb2
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions
from tests.fixtures.images import image_pdf
from tests.helpers import make_pdf


def _median_ms(run: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 1)


def in_process(cases: dict[str, tuple[bytes, dict[str, str]]], rounds: int) -> dict[str, float]:
    """Each case's reading package in this process, median ms (assets to a scratch folder)."""
    out = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, (data, options) in cases.items():
            opts = ParseOptions.defaults(assets_dir=Path(scratch) / name, **options)

            def one(data: bytes = data, opts: ParseOptions = opts) -> None:
                parse("pdf", data, lambda *_: None, opts)

            out[name] = _median_ms(one, rounds)
            log(f"in process {name}: {out[name]} ms")
    return out


def through_stack(
    cases: dict[str, tuple[bytes, dict[str, str]]], rounds: int, folder: Path
) -> dict[str, float]:
    """Each case submitted and followed to SUCCEEDED through a stack, median ms."""
    stack = bench_stack(folder, replicas=1)
    out = {}
    with running([stack]):
        address = stack.gateway_addresses[0]
        for name, (data, options) in cases.items():
            request = parser_service_pb2.SubmitJobRequest(
                file_name=f"{name}.pdf",
                content=data,
                pages=options.get("pages", ""),
                images=image_mode(options.get("images", "")),
            )

            def one(request: parser_service_pb2.SubmitJobRequest = request) -> None:
                job = run_job(address, request)
                assert job.state == job_pb2.STATE_SUCCEEDED, job.error

            one()  # warm: the first job of a replica starts its fork server's caches
            out[name] = _median_ms(one, rounds)
            log(f"stack {name}: {out[name]} ms")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    long, short, images = make_pdf(1000), make_pdf(5), image_pdf(2400, 3200)
    pages = {
        "5-page PDF": (short, {}),
        "pages 1-5 of 1000": (long, {"pages": "1-5"}),
        "all 1000 pages": (long, {}),
    }
    modes = {f"images {mode}": (images, {"images": mode}) for mode in IMAGE_MODES}
    cases = {**pages, **modes}
    local = in_process(cases, args.rounds)
    with tempfile.TemporaryDirectory() as folder:
        stack = through_stack(cases, args.rounds, Path(folder))
    ratio = round(stack["pages 1-5 of 1000"] / stack["5-page PDF"], 2)
    report = {"rounds": args.rounds, "in_process_ms": local, "stack_ms": stack}
    report["stack_range_vs_5_pages"] = ratio
    print(f"{'case':<22}{'in process ms':>15}{'stack ms':>12}")
    for name in cases:
        print(f"{name:<22}{local[name]:>15}{stack[name]:>12}")
    print(f"pages 1-5 of 1000 / 5-page PDF through the stack: {ratio} (goal <= 2)")
    write_text(OUT_DIR / "options.json", json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
