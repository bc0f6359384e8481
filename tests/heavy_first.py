"""The order test files reach the xdist workers (`make test`: `--dist loadfile
--no-loadscope-reorder`): the longest first, so the run does not end on one worker still in a
two-minute file while the others idle. xdist's own order (most tests first) put the soak, the
state machine and the corpus, a minute each and few tests, at the end: the workers ended 903,
975 and 1,006 s into one run (bench/README.md, "The test suite's time, fourth pass").

HEAVIEST: files of 40 s and more of one worker's wall time in that run, longest first. A file
not named keeps its place after them; tests/project/test_heavy_first.py checks every name
still names a file."""

from __future__ import annotations

import pytest

HEAVIEST = (
    "tests/parser_svc/child/test_warm_workers.py",
    "tests/parser_svc/state/test_cluster.py",
    "tests/parser_svc/state/test_durability.py",
    "tests/parser_svc/parsers/test_pdf_split.py",
    "tests/docparse/test_ts_sdk.py",
    "tests/docparse/test_local_stack.py",
    "tests/docparse/test_cli.py",
    "tests/parser_svc/child/test_hostile.py",
    "tests/gateway/test_render_fairness.py",
    "tests/project/test_docs.py",
    "tests/parser_svc/work/test_soak.py",
    "tests/parser_svc/state/test_failover.py",
    "tests/parser_svc/parsers/test_parse_stack.py",
    "tests/gateway/test_http.py",
    "tests/parser_svc/parsers/test_pdf_pass.py",
    "tests/gateway/test_hostile_http.py",
    "tests/parser_svc/state/test_state_machine.py",
    "tests/docparse/test_client_retries.py",
    "tests/parser_svc/child/test_parse_limits.py",
    "tests/project/test_k8s.py",
    "tests/parser_svc/parsers/test_corpus.py",
)


def heaviest_first(items: list[pytest.Item]) -> None:
    """Moves the HEAVIEST files' tests to the front, in that order; the rest, and the tests
    within a file, keep their order (a stable sort)."""
    rank = {path: index for index, path in enumerate(HEAVIEST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(HEAVIEST)))
