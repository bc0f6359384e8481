"""The structure `make lint` holds product code to; exits 1 naming each offence.

| check                 | scope                                                  | limit |
|-----------------------|--------------------------------------------------------|-------|
| import circles        | modules of docparse, docparse_server, parser_svc,      | none  |
|                       | gateway (not the generated docparse/v1); imports       |       |
|                       | inside functions, under TYPE_CHECKING and              |       |
|                       | `from pkg import module` count                         |       |
| lines per file        | the same Python files                                  | 400   |
| lines per function    | the same Python files, def line to last line           | 60    |
| lines per file        | the TypeScript SDK's hand-written sources              | 400   |
|                       | (clients/typescript/src, not src/gen)                  |       |
| lines per function    | the same TypeScript files: functions, methods,         | 60    |
|                       | arrows, accessors, constructors                        |       |

An import edge goes to the module a statement names: `import a.b` to `a.b`, `from a import b`
to `a.b` when that is a module and to `a` otherwise; importing a module does not count as
importing its parent packages. The TypeScript half runs scripts/check_structure_ts.cjs with
the SDK's own `typescript` package (clients/typescript/node_modules); without it the half is
skipped with a note, and fails under CI=true.

Run with the venv python from the repository root: `.venv/bin/python scripts/check_structure.py`.
`--root DIR --packages a b` checks another tree (the tests feed it scratch trees).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import os
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("docparse", "docparse_server", "parser_svc", "gateway")
GENERATED = ("docparse/v1",)
TS_SOURCES = Path("clients/typescript/src")
TS_GENERATED = ("gen",)
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
TS_SCRIPT = Path(__file__).resolve().with_name("check_structure_ts.cjs")

Edge = tuple[str, int]  # (imported module, line)


def python_files(root: Path, packages: Iterable[str], generated: Iterable[str]) -> dict[str, Path]:
    """Module name -> file, for every .py file under the packages except generated folders."""
    skipped = [root / folder for folder in generated]
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if any(path.is_relative_to(folder) for folder in skipped):
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported_names(module: str, is_package: bool, tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Every dotted name an import statement anywhere in the tree names, with its line:
    `a.b` for `import a.b` and for `from a import b` (b may be a module or a name in a)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {imported product module: first line}: a name goes to the longest prefix of
    it that is a product module (`a.b.name` to `a.b`)."""
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for target, line in imported_names(name, path.name == "__init__.py", tree):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name][target] = min(line, graph[name].get(target, line))
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components of more than one module, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def shortest_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """The shortest path from the component's first module back to itself, inside it."""
    members, start = set(component), component[0]
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node]):
            if nxt not in members:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no cycle in component {component}")


def circle_offences(graph: dict[str, dict[str, int]]) -> list[str]:
    offences = []
    for component in strongly_connected(graph):
        cycle = shortest_cycle(graph, component)
        steps = [f"{a} (l.{graph[a][b]})" for a, b in itertools.pairwise(cycle)]
        offences.append(
            f"import circle: {' -> '.join([*steps, cycle[-1]])}"
            + (f" [{len(component)} modules in the knot: {', '.join(component)}]"
               if len(component) > len(cycle) - 1 else "")
        )  # fmt: skip
    return offences


def python_size_offences(root: Path, modules: dict[str, Path]) -> list[str]:
    offences = []
    for path in sorted(modules.values()):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root)
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            offences.append(f"{where}: {lines} lines (limit {MAX_FILE_LINES})")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    offences.append(
                        f"{where}:{node.lineno}: function {node.name} is {length} lines "
                        f"(limit {MAX_FUNCTION_LINES})"
                    )
    return offences


def typescript_offences(root: Path, sources: Path) -> tuple[list[str], str | None]:
    """(offences, note): the note says why the check did not run."""
    folder = root / sources
    if not folder.is_dir():
        return [], None
    modules = root / sources.parent / "node_modules"
    node = shutil.which("node")
    if node is None or not (modules / "typescript").is_dir():
        why = "node is not on PATH" if node is None else f"{modules}/typescript is absent"
        return [], f"TypeScript limits not checked: {why} (make ts-sdk installs it)"
    done = subprocess.run(
        [node, str(TS_SCRIPT), str(modules), str(folder), ",".join(TS_GENERATED)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return [f"TypeScript check failed to run: {done.stderr.strip()}"], None
    offences = []
    for entry in json.loads(done.stdout):
        where = Path(entry["file"]).resolve().relative_to(root.resolve())
        if entry["lines"] > MAX_FILE_LINES:
            offences.append(f"{where}: {entry['lines']} lines (limit {MAX_FILE_LINES})")
        for function in entry["functions"]:
            if function["lines"] > MAX_FUNCTION_LINES:
                offences.append(
                    f"{where}:{function['line']}: function {function['name']} is "
                    f"{function['lines']} lines (limit {MAX_FUNCTION_LINES})"
                )
    return offences, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--packages", nargs="+", default=list(PACKAGES))
    parser.add_argument("--generated", nargs="*", default=list(GENERATED))
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    modules = python_files(root, args.packages, args.generated)
    offences = circle_offences(import_graph(modules))
    offences += python_size_offences(root, modules)
    ts_offences, note = typescript_offences(root, TS_SOURCES)
    offences += ts_offences
    if note is not None:
        if os.environ.get("CI", "").lower() == "true":
            offences.append(note)
        else:
            print(note, file=sys.stderr)
    for offence in offences:
        print(offence)
    if offences:
        print(f"structure check: {len(offences)} offence(s)", file=sys.stderr)
        return 1
    print(f"structure check: {len(modules)} modules, no circle, every file and function in limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
