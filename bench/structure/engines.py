"""One engine over a directory of PDFs, in a process of its own (the structure benchmark runs
each engine this way, so that none pays for or benefits from another's imports):

    .venv/bin/python -m bench.structure.engines ENGINE DIR OUT.json

ENGINE is `docparse` (the parse child's `parse` with the deployment defaults, then
docparse.render.to_markdown: what `?format=markdown` returns), `pymupdf4llm` (its to_markdown
with pymupdf.layout, the ONNX layout model, imported first; `pymupdf4llm_no_furniture` with
header=False, footer=False) or `get_text` (pymupdf's plain text, pages apart by a blank line).
OUT gets each document's Markdown and its best wall time over `--rounds` (after one unmeasured
warm-up parse)."""

from __future__ import annotations

import argparse
import importlib
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

Convert = Callable[[Path], tuple[str, int]]  # a PDF -> its Markdown, its page count


def docparse_engine() -> Convert:
    from docparse.render import to_markdown
    from parser_svc.child.parse_child import parse
    from parser_svc.parsers import ParseOptions

    assets = tempfile.TemporaryDirectory(prefix="structure-assets-")  # gone with the process

    def convert(path: Path) -> tuple[str, int]:
        options = ParseOptions.defaults(assets_dir=Path(assets.name))
        package = parse("pdf", path.read_bytes(), lambda *_: None, options)
        return to_markdown(package), len(package.pages)

    return convert


def pymupdf4llm_engine() -> Convert:
    importlib.import_module("pymupdf.layout")  # before pymupdf4llm: it turns the layout model on
    import pymupdf
    import pymupdf4llm

    def convert(path: Path) -> tuple[str, int]:
        with pymupdf.open(path) as doc:  # type: ignore[no-untyped-call]
            pages = doc.page_count
        return str(pymupdf4llm.to_markdown(str(path))), pages

    return convert


def pymupdf4llm_without_furniture_engine() -> Convert:
    """pymupdf4llm + layout asked to leave page headers and footers out (not its default)."""
    importlib.import_module("pymupdf.layout")
    import pymupdf
    import pymupdf4llm

    def convert(path: Path) -> tuple[str, int]:
        with pymupdf.open(path) as doc:  # type: ignore[no-untyped-call]
            pages = doc.page_count
        return str(pymupdf4llm.to_markdown(str(path), header=False, footer=False)), pages

    return convert


def get_text_engine() -> Convert:
    import pymupdf

    def convert(path: Path) -> tuple[str, int]:
        with pymupdf.open(path) as doc:  # type: ignore[no-untyped-call]
            texts = [page.get_text() for page in doc]
        return "\n\n".join(texts), len(texts)

    return convert


ENGINES: dict[str, Callable[[], Convert]] = {
    "docparse": docparse_engine,
    "pymupdf4llm": pymupdf4llm_engine,
    "pymupdf4llm_no_furniture": pymupdf4llm_without_furniture_engine,
    "get_text": get_text_engine,
}


def run(engine: str, paths: list[Path], rounds: int) -> dict[str, dict[str, object]]:
    convert = ENGINES[engine]()
    if paths:
        convert(paths[0])  # warm-up: lazy imports, model loading, caches
    out: dict[str, dict[str, object]] = {}
    for path in paths:
        best = float("inf")
        for _ in range(rounds):
            started = time.perf_counter()
            markdown, pages = convert(path)
            best = min(best, time.perf_counter() - started)
        out[path.stem] = {"markdown": markdown, "pages": pages, "seconds": best}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=sorted(ENGINES))
    parser.add_argument("documents", type=Path, help="a directory of PDFs")
    parser.add_argument("out", type=Path, help="the JSON to write")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    paths = sorted(args.documents.glob("*.pdf"))
    args.out.write_text(json.dumps(run(args.engine, paths, args.rounds)))


if __name__ == "__main__":
    main()
