"""The servers' reason table (docparse_server/errors.py): one row per reason, the gRPC code the
proto's comments give it, and every raise site taking its code from there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grpc
import pytest

from docparse.errors import ClientError, ContractError, DocparseError, JobFailed, WaitTimeout
from docparse.reasons import ErrorReason
from docparse_server.errors import RULES, Advice, error, refusal_to_start
from scripts.check_reasons import product_files

ROOT = Path(__file__).resolve().parents[2]
CODES = {code.name for code in grpc.StatusCode}
LOCAL_TOOLS = "Local tools"  # the proto section whose codes the SDK and the CLI pick


def _proto_codes() -> dict[str, tuple[str | None, str]]:
    """Reason -> (the gRPC code its comment, or its section's title, names; its section)."""
    found: dict[str, tuple[str | None, str]] = {}
    section, default, comment = "", None, []
    for line in (ROOT / "protos/docparse/v1/error_reason.proto").read_text().splitlines():
        text = line.strip()
        if text.startswith("// ---"):
            section = text.strip("/- ")
            named = re.search(r"([A-Z_]+) unless said otherwise", text) or re.search(
                r"\(([A-Z_]+)\)", text
            )
            default = named.group(1) if named and named.group(1) in CODES else None
        elif text.startswith("//"):
            comment.append(text.removeprefix("//").strip())
        elif value := re.match(r"([A-Z][A-Z0-9_]+) = \d+;", text):
            said = [
                *re.findall(r"^([A-Z_]+)(?::| \()", comment[0] if comment else ""),
                *re.findall(r"\(\d{3}, ([A-Z_]+)\)", " ".join(comment)),
            ]
            code = next((name for name in said if name in CODES), default)
            found[value.group(1)] = (code, section)
            comment = []
        else:
            comment = []
    return found


def test_every_reason_has_one_row() -> None:
    assert set(RULES) == set(ErrorReason)


def test_each_row_has_the_code_the_proto_comment_names() -> None:
    """Where the proto names a code (the value's comment, else its section's), the table has
    it; where it names none, the reason is a job's only (no code), but for the local tools'
    reasons, whose codes the client's raise sites pick (checked below)."""
    proto = _proto_codes()
    assert set(proto) - {"ERROR_REASON_UNSPECIFIED"} == {member.name for member in ErrorReason}
    wrong = {}
    for reason, rule in RULES.items():
        named, section = proto[reason.name]
        table = rule.code.name if rule.code else None
        if named is None and section.startswith(LOCAL_TOOLS):
            continue
        if table != named:
            wrong[reason.name] = (table, named)
    assert not wrong, f"table code != proto comment: {wrong}"


def test_advice_follows_the_code() -> None:
    """A bad request is fixed, an unavailable server retried, a missing thing final."""
    for reason, rule in RULES.items():
        if rule.code == grpc.StatusCode.INVALID_ARGUMENT:
            assert rule.advice is Advice.FIX, reason
        if rule.code == grpc.StatusCode.UNAVAILABLE and reason != ErrorReason.CHILD_EXITED:
            assert rule.advice is Advice.RETRY, reason
        if rule.code == grpc.StatusCode.NOT_FOUND:
            assert rule.advice is Advice.FINAL, reason


def test_error_takes_its_code_from_the_table() -> None:
    err = error(ErrorReason.JOB_NOT_FOUND, "job j does not exist", {"job_id": "j"})
    assert (err.code, err.reason, err.message, err.metadata) == (
        grpc.StatusCode.NOT_FOUND,
        "JOB_NOT_FOUND",
        "job j does not exist",
        {"job_id": "j"},
    )
    assert error(ErrorReason.RATE_LIMITED, "slow down").code == grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(ValueError, match="job's reason"):
        error(ErrorReason.CORRUPT_DOCUMENT, "a job's reason is never an RPC error's")
    start = refusal_to_start(ErrorReason.STATE_STORE_UNAVAILABLE, "bad URL")
    assert start.code == grpc.StatusCode.FAILED_PRECONDITION


def _docparse_error_calls(path: Path) -> list[tuple[int, str, str]]:
    """(line, code, reason) of each `DocparseError(grpc.StatusCode.X, ErrorReason.Y, ...)`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "DocparseError"):
            continue
        code, reason = (ast.unparse(arg) for arg in node.args[:2])
        if reason.startswith("ErrorReason."):
            found.append((node.lineno, code.removeprefix("grpc.StatusCode."), reason[12:]))
    return found


def test_servers_raise_through_the_table() -> None:
    """No server module builds a DocparseError with a reason of its own choosing: they call
    docparse_server.errors.error(reason, ...)."""
    direct = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in product_files()
        if path.relative_to(ROOT).parts[0] in ("parser_svc", "gateway", "docparse_server")
        for line, _, _ in _docparse_error_calls(path)
    ]
    assert not direct, f"raise error(ErrorReason.X, ...) instead: {direct}"


def test_the_clients_local_errors_use_the_tables_codes() -> None:
    """docparse/ imports nothing of the servers, so it names codes itself: the table's."""
    calls = [
        (f"{path.relative_to(ROOT)}:{line}", code, reason)
        for path in product_files()
        if path.relative_to(ROOT).parts[0] == "docparse"
        for line, code, reason in _docparse_error_calls(path)
    ]
    assert calls, "the check found no client raise site"
    table = {reason.name: rule.code.name if rule.code else None for reason, rule in RULES.items()}
    wrong = [(where, code, reason) for where, code, reason in calls if table[reason] != code]
    assert not wrong, f"client raise sites whose code is not the table's: {wrong}"


def test_every_sdk_outcome_is_a_docparse_error() -> None:
    """One root: `except DocparseError` catches a failed job and a wait that ran out too."""
    failed = JobFailed("j", "FAILED", ErrorReason.CORRUPT_DOCUMENT, "damaged")
    waited = WaitTimeout("j", "RUNNING", 3, 1.0)
    contract = ContractError("no job in the answer")
    for outcome in (failed, waited, contract):
        assert isinstance(outcome, ClientError) and isinstance(outcome, DocparseError)
    assert (failed.code, failed.reason, failed.message) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "CORRUPT_DOCUMENT",
        "damaged",
    )
    assert str(failed) == "job j ended FAILED: CORRUPT_DOCUMENT: damaged"
    assert (waited.code, waited.reason) == (grpc.StatusCode.DEADLINE_EXCEEDED, "")
    assert str(waited) == "job j still RUNNING (version 3) after 1.0 s; it goes on"
    assert contract.reason == ErrorReason.UPSTREAM_CONTRACT
    assert contract.code == RULES[ErrorReason.UPSTREAM_CONTRACT].code == grpc.StatusCode.INTERNAL
    assert str(contract) == "no job in the answer"
