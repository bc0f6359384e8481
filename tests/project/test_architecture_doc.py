"""docs/architecture.md and CONTRIBUTING.md name only what exists: every file they cite is in
the repository, every room of parser_svc is described (there and in the README's layout), and
the key table has a row for every key `Keys` builds, each named as `Keys` spells it."""

from __future__ import annotations

import re
from pathlib import Path

from parser_svc.state.keys import Keys

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PAGES = (ARCHITECTURE, ROOT / "CONTRIBUTING.md")
CITED = re.compile(r"`([\w./<>-]+\.(?:py|lua|proto|md|json|cjs))`|\]\(([\w./-]+\.md)\)")
# Where a short name (`api/submit.py`, `update_job.lua`) is looked for.
BASES = ("", "parser_svc", "parser_svc/state/lua", "parser_svc/state", "parser_svc/child")
# Members of Keys that build no key of their own (placement, prefixes of other keys).
NOT_KEYS = {
    "of",
    "place",
    "new_id",
    "cells",
    "prefix",
    "index_sets",
    "batch_of",
    "batch_files",
    "batch_key_prefix",
    "job_key_prefix",
    "job_events_pattern",
}


def _exists(name: str, page: Path) -> bool:
    if "<" in name:  # a pattern such as parsers/<format>.py
        return True
    if (page.parent / name).exists():
        return True
    return any((ROOT / base / name).exists() for base in BASES) or any(
        path.name == name for path in ROOT.glob(f"*/**/{name}") if ".venv" not in path.parts
    )


def test_every_cited_file_exists() -> None:
    missing = []
    for page in PAGES:
        for match in CITED.finditer(page.read_text()):
            name = match.group(1) or match.group(2)
            if not _exists(name, page):
                missing.append(f"{page.name}: {name}")
    assert not missing, f"cited but not in the repository: {missing}"


def test_every_room_of_parser_svc_is_described() -> None:
    rooms = sorted(p.parent.name for p in (ROOT / "parser_svc").glob("*/__init__.py"))
    assert {"api", "state", "parsers"} <= set(rooms)
    text = ARCHITECTURE.read_text()
    diagram = text[text.index("Inside `parser_svc/`") : text.index("## A job's path")]
    readme = (ROOT / "README.md").read_text()
    for room in rooms:
        assert re.search(rf"(?<![\w/]){room}/ ", diagram), f"architecture.md: no {room}/"
        assert f"| `parser_svc/{room}/` |" in readme, f"README layout: no parser_svc/{room}/"


def test_the_key_table_names_every_key() -> None:
    text = ARCHITECTURE.read_text()
    table = text[text.index("## Who owns which key") : text.index("## Where to add")]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    members = {name for name in dir(Keys) if not name.startswith("_")}
    assert named <= members, f"not members of Keys: {named - members}"
    assert members - NOT_KEYS <= named, f"keys without an owner row: {members - NOT_KEYS - named}"
