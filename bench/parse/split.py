"""A long PDF in page ranges (parser_svc/parsers/pdf_split.py) against one process per
document, in the same run: two stacks alike (2 replicas, 1 gateway, each its own Redis) but
for `DOCPARSE_PDF_SPLIT_MIN_PAGES` (24, the default, and 0), taking turns.

Per round and stack: the two longest text PDFs submitted alone through the gateway (submit →
SUCCEEDED, seconds), then every text PDF 8 at a time (pages/s), where a split can only help
when a replica has a core to spare. The package of each lone job is compared between the
stacks (the same bytes but for the job's own fields) and the raw pymupdf get_text time of the
same file is measured in the same round.

    .venv/bin/python -m bench.parse.split --rounds 4
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path

import pymupdf

from bench.harness.documents import text_pdfs
from bench.harness.output import log
from bench.harness.stacks import bench_stack, running
from bench.parse.in_process import raw_extraction
from bench.parse.through_stack import through_stack
from docparse.client import Client
from docparse.v1 import reading_package_pb2 as rp

MODES = {"split": "24", "whole": "0"}


def _pages_digest(address: str, path: Path) -> str:
    """The pages of the file's package through `address` (their bytes: job fields aside)."""
    with Client(address) as client:
        job = client.parse(path.read_bytes(), file_name=path.name)
        package: rp.ReadingPackage = client.result(job.job_id)
    digest = hashlib.sha256()
    for page in package.pages:
        digest.update(page.SerializeToString(deterministic=True))
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-split-"))
    texts = text_pdfs(work)
    longest = sorted(texts, key=lambda p: -pymupdf.open(p).page_count)[:2]  # type: ignore[no-untyped-call]
    stacks = {
        mode: bench_stack(
            work / mode, replicas=2, extra_env={"DOCPARSE_PDF_SPLIT_MIN_PAGES": value}
        )
        for mode, value in MODES.items()
    }
    results: dict[str, list[float]] = {}
    with running(stacks.values()):
        for stack in stacks.values():  # warm-up: connections, fork servers, first children
            through_stack(stack.gateway_addresses[0], texts[:2], 1)
        digests = {
            m: [_pages_digest(s.gateway_addresses[0], p) for p in longest]
            for m, s in stacks.items()
        }
        assert digests["split"] == digests["whole"], "split packages differ from whole ones"
        for round_no in range(args.rounds):
            for path in longest:
                _, seconds = raw_extraction([path], 1)
                results.setdefault(f"raw_{path.name}_s", []).append(seconds)
            order = list(stacks.items())
            for mode, stack in order if round_no % 2 == 0 else order[::-1]:
                address = stack.gateway_addresses[0]
                for path in longest:
                    started = time.perf_counter()
                    through_stack(address, [path], 1)
                    took = time.perf_counter() - started
                    results.setdefault(f"{mode}_lone_{path.name}_s", []).append(took)
                pages, seconds, failed = through_stack(address, texts, 1)
                assert not failed, failed
                results.setdefault(f"{mode}_corpus_pages_per_s", []).append(pages / seconds)
            log(
                f"round {round_no + 1}: "
                + ", ".join(f"{k} {v[-1]:.3f}" for k, v in results.items())
            )
    medians = {key: round(statistics.median(values), 3) for key, values in results.items()}
    for path in longest:
        split, whole = medians[f"split_lone_{path.name}_s"], medians[f"whole_lone_{path.name}_s"]
        print(
            f"lone {path.name}: split {split:.3f} s, whole {whole:.3f} s ({whole / split:.2f}x), "
            f"raw get_text {medians[f'raw_{path.name}_s']:.3f} s"
        )
    print(
        f"corpus 8 at a time: split {medians['split_corpus_pages_per_s']:.0f} pages/s, "
        f"whole {medians['whole_corpus_pages_per_s']:.0f} pages/s"
    )
    if args.out:
        args.out.write_text(json.dumps({"medians": medians, "rounds": results}, indent=2))


if __name__ == "__main__":
    main()
