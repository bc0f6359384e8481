"""One error vocabulary: protos/docparse/v1/error_reason.proto lists every reason the code can
put in an ErrorInfo or a JobError, and nothing else; docparse.reasons.ErrorReason is that list
as a type, and product code names its members, never the strings.

The checks read the code, not a hand-kept list: every UPPER_SNAKE string in the product's Python
and Lua (and every string passed as `reason=`) is either a reason the enum names or one of the
few other kinds of constants below; scripts/check_reasons.py (`make lint`) fails on a reason
written as a string in Python. A new reason raised without its enum entry fails here; so does an
enum entry no code raises any more."""

from __future__ import annotations

import ast
import itertools
import re
import subprocess
import sys
from pathlib import Path

import grpc

from docparse.reasons import ErrorReason
from docparse.v1 import error_reason_pb2
from scripts import check_reasons

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("docparse", "docparse_server", "parser_svc", "gateway")
UPPER_SNAKE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
REASONS = {value.name for value in error_reason_pb2.ErrorReason.DESCRIPTOR.values if value.number}
# UPPER_SNAKE strings that are not reasons: environment variables, gRPC code names, the
# statuses update_job.lua answers with, and the placeholder shown when a server sent no reason.
NOT_REASONS = (
    {"DEMO_EXIT", "OPENBLAS_NUM_THREADS", "TESSDATA_PREFIX", "NO_REASON", "BAD_PATCH"}
    # what a parse child's environment keeps (child/no_network.py), a CLI metavar, libxml2's
    # error name for a document nested past its limit
    | {"VIRTUAL_ENV", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "OMP_THREAD_LIMIT"}
    | {"MALLOC_ARENA_MAX", "BATCH_ID", "ERR_RESOURCE_LIMIT"}
    | {code.name for code in grpc.StatusCode}
    | {"OK", "DONE", "NOOP", "TERMINAL", "FENCED"}
)


def _python_files() -> list[Path]:
    return [
        path
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if "v1" not in path.relative_to(ROOT).parts
    ]


def _all_lists(tree: ast.Module) -> list[ast.expr]:
    """The items of `__all__ = [...]` assignments."""
    return [
        item
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        and isinstance(node.value, ast.List | ast.Tuple)
        for item in node.value.elts
    ]


def _constants_in_python() -> dict[str, str]:
    """Reason-like string -> one file that uses it."""
    found: dict[str, str] = {}
    for path in _python_files():
        where = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), filename=where)
        exported = {id(item) for item in _all_lists(tree)}  # names of the module, not values
        for node in ast.walk(tree):
            text = (
                node.value if isinstance(node, ast.Constant) and id(node) not in exported else None
            )
            if isinstance(text, str) and UPPER_SNAKE.fullmatch(text):
                found.setdefault(text, where)
            if isinstance(node, ast.keyword) and node.arg == "reason":
                value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.setdefault(value.value, where)
    return found


def _reasons_in_lua() -> dict[str, str]:
    """Strings the Lua scripts write as a job's error reason (`reason` fields)."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "parser_svc" / "state" / "lua").rglob("*.lua")):
        text = path.read_text()
        for match in re.finditer(r"\['(?:err_)?reason'\]\s*=\s*'([A-Z_]+)'", text):
            found.setdefault(match.group(1), str(path.relative_to(ROOT)))
    return found


def _is_rules_table(node: ast.stmt) -> bool:
    return isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "RULES"


def _members_named() -> dict[str, str]:
    """`ErrorReason.X` (or an alias's `R.X`) in product code -> one file that names it. The
    servers' table (RULES, docparse_server/errors.py) names every member, so it does not
    count."""
    found: dict[str, str] = {}
    for path in _python_files():
        where = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), filename=where)
        tree.body = [node for node in tree.body if not _is_rules_table(node)]
        aliases = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "docparse.reasons"
            for alias in node.names
            if alias.name == "ErrorReason"
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                found.setdefault(node.attr, where)
    return found


def _used() -> dict[str, str]:
    used = _constants_in_python()
    for name, where in _members_named().items():
        used.setdefault(name, where)
    for name, where in _reasons_in_lua().items():
        used.setdefault(name, where)
    return {name: where for name, where in used.items() if name not in NOT_REASONS}


def _not_env_name(name: str) -> bool:
    # environment variables: ours and OpenTelemetry's standard ones
    return not name.startswith(("DOCPARSE_", "OTEL_"))


def test_every_reason_the_code_raises_is_in_the_enum() -> None:
    unlisted = {
        name: where
        for name, where in _used().items()
        if _not_env_name(name) and name not in REASONS
    }
    assert not unlisted, (
        "reasons raised without an entry in protos/docparse/v1/error_reason.proto "
        f"(add them there, with a comment): {unlisted}"
    )


def test_every_enum_reason_is_raised_somewhere() -> None:
    used = set(_used())
    lua = "\n".join(p.read_text() for p in (ROOT / "parser_svc" / "state" / "lua").rglob("*.lua"))
    stale = sorted(name for name in REASONS if name not in used and f"'{name}'" not in lua)
    assert not stale, f"enum entries no code raises (remove them or raise them): {stale}"


def test_every_enum_value_says_what_it_means() -> None:
    lines = (ROOT / "protos/docparse/v1/error_reason.proto").read_text().splitlines()
    bare = [
        line.split("=")[0].strip()
        for before, line in itertools.pairwise(lines)
        if re.match(r"\s+[A-Z_]+ = \d+;", line) and not before.strip().startswith("//")
    ]
    assert not bare, f"enum values without a comment above them: {bare}"


def test_the_readme_names_only_listed_reasons() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("### Error model", 1)[1].split("\n## ", 1)[0]
    named = {
        name
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", table)
        if name not in NOT_REASONS and _not_env_name(name)
    }
    assert named, "README's error model section lists no reasons"
    assert named <= REASONS, f"README names reasons the enum does not list: {named - REASONS}"


def test_the_reason_type_lists_exactly_the_enum() -> None:
    """docparse.reasons.ErrorReason has a member per proto value (UNSPECIFIED aside: never
    sent), in the same order, each equal to its name, the string the wire carries."""
    assert [member.name for member in ErrorReason] == [
        value.name for value in error_reason_pb2.ErrorReason.DESCRIPTOR.values if value.number
    ]
    assert all(member == member.name for member in ErrorReason)
    assert ErrorReason.JOB_EXPIRED == "JOB_EXPIRED"
    assert f"{ErrorReason.JOB_EXPIRED}" == str(ErrorReason.JOB_EXPIRED) == "JOB_EXPIRED"


def test_product_code_writes_no_reason_as_a_string() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/check_reasons.py"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


def test_the_reason_check_finds_each_kind_of_literal(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "raise error('JOB_EXPIRED', 'gone')\n"  # 1: a literal reason
        "fail(reason='SOMETHING_NEW')\n"  # 2: reason= with a string, listed or not
        "if err.reason == 'CANCELLED': pass\n"  # 3: CANCELLED compared with a reason
        "state = 'CANCELLED'\n"  # a job state: not a reason
        "code = grpc.StatusCode.CANCELLED\n"
        "raise error(ErrorReason.JOB_EXPIRED, 'gone')\n"
    )
    found = list(check_reasons.literals(sample, check_reasons.reason_names()))
    assert found == [(1, "'JOB_EXPIRED'"), (2, "reason='SOMETHING_NEW'"), (3, "'CANCELLED'")]
