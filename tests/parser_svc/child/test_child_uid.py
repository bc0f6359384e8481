"""A parse child started by a server running as root drops to an unprivileged uid once it has
opened its document (parser_svc/child/privileges.py): code run by a hostile document then finds
another job's upload, result and password file, the API keys file and the webhook secrets
file closed to it, and cannot find another child's scratch directory. Documents of every kind
still parse through a real stack. A server that is not root cannot drop: its children keep its
uid, and these tests check that fallback instead."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pymupdf
import pytest

from docparse.client import Client
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2
from parser_svc.child.draft_pages import wanted_path
from parser_svc.child.fork_server import ForkServer
from parser_svc.child.privileges import ChildScratch
from parser_svc.child.sandbox import Limits, ParseProcess, SpawnedChild, run_parse
from parser_svc.parsers import ParseOptions
from parser_svc.work.blobs import BlobStore
from tests import fixtures
from tests.conftest import make_stack
from tests.fixtures.scans import scan
from tests.helpers import eventually, make_pdf

ROOT = Path(__file__).resolve().parents[3]
CHILD = 65534  # Settings.child_uid and child_gid by default
ROOT_RUN = os.geteuid() == 0
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc")


def _ids(pid: int) -> tuple[list[int], list[int], str]:
    """(real, effective, saved, fs uids), the same of gids, and the supplementary groups."""
    lines = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    uids = [int(v) for v in lines["Uid"].split()]
    gids = [int(v) for v in lines["Gid"].split()]
    return uids, gids, lines["Groups"].strip()


def _owner(path: str) -> tuple[int, int]:
    status = os.stat(path)
    return status.st_uid, status.st_gid


@pytest.fixture
def shared_volume() -> Iterator[Path]:
    """A blob store's volume as a deployment mounts it: a directory others may cross (unlike
    pytest's tmp_path, 0700, which would hide everything in it and prove nothing)."""
    path = Path(tempfile.mkdtemp(prefix="docparse-volume-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _scratch() -> tuple[ChildScratch, tempfile.TemporaryDirectory[str]]:
    """A job's scratch directory as the worker makes it, and its maker."""
    owner = ChildScratch(CHILD, CHILD)
    return owner, owner.make()


async def _linger(
    server: ForkServer | None, owner: ChildScratch, scratch: Path, document: Path
) -> tuple[ParseProcess, int]:
    """A parse child of a 3-page PDF (a pause per page), started the way the worker starts it,
    still parsing when this returns, and its pid."""
    argv = ["pdf", str(document), "package.pb", "60", "2048"]
    forked = await server.launch(argv, scratch) if server is not None else None
    child: ParseProcess = forked or await SpawnedChild.start(argv, scratch)
    options = ParseOptions.defaults(
        assets_dir=scratch / "assets", page_delay_ms=1500, **owner.drop_to()
    )
    await child.send(options.to_json().encode())
    assert await asyncio.wait_for(child.stdout.readline(), 60), "the child said nothing"
    pid = forked.pid if forked is not None else child._proc.pid  # type: ignore[attr-defined]
    return child, pid


@linux_only
@pytest.mark.parametrize("launch", ["fork", "spawn"])
async def test_a_parse_child_runs_as_the_unprivileged_uid(shared_volume: Path, launch: str) -> None:
    blobs = BlobStore(shared_volume, "test")
    blobs.put_input("job-a", make_pdf(3, "a tenant's document"))
    owner, made = _scratch()
    server = ForkServer() if launch == "fork" else None
    document = blobs.path(blobs.input_key("job-a"))
    child, pid = await _linger(server, owner, Path(made.name), document)
    try:
        uids, gids, groups = _ids(pid)
        if ROOT_RUN:
            assert uids == [CHILD] * 4 and gids == [CHILD] * 4 and groups == ""
            assert owner.owner == (CHILD, CHILD)
            assert _owner(made.name) == (CHILD, CHILD)
            # Another child of the same uid cannot look into this one (non-dumpable).
            assert _owner(f"/proc/{pid}/status") == (0, 0)
        else:  # no drop is possible: the fallback is today's behaviour
            assert uids == [os.geteuid()] * 4
            assert owner.owner is None and owner.drop_to() == {"child_uid": 0, "child_gid": 0}
    finally:
        child.kill()
        await child.wait()
        if server is not None:
            server.close()
        made.cleanup()


# What a dropped child does first (parse_child.main): open its document, drop, then read it.
# Then it tries what a hostile document's code would.
PROBE = """
import json, os, sys
from pathlib import Path
from parser_svc.child.privileges import drop_privileges
own, scratch, room, *others = sys.argv[1:]
document = open(own, "rb")
dropped = drop_privileges(int(os.environ["CHILD_UID"]), int(os.environ["CHILD_UID"]))
seen = {"dropped": dropped, "euid": os.geteuid(), "own": len(document.read())}
import decimal, glob  # not imported yet: the interpreter's own modules still load
(Path(scratch) / "written").write_bytes(b"ok")
for path in [room, *others]:
    try:
        (os.listdir if os.path.isdir(path) else lambda p: open(p, "rb").read(1))(path)
        seen[path] = "read"
    except PermissionError:
        seen[path] = "denied"
print(json.dumps(seen))
"""


@linux_only
def test_a_child_cannot_open_another_jobs_files_or_the_service_secrets(
    shared_volume: Path,
) -> None:
    blobs = BlobStore(shared_volume, "test")
    blobs.put_input("job-a", b"%PDF- the child's own upload")
    blobs.put_input("job-b", b"%PDF- another tenant's upload")
    blobs.put_secret("job-b", "another tenant's password")
    result = blobs.path(blobs.put_result("job-b", 1, "ab" * 32, b"another tenant's package"))
    ref = blobs.put_page_part("job-b", "cd" * 32, b"another tenant's page")
    part = blobs.path(blobs.page_part_key("job-b", ref))
    secrets_dir = shared_volume / "etc"
    secrets_dir.mkdir(mode=0o755)
    keys, hooks = secrets_dir / "keys.json", secrets_dir / "webhook-secrets.json"
    for path in (keys, hooks):  # as the README asks (chmod 600)
        path.write_text('{"secret": "s3cr3t"}')
        path.chmod(0o600)
    owner, mine = _scratch()
    others = [
        blobs.path(blobs.input_key("job-b")),
        blobs.path(blobs.secret_key("job-b")),
        result,
        part,
        keys,
        hooks,
    ]
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(blobs.path(blobs.input_key("job-a"))),
             mine.name, str(Path(mine.name).parent), *map(str, others)],
            cwd=mine.name, env={**os.environ, "CHILD_UID": str(CHILD)},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert seen["own"] == len(b"%PDF- the child's own upload")
        assert (Path(mine.name) / "written").read_bytes() == b"ok"
        if not ROOT_RUN:  # the fallback: nothing changes, the server's own files stay its own
            assert seen["dropped"] is False and owner.owner is None
            return
        assert seen["dropped"] is True and seen["euid"] == CHILD
        room = str(Path(mine.name).parent)
        assert {path: seen[path] for path in [room, *map(str, others)]} == {
            path: "denied" for path in [room, *map(str, others)]
        }
    finally:
        mine.cleanup()


@linux_only
async def test_the_worker_runs_a_dropped_parse_end_to_end(shared_volume: Path) -> None:
    """run_parse as the worker calls it: a package, assets and page drafts written by the
    dropped child land in its scratch directory, which the worker then reads and deletes. The
    file by which the worker (root here) asks for drafts is seen by the dropped child."""
    blobs = BlobStore(shared_volume, "test")
    blobs.put_input("job-a", _two_pages())
    owner, made = _scratch()
    scratch = Path(made.name)
    wanted_path(scratch).touch()  # as DraftSwitch.turn_on does
    options = ParseOptions.defaults(assets_dir=scratch / "assets", **owner.drop_to())
    pages: list[int] = []

    async def quiet(*_: object) -> None:
        return None

    async def on_page(drafts: list[tuple[int, bytes | None]]) -> None:
        pages.extend(number for number, _ in drafts)

    server = ForkServer()
    try:
        outcome = await run_parse(
            "pdf", blobs.path(blobs.input_key("job-a")), scratch / "package.pb",
            Limits(60, 60, 2048), quiet, options, server, on_page=on_page,
        )  # fmt: skip
        assert not outcome.reason, outcome.message
        assert outcome.pages == 2 and sorted(pages) == [1, 2]
        written = _files(scratch)  # the second page's draft is too large for its event line
        assert written.pop(wanted_path(scratch).name) == os.geteuid()  # the worker's
        assert {"package.pb", "pages/2.pb"} <= written.keys(), written
        assert any(name.startswith("assets/") for name in written)
        expected = CHILD if ROOT_RUN else os.geteuid()
        assert set(written.values()) == {expected}
    finally:
        server.close()
        made.cleanup()


def _files(scratch: Path) -> dict[str, int]:
    """Each file under `scratch` (relative name) and the uid that owns it."""
    return {
        str(path.relative_to(scratch)): path.stat().st_uid
        for path in scratch.rglob("*")
        if path.is_file()
    }


def _two_pages() -> bytes:
    """A page with a table and an image (an asset), and a page of small print whose draft part
    (~50 KB) the child writes to a file rather than its event line (draft_pages.py)."""
    doc = pymupdf.open(stream=fixtures.pdf_with_table_and_image(), filetype="pdf")
    page = doc.new_page()
    words = " ".join(f"word{i}" for i in range(3000))
    box = pymupdf.Rect(20, 20, page.rect.width - 20, page.rect.height - 20)
    page.insert_textbox(box, words, fontsize=4)
    data: bytes = doc.write()
    return data


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("child-uid"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_PARSE_PAGE_DELAY_MS": "300"},
    ) as running:
        yield running


def _parse_child_uids(job_id: str) -> list[int] | None:
    """The uids of the live parse child reading `job_id`'s upload, once it has changed them
    from root's (a child is forked as root and drops before it reads the document: caught in
    between on a busy machine, it is looked at again); None while none runs."""
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if b"parser_svc.child.parse_child" in cmdline and job_id.encode() in cmdline:
            try:
                uids = _ids(int(entry.name))[0]
            except (OSError, KeyError):
                continue
            return None if ROOT_RUN and uids == [0, 0, 0, 0] else uids
    return None


@linux_only
def test_documents_of_every_kind_parse_in_dropped_children(stack: LocalStack) -> None:
    """A PDF (its child's uid looked up while it parses), a Word 6 file read by antiword (a
    program the dropped child runs, with its temporary files), a DOCX with an image (assets)
    and a scan (OCR), through gateway, parser_svc and its fork server."""
    documents = {
        "long.pdf": (make_pdf(4, "dropped"), "dropped"),
        "minutes.doc": (fixtures.word6_doc("Minutes of the committee"), "committee"),
        "full.docx": (fixtures.docx_full(), ""),
        "scan.pdf": (scan("en", dpi=200, seed=1).pdf, ""),
    }
    with Client(stack.gateway_addresses[0]) as client:
        first = client.submit("long.pdf", documents["long.pdf"][0]).job.job_id
        uids = eventually(lambda: _parse_child_uids(first), 60, "the parse child of the job")
        assert uids == ([CHILD] * 4 if ROOT_RUN else [os.geteuid()] * 4)
        for name, (data, phrase) in documents.items():
            job_id = first if name == "long.pdf" else client.submit(name, data).job.job_id
            job = list(client.watch(job_id))[-1]
            assert job.state == job_pb2.STATE_SUCCEEDED, (name, job.error)
            package = client.result(job_id)
            text = "\n".join(page.text for page in package.pages)
            assert phrase in text, (name, text[:500])
            if name == "scan.pdf":
                assert package.pages[0].ocr and len(text) > 50
