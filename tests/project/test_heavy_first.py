"""tests/heavy_first.py: the order test files reach the xdist workers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.heavy_first import HEAVIEST, heaviest_first

ROOT = Path(__file__).resolve().parents[2]


def test_every_file_named_heaviest_exists() -> None:
    assert [path for path in HEAVIEST if not (ROOT / path).is_file()] == []
    assert len(set(HEAVIEST)) == len(HEAVIEST)


def test_the_heaviest_files_go_first_and_the_rest_keep_their_order() -> None:
    soak, corpus = "tests/parser_svc/work/test_soak.py", HEAVIEST[-1]
    assert HEAVIEST.index(soak) < HEAVIEST.index(corpus)
    nodeids = [
        "tests/a/test_one.py::test_x",
        f"{corpus}::test_corpus",
        "tests/a/test_one.py::test_y",
        f"{soak}::test_b",
        "tests/b/test_two.py::test_z",
        f"{soak}::test_a",
    ]
    items: list[Any] = [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]
    heaviest_first(items)
    assert [item.nodeid for item in items] == [
        f"{soak}::test_b",
        f"{soak}::test_a",
        f"{corpus}::test_corpus",
        "tests/a/test_one.py::test_x",
        "tests/a/test_one.py::test_y",
        "tests/b/test_two.py::test_z",
    ]
