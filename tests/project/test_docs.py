"""The documentation runs as written: every shell and Python block of README.md,
clients/node/README.md and docs/operations.md, in order, against one local stack.

The stack is the README's own `docparse up` command (the first block annotated `stack`), started
in a scratch folder that looks like a fresh clone (a link to every top-level entry of the
repository but `var/`), so relative paths, `var/stack/...` and the files blocks write behave as
for a reader. The documents use the default addresses (gRPC 127.0.0.1:50050 and :50051, HTTP
127.0.0.1:8080), which another stack on this machine may hold: the test gives its stack free
ports and rewrites those three addresses in each block, and sets DOCPARSE_TARGET to the
gateway (the CLI's and the Node client's default). `$JOB` is a SUCCEEDED job of that stack,
for the blocks that say "with `$JOB` a job id".

A block fails on a non-zero exit (bash runs with `set -e -o pipefail`) or a Python traceback in
its output. A block that cannot run here carries an annotation on the line before its fence:

    <!-- doctest: skip REASON -->   not run (a Kubernetes cluster, docker, ...); REASON is required
    <!-- doctest: needs PROGRAM --> run only where PROGRAM is on PATH (reported when it is not)
    <!-- doctest: stack -->         one `docparse up` command that serves until Ctrl-C: its flags
                                    are checked (and the files they name must exist); the
                                    README's first one is the stack the other blocks run against
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from docparse.cli import build_parser
from docparse.client import Client
from docparse.ports import free_port, port_is_free
from tests.helpers import Up

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "clients/node/README.md", "docs/operations.md")
RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
KINDS = {"skip", "needs", "stack"}
ANNOTATION = re.compile(r"^\s*<!--\s*doctest:\s*(?P<kind>\S+)\s*(?P<arg>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
NOT_COPIED = {"var", ".pytest_cache", ".mypy_cache", ".ruff_cache", "__pycache__"}
BLOCK_TIMEOUT_S = 120


@dataclass
class Block:
    doc: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    kind: str = "run"  # run | skip | needs | stack
    arg: str = ""

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def read_blocks(doc: str, text: str | None = None) -> list[Block]:
    """Every fenced block of `doc` with its annotation (the last non-blank line before it)."""
    lines = (text if text is not None else (ROOT / doc).read_text()).splitlines()
    found: list[Block] = []
    previous = ""
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            if lines[index].strip():
                previous = lines[index]
            index += 1
            continue
        indent, start = len(fence["indent"]), index
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            body.append(lines[index][indent:])
            index += 1
        block = Block(doc, start + 1, fence["lang"], "\n".join(body) + "\n")
        if annotated := ANNOTATION.match(previous):
            block.kind, block.arg = annotated["kind"], annotated["arg"]
        found.append(block)
        previous = ""
        index += 1
    return found


def runnable(doc: str) -> list[Block]:
    return [b for b in read_blocks(doc) if b.lang in RUNNABLE]


def stack_command(block: Block) -> list[str]:
    """The words of a `stack` block: one `.venv/bin/docparse up ...` command."""
    words = shlex.split(block.text, comments=True)
    assert words[:2] == [".venv/bin/docparse", "up"], f"{block.where}: not a docparse up command"
    return words


@dataclass
class Site:
    """Where the blocks run: the scratch clone, the stack's addresses, the environment."""

    folder: Path
    gateways: list[str]
    http: str
    env: dict[str, str]

    def rewrite(self, text: str) -> str:
        for documented, actual in (
            ("127.0.0.1:50050", self.gateways[0]),
            ("127.0.0.1:50051", self.gateways[-1]),
            ("127.0.0.1:8080", self.http),
        ):
            text = text.replace(documented, actual)
        return text


def scratch_clone(folder: Path) -> Path:
    """Links to the repository's entries; `clients/` is copied (without node_modules): npm
    refuses `npm ci --prefix` through a symlink, and the install then stays in the scratch."""
    for entry in ROOT.iterdir():
        if entry.name == "clients":
            shutil.copytree(
                entry, folder / entry.name, ignore=shutil.ignore_patterns("node_modules")
            )
        elif entry.name not in NOT_COPIED:
            (folder / entry.name).symlink_to(entry)
    return folder


def two_free_ports() -> int:
    """A port P with P+1 free too (the README's stack has two gateways)."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port < 65535 and port_is_free(port) and port_is_free(port + 1):
            return port
    raise AssertionError("no two consecutive free ports")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = scratch_clone(tmp_path_factory.mktemp("clone"))
    block = next(b for b in runnable("README.md") if b.kind == "stack")
    words = stack_command(block)
    assert (folder / words[0]).exists(), f"{block.where}: {words[0]} does not exist"
    args = words[2:]
    args[args.index("--port") + 1] = str(two_free_ports())
    up = Up(*args, "--http-port", str(free_port()), cwd=folder)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPARSE_")}
        env["DOCPARSE_TARGET"] = up.target
        with Client(up.target) as client:
            env["JOB"] = client.parse(ROOT / "examples" / "memo-1-page.pdf").job_id
        yield Site(folder, up.ready["gateway"].split(","), up.ready["http"].split(",")[0]
                   .removeprefix("http://"), env)  # fmt: skip
    finally:
        assert up.stop() == 0


def run_block(block: Block, site: Site) -> str:
    """Runs one block; "" when it passed, else what went wrong."""
    text = site.rewrite(block.text)
    if block.lang == "python":
        script = site.folder / f"_doctest_{Path(block.doc).stem}_{block.line}.py"
        script.write_text(text)
        command = [sys.executable, str(script)]
    else:
        command = ["bash", "-c", "set -e -o pipefail\n" + text]
    try:
        done = subprocess.run(
            command, cwd=site.folder, env=site.env, capture_output=True, text=True,
            timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"{block.where}: still running after {BLOCK_TIMEOUT_S} s\n{text}"
    output = done.stdout + done.stderr
    if done.returncode == 0 and "Traceback (most recent call last)" not in output:
        return ""
    return (
        f"{block.where}: exit {done.returncode}\n--- block (as run)\n{text}"
        f"--- stdout (end)\n{done.stdout[-3000:]}\n--- stderr (end)\n{done.stderr[-3000:]}"
    )


def check_stack_block(block: Block, site: Site) -> str:
    """A `stack` block's flags parse, and every file it names exists."""
    words = stack_command(block)
    try:
        args = build_parser().parse_args(words[1:])
    except SystemExit:
        return f"{block.where}: docparse up does not take {' '.join(words[2:])}"
    missing = [str(v) for v in vars(args).values() if isinstance(v, Path)]
    missing = [name for name in missing if not (site.folder / name).exists()]
    return f"{block.where}: names files that do not exist: {missing}" if missing else ""


@pytest.mark.stack  # `docparse up` (site)
@pytest.mark.parametrize("doc", DOCS)
def test_every_block_runs(site: Site, doc: str) -> None:
    failures: list[str] = []
    for block in runnable(doc):
        if block.kind == "skip":
            continue
        if block.kind == "needs" and shutil.which(block.arg) is None:
            warnings.warn(f"{block.where} not run: {block.arg} is not on PATH", stacklevel=1)
            continue
        problem = (
            check_stack_block(block, site) if block.kind == "stack" else run_block(block, site)
        )
        if problem:
            failures.append(problem)
    assert not failures, "\n\n".join(failures)


def test_annotations_are_known_and_give_their_reason() -> None:
    for doc in DOCS:
        blocks = read_blocks(doc)
        for block in blocks:
            if block.kind == "run":
                continue
            assert block.kind in KINDS, f"{block.where}: unknown annotation {block.kind!r}"
            assert block.lang in RUNNABLE, f"{block.where}: annotation on a {block.lang} block"
            assert block.arg or block.kind == "stack", f"{block.where}: {block.kind} needs a reason"
            if block.kind == "stack":
                assert len(stack_command(block)) > 1
        text = (ROOT / doc).read_text()
        assert text.count("doctest:") == sum(b.kind != "run" for b in blocks), (
            f"{doc}: an annotation that is not right before a block"
        )
    assert any(b.kind == "stack" for b in runnable("README.md"))


@pytest.mark.stack  # `docparse up` (site)
def test_a_broken_block_fails(site: Site) -> None:
    """The runner catches what a reader would: an exit code, a failure inside a pipeline, a
    traceback printed by a command that still exits 0, and a documented command that breaks."""
    broken = """
```sh
true | false | cat
```

```python
raise RuntimeError("boom")
```

```sh
python3 -c 'print("Traceback (most recent call last):")'
```

```sh
.venv/bin/docparse watch "$JOB" --after-version 1000
```
"""
    blocks = read_blocks("broken.md", broken)
    assert len(blocks) == 4
    for block in blocks:
        assert run_block(block, site), f"{block.line}: a broken block passed"
    ok = read_blocks("ok.md", '```sh\n.venv/bin/docparse status "$JOB"\n```\n')[0]
    assert run_block(ok, site) == ""
