"""Footnotes found on family documents: `python -m bench.structure.footnotes --seed N --count K`.

Each family document's footnotes (the truth's unordered paragraphs that start with a number)
against the package's role "footnote" blocks, text compared with whitespace collapsed: found
whole with the role, missed, and blocks marked that are no footnote of the truth.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.structure.family import random_document
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions


def _words(text: str) -> str:
    return " ".join(text.split())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=5000)
    parser.add_argument("--count", type=int, default=30)
    args = parser.parse_args()
    found = missed = false = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for seed in range(args.seed, args.seed + args.count):
            truth = random_document(work, seed)
            notes = [
                _words(p["text"])
                for p in truth.paragraphs
                if not p.get("ordered", True) and p["text"][:1].isdigit()
            ]
            options = ParseOptions.defaults(assets_dir=work / "assets")
            package = parse(
                "pdf", (work / f"{truth.name}.pdf").read_bytes(), lambda *_: None, options
            )
            marked = [
                _words(b.text) for p in package.pages for b in p.blocks if b.role == "footnote"
            ]
            found += sum(1 for note in notes if note in marked)
            missed += sum(1 for note in notes if note not in marked)
            false += sum(1 for block in marked if block not in notes)
    print(f"seeds {args.seed}..{args.seed + args.count - 1}: footnotes found whole {found}, "
          f"missed {missed}, blocks marked that are none {false}")  # fmt: skip


if __name__ == "__main__":
    main()
