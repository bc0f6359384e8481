"""Fair parse scheduling (bench_fairness.py --only parse): B's one-page job while A holds every
parse slot and has scanned jobs queued, and a single tenant's one-page jobs/s, with fair
admission (parser_svc/state/admission.py) and without (DOCPARSE_FAIR_ADMISSION=false, first
come first served), each on a stack of its own in the same run (1 replica, 1 gateway).

Per stack: (1) a single tenant's one-page jobs/s (`--jobs` jobs, 8 clients); (2) B's lone
one-page job, submit to SUCCEEDED (also the cost of admission on a lone job); (3) A submits
`--a-jobs` three-page scanned PDFs (OCR: seconds each) and, once A's jobs run on every slot,
B's one-page job again, `--samples` times one after another (`--fifo-samples` without fair
admission: each waits for all of A's backlog)."""

from __future__ import annotations

import shutil
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pymupdf

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from tests.fixtures.scans import scan, scans_pdf
from tests.helpers import make_pdf, stub


class Caller:
    def __init__(self, stack: LocalStack, name: str) -> None:
        self.channel, self.stub = stub(stack.gateway_addresses[0])
        self.metadata = (("x-api-key", f"key-{name}"),)

    def submit(self, content: bytes) -> job_pb2.Job:
        request = parser_service_pb2.SubmitJobRequest(file_name="doc.pdf", content=content)
        return self.stub.SubmitJob(request, metadata=self.metadata, timeout=60).job

    def ended(self, job_id: str) -> job_pb2.Job:
        return ended(self.stub, self.metadata, job_id)

    def state(self, job_id: str) -> int:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        return int(self.stub.GetStatus(request, metadata=self.metadata, timeout=10).job.state)

    def timed(self, content: bytes) -> float:
        started = time.perf_counter()
        job = self.ended(self.submit(content).job_id)
        assert job.state == job_pb2.STATE_SUCCEEDED, job
        return time.perf_counter() - started


def ended(s: parser_service_pb2_grpc.ParserServiceStub, metadata: Any, job_id: str) -> job_pb2.Job:
    last = job_pb2.Job()
    watch = parser_service_pb2.WatchJobRequest(job_id=job_id)
    for event in s.WatchJob(watch, metadata=metadata, timeout=900):
        if event.HasField("job"):
            last = event.job
    return last


def scanned(pages: bytes, label: str) -> bytes:
    """The three-page scan with a title of its own: other bytes (no dedupe), the same OCR."""
    doc = pymupdf.open(stream=pages, filetype="pdf")  # type: ignore[no-untyped-call]
    doc.set_metadata({"title": label})
    data: bytes = doc.tobytes()  # type: ignore[no-untyped-call]
    return data


def throughput(caller: Caller, jobs: int, clients: int = 8) -> float:
    documents = [make_pdf(1, f"rate {uuid.uuid4().hex}") for _ in range(jobs)]
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        took = list(pool.map(caller.timed, documents))
    assert len(took) == jobs
    return jobs / (time.perf_counter() - started)


def p50_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


def one_stack(root: Path, env: dict[str, str], fair: bool, args: Any) -> dict[str, Any]:
    env = {**env, "DOCPARSE_FAIR_ADMISSION": "true" if fair else "false"}
    if args.admit_window:
        env["DOCPARSE_ADMIT_WINDOW"] = str(args.admit_window)
    if args.admit_reserve:
        env["DOCPARSE_ADMIT_RESERVE"] = args.admit_reserve
    out: dict[str, Any] = {}
    shutil.rmtree(root, ignore_errors=True)  # no queue or backlog left by an earlier run
    with LocalStack(root, replicas=1, gateways=1, env="bench", extra_env=env) as stack:
        a, b = Caller(stack, "a"), Caller(stack, "b")
        b.timed(make_pdf(1, "warm"))
        out["one_page_jobs_per_s"] = round(throughput(b, args.jobs), 1)
        alone = [b.timed(make_pdf(1, f"b {uuid.uuid4().hex}")) for _ in range(args.samples)]
        out["b_alone_p50_ms"] = p50_ms(alone)
        if args.a_jobs:
            out.update(under_load(a, b, fair, args))
    return out


def under_load(a: Caller, b: Caller, fair: bool, args: Any) -> dict[str, Any]:
    """B's one-page jobs, one after another, while A's scanned jobs hold every slot."""
    pages = scans_pdf([scan("en", seed=i) for i in range(3)])
    with ThreadPoolExecutor(4) as pool:
        backlog = list(
            pool.map(lambda i: a.submit(scanned(pages, f"a {i}")).job_id, range(args.a_jobs))
        )
    deadline = time.monotonic() + 60
    while a.state(backlog[0]) != job_pb2.STATE_RUNNING and time.monotonic() < deadline:
        time.sleep(0.05)
    samples = args.samples if fair else args.fifo_samples
    loaded, queued = [], []
    for _ in range(samples):
        loaded.append(b.timed(make_pdf(1, f"b {uuid.uuid4().hex}")))
        queued.append(sum(a.state(j) == job_pb2.STATE_QUEUED for j in backlog))
    return {
        "b_while_a_backlog_p50_ms": p50_ms(loaded) if loaded else None,
        "b_while_a_backlog_ms": [round(s * 1000) for s in loaded],
        "a_still_queued_after_each_b": queued,
    }


def bench_parse(root: Path, env: dict[str, str], args: Any) -> dict[str, Any]:
    """Both stacks, fair admission first (`--fifo-first`: last), `--rounds` times."""
    out: dict[str, Any] = {"fair": [], "fifo": []}
    order = (False, True) if args.fifo_first else (True, False)
    for _ in range(args.rounds):
        for fair in order:
            name = "fair" if fair else "fifo"
            out[name].append(one_stack(root / name, env, fair, args))
    return out
