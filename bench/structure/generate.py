"""Writes the structure benchmark's documents: PDFs with a JSON truth beside each.

.venv/bin/python -m bench.structure.generate --out var/structure   # the four reference documents
.venv/bin/python -m bench.structure.generate --seed 7 --count 20 --out DIR  # a family set
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.structure.documents import FOUR
from bench.structure.family import random_document
from bench.structure.truth import Truth


def generate(out: Path, seed: int | None, count: int) -> list[Truth]:
    """The four documents when `seed` is None, else `count` family documents from `seed` on."""
    out.mkdir(parents=True, exist_ok=True)
    if seed is None:
        return [make(out) for make in FOUR]
    return [random_document(out, seed + index) for index in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("var/structure"))
    parser.add_argument("--seed", type=int, default=None, help="a family set from this seed")
    parser.add_argument("--count", type=int, default=12, help="family documents (with --seed)")
    args = parser.parse_args()
    for truth in generate(args.out, args.seed, args.count):
        print(f"{args.out / truth.name}.pdf  {truth.pages} pages")


if __name__ == "__main__":
    main()
