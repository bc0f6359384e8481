"""A long PDF read in page ranges by forked siblings (parser_svc/parsers/pdf_split.py, the
processes in parser_svc/child/page_siblings.py) gives the package one process gives, byte for
byte, with the same asset files and nothing else left in the assets directory; its progress
never goes back; a sibling's failure is the document's failure, a sibling's crash the child's,
and a sibling never outlives the child. Checked on a generated document with text, ruled tables,
images shown in both halves, an image-only page read by OCR and a second image limit, and on
every PDF of the shared corpus when present."""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import os
import resource
import signal
import threading
import time
from base64 import b64decode
from collections.abc import Callable, Iterator
from pathlib import Path

import pymupdf
import pytest

from docparse.client import Client
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2
from parser_svc.child import page_siblings, parse_child
from parser_svc.child.draft_pages import draft_path, wanted_path, writing_drafts
from parser_svc.child.page_siblings import SiblingCrashed
from parser_svc.child.parse_child import parse
from parser_svc.parsers import (
    ParseFailure,
    ParseOptions,
    pdf_pages,
    pdf_split,
    too_large,
)
from parser_svc.parsers.pdf_chunks import ChunkClaims
from tests import fixtures
from tests.conftest import make_stack
from tests.docparse_server.test_observability import scrape, total
from tests.fixtures.drawings import drawing_zoo_pdf
from tests.helpers import eventually

CORPUS = Path(__file__).resolve().parents[4] / "shared" / "corpus"


def mixed_long_pdf(pages: int = 24) -> bytes:
    """Running text, the drawing zoo's ruled tables, three images of which one is shown on
    pages of every range, and an image-only page (OCR) near the end."""
    doc = pymupdf.open()
    zoo = pymupdf.open(stream=drawing_zoo_pdf(), filetype="pdf")
    scan = pymupdf.open(stream=fixtures.image_only_pdf(), filetype="pdf")
    red, green, blue = (fixtures._png(64, 48, c) for c in ((200, 30, 30), (30, 200, 30), (0, 0, 9)))
    for number in range(1, pages + 1):
        if number % 6 == 3:
            doc.insert_pdf(zoo, from_page=number % zoo.page_count, to_page=number % zoo.page_count)
            continue
        if number == pages - 2:
            doc.insert_pdf(scan)
            continue
        page = doc.new_page()
        page.insert_text((72, 72), f"Section {number}", fontsize=16)
        page.insert_textbox(
            pymupdf.Rect(72, 100, 520, 400), f"Paragraph of page {number}. " * 40, fontsize=9
        )
        if number % 4 == 1:
            page.insert_image(pymupdf.Rect(72, 420, 200, 520), stream=red)
        if number == 5:
            page.insert_image(pymupdf.Rect(72, 600, 200, 700), stream=green)
        if number == pages - 1:
            page.insert_image(pymupdf.Rect(300, 600, 428, 700), stream=blue)
    data: bytes = doc.tobytes()
    return data


def _read(data: bytes, tmp: Path, processes: int, **overrides: object) -> tuple[str, list[str]]:
    """The package's hash, the asset files left, and checks on the progress reported. Every
    image is stored (images "all") unless `overrides` say otherwise."""
    assets = tmp / f"assets-{processes}-{time.monotonic_ns()}"
    overrides = {"images": "all", **overrides}
    options = ParseOptions.defaults(
        assets_dir=assets, page_processes=processes, pdf_split_min_pages=4, **overrides
    )
    seen: list[int] = []
    package = parse("pdf", data, lambda done, total, stage: seen.append(done), options)
    assert seen == sorted(seen), "progress went back"
    assert seen[-1] == len(package.pages)
    files = sorted(p.name for p in assets.iterdir()) if assets.exists() else []
    assert files == sorted(a.asset_id for a in package.assets), "files beside the package's"
    return hashlib.sha256(package.SerializeToString(deterministic=True)).hexdigest(), files


def test_chunks_are_dealt_out_in_turn_and_only_for_long_documents() -> None:
    assert pdf_split.plan(100, 1, 24) == [(range(100), 0)]
    assert pdf_split.plan(100, 4, 0) == [(range(100), 0)]
    assert pdf_split.plan(47, 2, 24) == [(range(47), 0)]  # two would have under 24 pages each
    assert pdf_split.plan(48, 2, 24) == [
        (range(i, i + 8), n % 2) for n, i in enumerate(range(0, 48, 8))
    ]
    three = pdf_split.plan(100, 3, 24)
    assert [owner for _, owner in three] == [0, 1, 2] * 4 + [0]
    assert [page for pages, _ in three for page in pages] == list(range(100))
    assert pdf_split.plan(20, 4, 4) == [(range(i, i + 5), i // 5) for i in range(0, 20, 5)]


@pytest.mark.parametrize(("processes", "pages"), [(2, 24), (3, 24), (2, 60), (3, 60)])
def test_split_package_is_the_single_process_package(
    tmp_path: Path, processes: int, pages: int
) -> None:
    """24 pages: a chunk for each process; 60: several for each, dealt out in turn."""
    data = mixed_long_pdf(pages)
    one = _read(data, tmp_path, 1)
    assert len(one[1]) == 4  # the three images and the scanned page, each stored once
    assert _read(data, tmp_path, processes) == one


@pytest.mark.parametrize("images", ["none", "referenced"])
def test_split_package_is_the_single_process_package_in_each_image_mode(
    tmp_path: Path, images: str
) -> None:
    data = mixed_long_pdf()
    one = _read(data, tmp_path, 1, images=images)
    assert _read(data, tmp_path, 2, images=images) == one


def test_a_page_range_is_split_like_the_whole_document(tmp_path: Path) -> None:
    data = mixed_long_pdf()
    one = _read(data, tmp_path, 1, pages="2-")
    assert _read(data, tmp_path, 3, pages="2-") == one


def test_encrypted_pdf_splits_with_the_password_given_once(tmp_path: Path) -> None:
    """The siblings read the document the child opened and authenticated: the password is
    never passed on, and the package is the single-process one (decrypted flag included)."""
    doc = pymupdf.open(stream=mixed_long_pdf(), filetype="pdf")
    data = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="s3cret", owner_pw="own")
    one = _read(data, tmp_path, 1, password="s3cret")
    assert _read(data, tmp_path, 2, password="s3cret") == one
    with pytest.raises(ParseFailure) as caught:
        _read(data, tmp_path, 2, password="wrong")
    assert caught.value.reason == "WRONG_PASSWORD"


@pytest.mark.parametrize("max_assets", [1, 2])
def test_asset_limit_in_play_gives_the_single_process_answer(
    tmp_path: Path, max_assets: int
) -> None:
    """Over the image limit the range is read again here: the same images kept, the same
    warning, and no file of an image only the sibling kept (with 2, the sibling stores the
    scanned page's image, which the single process drops) left in the assets directory."""
    data = mixed_long_pdf()
    one = _read(data, tmp_path, 1, max_assets=max_assets)
    assert len(one[1]) == max_assets
    assert _read(data, tmp_path, 2, max_assets=max_assets) == one


def _sibling_only(action: object) -> object:
    """A replacement for pdf_pages._page that does `action` in a sibling (not in this process)."""
    me = os.getpid()
    real = pdf_pages._page

    def page(doc, index, options, assets, state):  # type: ignore[no-untyped-def]
        if os.getpid() != me:
            action()  # type: ignore[operator]
        return real(doc, index, options, assets, state)

    return page


def _fork_then(
    ready: Callable[[page_siblings.Sibling, list[range]], bool],
) -> pdf_split.ForkRange:
    """The parse child's fork_sibling, returning only once `ready` holds for the sibling (the
    child waits: what the sibling claims meanwhile, it claims alone)."""

    def fork(
        claims: pdf_split.Claims, chunks: list[range], read_range: pdf_split.ReadRange
    ) -> page_siblings.Sibling:
        sibling = page_siblings.fork_sibling(claims, chunks, read_range)

        def holds() -> bool:
            sibling.poll()
            return ready(sibling, chunks)

        eventually(holds, 30, "the sibling got there")
        return sibling

    return fork


def test_sibling_unexpected_error_reads_the_range_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = mixed_long_pdf()
    one = _read(data, tmp_path, 1)

    def fail() -> None:
        raise RuntimeError("a bug that only the sibling meets")

    monkeypatch.setattr(pdf_pages, "_page", _sibling_only(fail))
    assert _read(data, tmp_path, 2) == one


def test_sibling_error_in_a_later_chunk_reads_that_one_and_the_rest_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """60 pages, chunks of 8: the child took chunk 0 (pages 1-8) and waits while the sibling
    claims and reads the next two (9-24), then fails on its third (25-32) and stops. Its two
    chunks are added as read; the child reads the failed one, and claims and reads the rest."""
    data = mixed_long_pdf(60)
    one = _read(data, tmp_path, 1)
    me, real = os.getpid(), pdf_pages._page

    def page(doc, index, options, assets, state):  # type: ignore[no-untyped-def]
        if os.getpid() != me and index >= 24:
            raise RuntimeError("a bug the sibling meets in its third chunk")
        return real(doc, index, options, assets, state)

    def stopped(sibling: page_siblings.Sibling, _chunks: list[range]) -> bool:
        if not sibling.ended:
            return False
        assert [sibling.answered(n) for n in range(5)] == [False, True, True, True, False]
        return True

    monkeypatch.setattr(pdf_pages, "_page", page)
    monkeypatch.setattr(parse_child, "fork_sibling", _fork_then(stopped))
    assert _read(data, tmp_path, 2) == one
    assert pdf_split.last_processes == 2  # its chunks before the error were taken


def test_the_child_reads_ahead_while_a_siblings_chunk_is_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """60 pages, chunks of 8: the sibling's first chunk (pages 9-16) is held until the child
    has read page 60. The child does not wait for it: it claims and reads every chunk left
    into parts (pages 17-60, OCR and images among them), then adds the sibling's chunk and
    its own in page order: the single process's package and asset files, progress never
    going back, and the sibling's chunk taken (it never timed out)."""
    data = mixed_long_pdf(60)
    one = _read(data, tmp_path, 1)
    me, real = os.getpid(), pdf_pages._page
    last = tmp_path / "the-child-read-page-60"

    def page(doc, index, options, assets, state):  # type: ignore[no-untyped-def]
        if os.getpid() == me and index == 59:
            last.touch()
        elif os.getpid() != me and index == 8:
            eventually(last.exists, 60, "the child read ahead to page 60")
        return real(doc, index, options, assets, state)

    monkeypatch.setattr(pdf_pages, "_page", page)
    assert _read(data, tmp_path, 2) == one
    assert pdf_split.last_processes == 2


def test_sibling_document_failure_fails_the_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail() -> None:
        raise too_large("page over the limit")

    monkeypatch.setattr(pdf_pages, "_page", _sibling_only(fail))
    with pytest.raises(ParseFailure) as caught:
        _read(mixed_long_pdf(), tmp_path, 2)
    assert caught.value.reason == "DOCUMENT_TOO_LARGE"


def test_sibling_crash_is_raised_with_its_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash() -> None:
        faulthandler.disable()  # pytest's handler would print the sibling's stack
        os.kill(os.getpid(), signal.SIGSEGV)

    monkeypatch.setattr(pdf_pages, "_page", _sibling_only(crash))
    with pytest.raises(SiblingCrashed) as caught:
        _read(mixed_long_pdf(), tmp_path, 2)
    assert caught.value.signum == signal.SIGSEGV


def _drafts(
    data: bytes, tmp: Path, processes: int, wanted_after: int | None = 0
) -> list[tuple[int, bytes]]:
    """The draft parts a parse child announces, in order: (page number, part). Drafts are
    wanted (the worker's file) from the start, once `wanted_after` pages are done, or never
    (None)."""
    scratch = tmp / f"scratch-{processes}-{time.monotonic_ns()}"
    scratch.mkdir()
    events: list[dict[str, object]] = []
    options = ParseOptions.defaults(
        assets_dir=scratch / "assets", page_processes=processes, pdf_split_min_pages=4
    )

    def progress(done: int, total: int, stage: str) -> None:
        if wanted_after is not None and done >= wanted_after:
            wanted_path(scratch).touch()

    progress(0, 0, "opening")
    with writing_drafts(scratch, lambda **event: events.append(event)):
        parse("pdf", data, progress, options)
    drafts = []
    for event in events:
        assert event["event"] == "pages", event
        for number, inline in event["parts"]:  # type: ignore[attr-defined]
            part = draft_path(scratch, number).read_bytes() if inline is None else b64decode(inline)
            drafts.append((number, part))
    return drafts


def test_a_siblings_pages_are_drafts_as_it_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page a sibling reads is a draft the moment it is read (relayed by the child when it
    next polls), not only once the child adds its chunk: here the child, which took chunk 0
    (pages 1-8) before the sibling started, waits until the sibling has read the two chunks
    left (pages 9-24, claimed while the child waited) before reading page 1, and the
    sibling's drafts come first. Every page is drafted once, and each draft is the part one
    process drafts."""
    data = mixed_long_pdf()

    def read_the_rest(sibling: page_siblings.Sibling, chunks: list[range]) -> bool:
        return sibling.done >= sum(len(pages) for pages in chunks[1:])

    one = _drafts(data, tmp_path, 1)
    assert [number for number, _ in one] == list(range(1, 25))
    monkeypatch.setattr(parse_child, "fork_sibling", _fork_then(read_the_rest))
    two = _drafts(data, tmp_path, 2)
    assert [number for number, _ in two] == [*range(9, 25), *range(1, 9)]
    assert sorted(two) == one


def test_nothing_is_drafted_until_a_reader_asks_then_the_pages_read_before_come_first(
    tmp_path: Path,
) -> None:
    """Drafts cost a parse nobody reads: without the worker's file none is written. Once it
    appears (here after page 6), each process drafts the pages it read before, then each page
    it reads: every page once, each the part a parse that drafted from the start announces,
    with one process or with a sibling (whose earlier ranges the child drafts as it adds
    them)."""
    data = mixed_long_pdf()
    assert _drafts(data, tmp_path, 1, wanted_after=None) == []
    assert _drafts(data, tmp_path, 2, wanted_after=None) == []
    from_start = _drafts(data, tmp_path, 1)
    late = _drafts(data, tmp_path, 1, wanted_after=6)
    assert late == from_start  # 1-7 at once when page 7 is added, then one by one
    assert sorted(_drafts(data, tmp_path, 2, wanted_after=6)) == from_start


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_sibling_dies_with_the_child(tmp_path: Path) -> None:
    """A child killed mid-parse (a cancel, the wall-clock limit) leaves no sibling running."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the parse child: forks a sibling that would read for a minute
        try:
            os.close(read)

            def slow(pages: range, report: object) -> pdf_split.Part:
                (tmp_path / "reading").touch()  # the sibling is set up and reads
                time.sleep(60)
                return pdf_split.Part()

            sibling = page_siblings.fork_sibling(ChunkClaims(1), [range(10, 20)], slow)
            os.write(write, f"{sibling.pid}\n".encode())
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        sibling_pid = int(pipe.readline())
    deadline = time.monotonic() + 30
    while not (tmp_path / "reading").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _alive(sibling_pid)
    # it holds nothing of the child's socket to the worker (the worker reads it to its end)
    assert os.readlink(f"/proc/{sibling_pid}/fd/1") == os.devnull
    assert os.readlink(f"/proc/{sibling_pid}/fd/0") == os.devnull
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    deadline = time.monotonic() + 10
    while _alive(sibling_pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(sibling_pid), "the sibling outlived its parse child"


def _corpus_pdfs() -> list[Path]:
    return sorted((CORPUS / "text_pdf").glob("*.pdf")) + sorted(
        (CORPUS / "scanned_pdf").glob("*.pdf")
    )


@pytest.mark.slow  # the corpus PDFs
@pytest.mark.skipif(not _corpus_pdfs(), reason=f"the shared corpus is absent ({CORPUS})")
def test_corpus_pdfs_split_as_read_whole(tmp_path: Path) -> None:
    """Every corpus PDF of 8 pages or more, the damaged ones among them (a broken page that
    mupdf repairs with ~140 warnings: no chunk is read ahead, the warnings keep page order)."""
    damaged = sorted((CORPUS / "corrupt_pdf").glob("*.pdf"))
    read = 0
    for path in _corpus_pdfs() + damaged:
        data = path.read_bytes()
        try:
            with pymupdf.open(stream=data, filetype="pdf") as doc:
                if doc.page_count < 8:
                    continue
        except Exception:  # what mupdf cannot open has no pages to split
            continue
        assert _read(data, tmp_path, 2) == _read(data, tmp_path, 1), path.name
        read += path in damaged
    assert read >= 1, "no damaged PDF of 8 pages or more in the corpus"


def _in_a_child(run: object) -> str:
    """`run()`'s answer (a string), run in a forked process of its own (its limits stay
    there)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        answer = "?"
        try:
            os.close(read)
            answer = run()  # type: ignore[operator]
        except BaseException as err:
            answer = f"raised {type(err).__name__}: {err}"
        finally:
            os.write(write, str(answer).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    return answer


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_sibling_out_of_memory_is_the_documents(tmp_path: Path) -> None:
    """A sibling over its address-space limit: a MemoryError is raised here (the child reports
    DOCUMENT_TOO_LARGE); a sibling that passed 75 % of it and then died in C is a crash that
    carries the memory it reached (the worker reports DOCUMENT_TOO_LARGE, as for the child)."""
    data = mixed_long_pdf()
    vm = _vm_bytes()  # the limit leaves this process half its size again: 75 % is above it

    def parse_limited(action: object) -> str:
        resource.setrlimit(resource.RLIMIT_AS, (vm * 3 // 2, resource.RLIM_INFINITY))
        pdf_pages._page = _sibling_only(action)  # type: ignore[assignment]
        try:
            _read(data, tmp_path, 2)
        except SiblingCrashed as crash:
            return f"crashed {crash.signum} high {crash.memory_high_mb}"
        return "parsed"

    def raise_memory_error() -> None:
        bytearray(vm)

    assert _in_a_child(lambda: parse_limited(raise_memory_error)) == "raised MemoryError: memory"

    def abort(room: float) -> Callable[[], None]:
        def run() -> None:
            kept = bytearray(int(vm * room))
            if room:  # the watch has said so once it has ended
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and any(
                    t.name == page_siblings.MEMORY_WATCH for t in threading.enumerate()
                ):
                    time.sleep(0.005)
            faulthandler.disable()
            os.kill(os.getpid(), signal.SIGABRT)
            del kept

        return run

    sigabrt = int(signal.SIGABRT)
    assert _in_a_child(lambda: parse_limited(abort(0.0))) == f"crashed {sigabrt} high 0"
    answer = _in_a_child(lambda: parse_limited(abort(0.35)))  # past 75 % of the limit
    assert answer.startswith(f"crashed {sigabrt} high "), answer
    assert int(answer.rsplit(" ", 1)[1]) * 1024 * 1024 > vm * 3 // 2 * 0.75


@contextlib.contextmanager
def _replica(tmp_path: Path, **env: str) -> Iterator[tuple[LocalStack, Callable[[str], float]]]:
    """A one-replica stack with two cores for page ranges, and how much a PDF metric of that
    replica has grown since the stack started."""
    stack = make_stack(
        tmp_path / "stack",
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_OCR_PAGE_THREADS": "2", **env},
    )
    stack.start()
    try:
        metrics = stack.parsers[0].metrics_address
        before = scrape(metrics)

        def grew(name: str) -> float:
            now = total([scrape(metrics)], name, content_type="pdf")
            return now - total([before], name, content_type="pdf")

        yield stack, grew
    finally:
        stack.stop()


@pytest.mark.stack  # a stack (_replica)
def test_lone_long_pdf_through_a_stack_uses_two_processes(tmp_path: Path) -> None:
    """A replica with two cores and nothing else to do reads a long PDF in two processes: the
    package a user downloads is the single-process one, the replica counts two processes for
    the parse, and no process of the parse outlives the job."""
    data = mixed_long_pdf(60)
    single = parse("pdf", data, lambda *_: None, ParseOptions.defaults(assets_dir=tmp_path / "a"))
    with _replica(tmp_path, DOCPARSE_PDF_SPLIT_MIN_PAGES="24") as (stack, grew):
        with Client(stack.gateway_addresses[0]) as client:
            job = client.parse(data, file_name="long.pdf")
            package = client.result(job.job_id)
        assert grew("docparse_parse_seconds_count") == 1
        assert grew("docparse_parse_processes_total") == 2
        assert [p.SerializeToString(deterministic=True) for p in package.pages] == [
            p.SerializeToString(deterministic=True) for p in single.pages
        ]
        assert [a.sha256 for a in package.assets] == [a.sha256 for a in single.assets]
        assert list(package.warnings) == list(single.warnings)
        # A parse process's command line names the job's upload (a sibling's is its child's).
        left = [pid for pid, cmd in _command_lines().items() if job.job_id.encode() in cmd]
        assert left == [], f"processes of the parse left: {left}"


@pytest.mark.stack  # a stack (_replica)
def test_long_pdfs_waiting_in_the_queue_are_read_whole(tmp_path: Path) -> None:
    """A split pays only on cores that stay idle: a long PDF that starts while another job
    waits in the queue is read by one process; the last one, with nothing waiting, by two."""
    workbook = fixtures.big_xlsx(tmp_path / "slow.xlsx", rows=30_000)  # ~4 s to parse
    data = mixed_long_pdf(60)
    with _replica(tmp_path, DOCPARSE_WORKER_CONCURRENCY="1") as (stack, grew):
        with Client(stack.gateway_addresses[0]) as client:
            slow = client.submit("slow.xlsx", workbook.read_bytes()).job
            first = client.submit("first.pdf", data).job
            second = client.submit("second.pdf", mixed_long_pdf(61)).job  # not a duplicate
            # the premise: both PDFs were queued while the only slot was busy
            assert client.status(slow.job_id).job.state == job_pb2.STATE_RUNNING
            for job in (slow, first, second):
                client.wait(job.job_id)
        assert grew("docparse_parse_processes_total") == 1 + 2


def _command_lines() -> dict[int, bytes]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                found[int(entry.name)] = (entry / "cmdline").read_bytes()
    return found
