"""Fails on an error reason written as a string in product code: raise sites and comparisons
name the member (`ErrorReason.JOB_EXPIRED`, docparse/reasons.py), never "JOB_EXPIRED".

Walks the syntax tree of every Python file of the product packages (generated stubs aside) and
reports, as file:line, each string constant equal to a reason of
protos/docparse/v1/error_reason.proto, and each `reason=` keyword given a string. A reason
that is also another kind of name (CANCELLED: a job state and a gRPC code) counts only where
it stands for a reason: as `reason=`, or compared with a `reason`.

    python scripts/check_reasons.py          # exit 0, or 1 listing each literal
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("docparse", "docparse_server", "parser_svc", "gateway")
PROTO = ROOT / "protos/docparse/v1/error_reason.proto"
# Names that are reasons and also something else (a job state, a gRPC status code).
AMBIGUOUS = frozenset({"CANCELLED"})


def reason_names(proto: Path = PROTO) -> frozenset[str]:
    """The enum's values, ERROR_REASON_UNSPECIFIED (0, never sent) aside."""
    values = re.findall(r"^\s+([A-Z][A-Z0-9_]*) = (\d+);", proto.read_text(), re.MULTILINE)
    return frozenset(name for name, number in values if number != "0")


def product_files(root: Path = ROOT) -> list[Path]:
    return [
        path
        for package in PRODUCT
        for path in sorted((root / package).rglob("*.py"))
        if "v1" not in path.relative_to(root).parts
    ]


def _is_reason_side(node: ast.expr) -> bool:
    """`x.reason`, `reason`, `x.error.reason`: an expression holding a reason."""
    if isinstance(node, ast.Attribute):
        return node.attr == "reason"
    return isinstance(node, ast.Name) and node.id == "reason"


def _reason_contexts(tree: ast.AST) -> set[int]:
    """ids of the constants that stand where a reason does: `reason=...`, compared with a
    reason, or assigned to one."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "reason":
            found.add(id(node.value))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_reason_side(side) for side in sides):
                found.update(id(side) for side in sides)
        elif isinstance(node, ast.Assign) and any(_is_reason_side(t) for t in node.targets):
            found.add(id(node.value))
    return found


def literals(path: Path, names: frozenset[str]) -> Iterator[tuple[int, str]]:
    """(line, text) of each reason literal in one file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    contexts = _reason_contexts(tree)
    keyword_values: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "reason":
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
                keyword_values.add(id(value))
                yield value.lineno, f"reason={value.value!r}"
            continue
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in keyword_values:
            continue
        text = node.value
        if text in names and (text not in AMBIGUOUS or id(node) in contexts):
            yield node.lineno, repr(text)


def find_all(root: Path = ROOT) -> list[str]:
    names = reason_names(root / PROTO.relative_to(ROOT))
    found = set()
    for path in product_files(root):
        for line, text in literals(path, names):
            found.add((str(path.relative_to(root)), line, text))
    return [f"{where}:{line}: {text}" for where, line, text in sorted(found)]


def main() -> int:
    found = find_all()
    for line in found:
        print(f"{line}: a reason written as a string; name the ErrorReason member")
    if found:
        print(f"{len(found)} reason string literal(s) (docparse/reasons.py lists the members)")
        return 1
    print("reason literals: none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
