"""The parse benchmark's printed report (the JSON follows it on stdout)."""

from __future__ import annotations

import argparse


def print_report(
    result: dict[str, object],
    medians: dict[str, float],
    idle: dict[str, list[dict[str, int]]],
    modes: list[str],
    args: argparse.Namespace,
) -> None:
    """Medians over rounds per stack (`modes`), then the one-off measurements in `result`."""
    m = medians
    print(f"text PDFs: {result['text_pdf_files']} files; book: {args.book_pages} pages; "
          f"{args.rounds} rounds; {result['cores']} usable cores")  # fmt: skip
    print("  (CPU ms/page: CPU time per page, every process involved: the per-core cost)")
    print(f"  raw pymupdf get_text, corpus     : {m['raw_corpus']:8.1f} pages/s"
          f"  {m['raw_corpus_cpu_ms_per_page']:6.2f} CPU ms/page")  # fmt: skip
    print(f"  same, a process on every core    : {m['raw_all_cores']:8.1f} pages/s"
          f"  {m['raw_all_cores_cpu_ms_per_page']:6.2f} CPU ms/page (the limit)")  # fmt: skip
    print(f"  reading package in process       : {m['package_corpus']:8.1f} pages/s"
          f"  {m['package_corpus_cpu_ms_per_page']:6.2f} CPU ms/page"
          f"  = {m['package_corpus_vs_raw']:.2f} of raw (goal 0.7)")  # fmt: skip
    two_runs = m["package_corpus_two_runs_vs_raw"]
    print(f"    same, page read twice (no native): {two_runs:.2f} of raw")
    print(f"  raw pymupdf get_text, book       : {m['raw_book']:8.1f} pages/s"
          f"  {m['raw_book_cpu_ms_per_page']:6.2f} CPU ms/page")  # fmt: skip
    print(f"  reading package in process, book : {m['package_book']:8.1f} pages/s"
          f"  {m['package_book_cpu_ms_per_page']:6.2f} CPU ms/page"
          f"  = {m['package_book_vs_raw']:.2f} of raw (goal 0.7)")  # fmt: skip
    two_runs = m["package_book_two_runs_vs_raw"]
    print(f"    same, page read twice (no native): {two_runs:.2f} of raw")
    print(f"  raw one-page documents           : {m['raw_one_page_docs']:8.1f} docs/s"
          f"  {m['raw_one_page_cpu_ms']:6.2f} CPU ms/doc; every core "
          f"{m['raw_one_page_all']:.1f} docs/s")  # fmt: skip
    print(f"  a page fault (4 KB, first write) : {m['page_fault_us']:8.2f} us: forks and "
          "one-page jobs slow down with it")  # fmt: skip
    for mode in modes:
        _print_stack(m, mode, idle, result, args)
    launch = result["launch"]
    assert isinstance(launch, dict)
    print(f"one parse of a one-page PDF, alone (run_parse): forked {launch['fork_server_wall_ms']}"
          f" ms wall / {launch['fork_server_child_cpu_ms']} ms child CPU + "
          f"{launch['fork_server_fork_cpu_ms']} ms fork server CPU (without huge pages: "
          f"{launch['fork_server_small_pages_wall_ms']} / "
          f"{launch['fork_server_small_pages_child_cpu_ms']} + "
          f"{launch['fork_server_small_pages_fork_cpu_ms']}); spawned "
          f"{launch['spawn_wall_ms']} / {launch['spawn_child_cpu_ms']}")  # fmt: skip
    print(f"bare fork + exit of the fork server's size ({launch['fork_server_anon_mb_small']} MB "
          f"anonymous): {launch['bare_fork_exit_huge_pages_ms']} ms with malloc's huge pages "
          f"({launch['fork_server_huge_mb_huge']} MB huge), "
          f"{launch['bare_fork_exit_small_pages_ms']} ms without")  # fmt: skip
    if "redis_fork_server" in result:
        print(f"Redis per one-page job (fork_server): {result['redis_fork_server']}")
    if "ocr_pages_per_s" in result:
        print(f"OCR: {result['ocr_pages_per_s']} image-only pages/s")
    if "xlsx_1m_peak_rss_mb" in result:
        print(f"1M-cell XLSX parse: peak RSS {result['xlsx_1m_peak_rss_mb']} MB (goal < 400)")
    checked = result["checked"]
    assert isinstance(checked, dict)
    for mode, tally in checked.items():
        print(f"checked against raw pymupdf ({mode}): {tally['packages']} packages, "
              f"{tally['pages']} pages ({tally['ocr_pages']} by OCR, {tally['uncomparable_pages']}"
              f" without a text layer), largest difference on a text-layer page "
              f"{tally['worst_text_page_diff']:.1%} ({tally['worst_text_page'] or '-'}), "
              f"{tally['mismatches']} mismatches")  # fmt: skip


def _print_stack(
    m: dict[str, float],
    mode: str,
    idle: dict[str, list[dict[str, int]]],
    result: dict[str, object],
    args: argparse.Namespace,
) -> None:
    print(f"[{mode}]")
    print(f"  text PDFs through the stack      : {m[f'{mode}_stack_pages']:8.1f} pages/s"
          f"  {m[f'{mode}_stack_cpu_ms_per_page']:6.2f} CPU ms/page"
          f"  = {m[f'{mode}_stack_vs_raw']:.2f} of raw (goal 0.8), "
          f"{m[f'{mode}_stack_vs_raw_all_cores']:.2f} of raw on every core")  # fmt: skip
    print(f"    CPU per page: {m[f'{mode}_stack_cpu_vs_raw']:.2f}x raw's; with all "
          f"{result['cores']} cores busy at most {m[f'{mode}_stack_ceiling_vs_raw']:.2f}"
          " of raw")  # fmt: skip
    print(f"  one-page jobs, {args.clients} clients         : "
          f"{m[f'{mode}_one_page_jobs']:8.1f} jobs/s  {m[f'{mode}_one_page_cpu_ms']:6.2f} "
          f"CPU ms/job (goal 60; {m[f'{mode}_one_page_vs_all_cores']:.2f} of raw pymupdf "
          f"on every core)")  # fmt: skip
    print(f"  lone one-page submit→SUCCEEDED   : p50 {m[f'{mode}_lone_ms']:6.1f} ms (goal 40;"
          f" GetStatus round trip p50 {m[f'{mode}_status_ms']:.1f} ms)")  # fmt: skip
    if f"{mode}_child_rss_mb" in m:
        print(f"  per running parse (median peak)  : RSS {m[f'{mode}_child_rss_mb']:.0f} MB,"
              f" private {m[f'{mode}_child_private_mb']:.0f} MB")  # fmt: skip
    for i, replica in enumerate(idle[mode]):
        print(f"  replica {i} at idle               : parser_svc "
              f"{replica['parser_svc_kb'] / 1024:.0f} MB + fork server "
              f"{replica['fork_server_kb'] / 1024:.0f} MB RSS")  # fmt: skip
