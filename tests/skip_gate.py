"""Under CI (the `CI` variable set, as `.ci/run` does) a skipped test fails the run unless
tests/skip_allowlist.txt lists it with its reason; the run prints the skip summary.

`make test` installs every tool a test needs, so a skip in CI means a tool or a file went
missing: that is a failure to look at, not a pass. The allowlist holds the few tests that cannot
run there, one a line: `node id pattern | reason` (an fnmatch pattern; a line starting with
`#` is a comment). With pytest-xdist the controller, which sees every worker's reports,
does the check.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ALLOWLIST = Path(__file__).with_name("skip_allowlist.txt")


@dataclass(frozen=True)
class Allowed:
    pattern: str
    reason: str


def load(path: Path) -> list[Allowed]:
    """The allowlist's entries; ValueError naming a line without a pattern or a reason."""
    entries: list[Allowed] = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = (part.strip() for part in line.partition("|"))
        if not pattern or not reason:
            raise ValueError(f"{path}:{number}: expected `node id pattern | reason`: {raw!r}")
        entries.append(Allowed(pattern, reason))
    return entries


def _reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr)


@dataclass
class SkipGate:
    """A pytest plugin: collects the skips and fails the session on one not allowlisted."""

    allowed: list[Allowed]
    skips: dict[str, str] = field(default_factory=dict)

    def listed(self, nodeid: str) -> Allowed | None:
        return next((a for a in self.allowed if fnmatch.fnmatchcase(nodeid, a.pattern)), None)

    def unlisted(self) -> dict[str, str]:
        return {node: why for node, why in self.skips.items() if self.listed(node) is None}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skips[report.nodeid] = _reason(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.unlisted() and session.exitstatus in (pytest.ExitCode.OK, 5):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write = terminalreporter.write_line
        terminalreporter.section("skips under CI (tests/skip_allowlist.txt)")
        if not self.skips:
            write("no test skipped")
        for node, why in sorted(self.skips.items()):
            entry = self.listed(node)
            if entry is not None:
                write(f"allowed  {node}: {why} (allowlisted: {entry.reason})")
        unlisted = self.unlisted()
        for node, why in sorted(unlisted.items()):
            write(f"FAILED   {node}: skipped under CI and not allowlisted: {why}")
        write(f"{len(self.skips)} skipped, {len(unlisted)} not allowlisted")


def install(config: pytest.Config, allowlist: Path = ALLOWLIST) -> None:
    """Registers the gate when `CI` is set, on the process that reports (not an xdist worker)."""
    if not os.environ.get("CI") or hasattr(config, "workerinput"):
        return
    config.pluginmanager.register(SkipGate(load(allowlist)), "docparse-skip-gate")
