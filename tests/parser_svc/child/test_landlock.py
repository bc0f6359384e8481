"""Where the server cannot drop a parse child to another uid (Kubernetes: parser_svc runs as uid
10001 without capabilities; here: DOCPARSE_CHILD_UID=0), the child still confines the files it
may open with Landlock once its document is open (parser_svc/child/landlock.py): code run by a
hostile document finds another job's upload, result and password file, the keys and
webhook-secrets files (even world-readable ones), other jobs' scratch directories and every
directory outside its own closed to writes, while it reads its own document, imports what it has not
imported yet and writes its scratch directory. Documents of every kind still parse through a
real stack whose children keep the server's uid."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from docparse.client import Client
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2
from parser_svc.child import landlock
from parser_svc.child.privileges import ChildScratch
from parser_svc.work.blobs import BlobStore
from tests import fixtures
from tests.conftest import make_stack
from tests.fixtures.scans import scan

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
pytestmark = pytest.mark.skipif(
    not landlock.available(), reason="this kernel offers no Landlock (Linux 5.13+, enabled)"
)


@pytest.fixture
def shared_volume() -> Iterator[Path]:
    """A blob store's volume a deployment mounts, readable by the server's uid (which the
    children keep): a directory others may cross."""
    path = Path(tempfile.mkdtemp(prefix="docparse-volume-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# What a parse child does first (parse_child.main): open its document, drop (not asked here)
# and confine itself; then it tries what a hostile document's code would.
PROBE = """
import importlib, json, os, sys, tempfile
from pathlib import Path
from parser_svc.child import parse_child
from parser_svc.parsers import ParseOptions
own, *others = sys.argv[1:]
options = ParseOptions.defaults(child_uid=0, landlock=True)
document = parse_child._open_and_drop(own, "package.pb", options, None)
seen = {"euid": os.geteuid(), "own": len(document.read())}
fresh = ["decimal", "openpyxl", "docparse.render_markdown"]  # stdlib, site-packages, ours
seen["fresh"] = [name for name in fresh if name not in sys.modules]
for name in fresh:
    importlib.import_module(name)
Path("written").write_bytes(b"ok")
with tempfile.NamedTemporaryFile(delete=False) as temporary:
    seen["temporary"] = temporary.name
for path in others:
    try:
        (os.listdir if os.path.isdir(path) else lambda p: open(p, "rb").read(1))(path)
        seen[path] = "read"
    except PermissionError:
        seen[path] = "denied"
try:
    Path(tempfile.gettempdir()).parent.joinpath("docparse-landlock-probe").write_bytes(b"x")
    seen["write outside"] = "written"
except PermissionError:
    seen["write outside"] = "denied"
print(json.dumps(seen))
"""


def test_a_confined_child_cannot_open_another_jobs_files_or_the_keys(shared_volume: Path) -> None:
    blobs = BlobStore(shared_volume, "test")
    blobs.put_input("job-a", b"%PDF- the child's own upload")
    blobs.put_input("job-b", b"%PDF- another tenant's upload")
    blobs.put_secret("job-b", "another tenant's password")
    result = blobs.path(blobs.put_result("job-b", 1, "ab" * 32, b"another tenant's package"))
    secrets_dir = shared_volume / "etc"
    secrets_dir.mkdir(mode=0o755)
    keys, hooks = secrets_dir / "keys.json", secrets_dir / "webhook-secrets.json"
    for path in (keys, hooks):  # world-readable: only Landlock stands in the way
        path.write_text('{"secret": "s3cr3t"}')
        path.chmod(0o644)
    makes = ChildScratch(0, 0)  # no drop: a private temporary directory per job
    assert makes.owner is None
    mine, theirs = makes.make(), makes.make()
    (Path(theirs.name) / "package.pb").write_bytes(b"another job's package")
    others = [
        str(blobs.path(blobs.input_key("job-b"))),
        str(blobs.path(blobs.secret_key("job-b"))),
        str(result),
        str(shared_volume),
        str(keys),
        str(hooks),
        theirs.name,
        str(Path(theirs.name) / "package.pb"),
    ]
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(blobs.path(blobs.input_key("job-a"))), *others],
            cwd=mine.name, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert seen["euid"] == os.geteuid()  # the uid it had: no drop
        assert seen["own"] == len(b"%PDF- the child's own upload")
        assert seen["fresh"] == ["decimal", "openpyxl", "docparse.render_markdown"]
        assert (Path(mine.name) / "written").read_bytes() == b"ok"
        assert Path(seen["temporary"]).parent == Path(mine.name)  # TMPDIR is its scratch
        closed = [*others, "write outside"]
        assert {path: seen[path] for path in closed} == {path: "denied" for path in closed}
    finally:
        mine.cleanup()
        theirs.cleanup()
        Path(tempfile.gettempdir(), "docparse-landlock-probe").unlink(missing_ok=True)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("landlock"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_CHILD_UID": "0", "DOCPARSE_CHILD_LANDLOCK": "true"},
    ) as running:
        yield running


def test_documents_of_every_kind_parse_in_confined_children(stack: LocalStack) -> None:
    """Every example (PDF, scans, Office, ODF, EPUB, e-mail, RTF, HTML, images...), a scan
    read by OCR, a Word 6 file read by antiword (a program the child runs, with temporary
    files) and an Excel 95 workbook, through gateway, parser_svc and its fork server, in
    children that keep the server's uid and confine themselves."""
    documents = {path.name: path.read_bytes() for path in sorted(EXAMPLES.iterdir())}
    documents |= {
        "scan.pdf": scan("en", dpi=200, seed=1).pdf,
        "minutes.doc": fixtures.word6_doc("Minutes of the committee"),
        "budget.xls": fixtures.excel95_xls([["Item", "Cost"], ["Chairs", 120.0]]),
    }
    log = next(child.log for child in stack.children if child.name.startswith("parser"))
    assert "parse children confine their files with Landlock" in log.read_text()
    with Client(stack.gateway_addresses[0]) as client:
        jobs = {name: client.submit(name, data).job.job_id for name, data in documents.items()}
        for name, job_id in jobs.items():
            job = list(client.watch(job_id))[-1]
            assert job.state == job_pb2.STATE_SUCCEEDED, (name, job.error)
            assert job.result.char_count > 0, name
        package = client.result(jobs["scan.pdf"])
        assert package.pages[0].ocr and "\n".join(p.text for p in package.pages).strip()
        words = "\n".join(page.text for page in client.result(jobs["minutes.doc"]).pages)
        assert "committee" in words
