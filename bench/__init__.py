"""The benchmarks, run as modules from the repository root (bench/README.md has the results):

    .venv/bin/python -m bench.bench_spine   # GetStatus and WatchJob
    .venv/bin/python -m bench.bench_parse   # parse throughput, warm parse workers
    .venv/bin/python -m bench.bench_ocr     # OCR engines side by side

`bench.harness` is what they share (stacks, /proc readings, statistics, timing, child processes,
input documents, output); `bench.spine` and `bench.parse` hold the scenarios of the first two.
Test documents come from `tests.helpers` and `tests.fixtures`, importable because the
benchmarks run as modules from the root.
"""
