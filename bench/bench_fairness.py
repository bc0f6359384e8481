"""Fair sharing benchmark: what tenant A's load costs tenant B, each figure against B alone in
the same run, on one local stack with two tenants (API keys), everything on 127.0.0.1.

    .venv/bin/python -m bench.bench_fairness                  # render, webhooks, reads
    .venv/bin/python -m bench.bench_fairness --only render    # one of them
    .venv/bin/python -m bench.bench_fairness --list-jobs-per-s 0 --only reads   # no read limit
    .venv/bin/python -m bench.bench_fairness --only parse     # parse slots (bench/fair_parse.py)

1. render: B's one-page result as JSON over HTTP (GET /v1/jobs/{id}/result), `--samples` times
   one after another, alone, then while A keeps six JSON renders of a 200,000-cell workbook
   going (each of A's six clients asks again as soon as it is answered, 429s included).
2. webhooks: B's webhook delay (the receiver's clock at arrival minus the job's terminal write,
   its update_time), for `--samples` jobs, alone, then while A has 200 callbacks to a black
   hole (a listener on 127.0.0.7 that accepts and never answers).
3. reads: B's GetStatus p50/p99 (one caller), alone, then while A floods ListJobs from 4
   processes; with the stack's default read limits unless `--list-jobs-per-s` says otherwise.

4. parse: B's one-page job while A holds every parse slot and has scanned jobs queued, and a
   single tenant's one-page jobs/s, with and without fair admission (bench/fair_parse.py; its
   own two stacks, so not part of the default run).

Results: a table on stdout and var/bench/fairness.json.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import io
import json
import multiprocessing
import os
import socket
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import openpyxl  # type: ignore[import-untyped]

from bench.fair_parse import bench_parse
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from docparse_server.tenancy import key_digest
from tests.helpers import make_pdf

OUT = Path("var/bench/fairness.json")
HOOK_HOST = "127.0.0.7"
SECRET = "whsec_" + "MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2Nzg5MDE="


def pdf(label: str) -> bytes:
    return make_pdf(1, label)


def workbook(rows: int = 20_000, cols: int = 10) -> bytes:
    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Big")
    for r in range(rows):
        sheet.append([f"row {r}", *range(r * cols, r * cols + cols - 1)])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def stack_env(root: Path, list_jobs_per_s: str) -> dict[str, str]:
    keys = {"keys": [{"sha256": key_digest(f"key-{t}"), "tenant": f"tenant-{t}"} for t in "ab"]}
    secrets = root / "secrets.json"
    secrets.write_text(json.dumps({f"tenant-{t}": {"main": SECRET} for t in "ab"}))
    env = {
        "DOCPARSE_GATEWAY_AUTH": "required",
        "DOCPARSE_GATEWAY_API_KEYS": json.dumps(keys),
        "DOCPARSE_WEBHOOK_SECRETS_FILE": str(secrets),
        "DOCPARSE_WEBHOOK_ALLOW_CIDRS": f"{HOOK_HOST}/32",
        "DOCPARSE_WEBHOOK_POLL_S": "0.2",
    }
    if list_jobs_per_s:
        env["DOCPARSE_LIST_JOBS_PER_S"] = list_jobs_per_s
    return env


class Tenant:
    def __init__(self, stack: LocalStack, name: str) -> None:
        self.channel = grpc.insecure_channel(stack.gateway_addresses[0])
        self.stub = parser_service_pb2_grpc.ParserServiceStub(self.channel)
        self.metadata = (("x-api-key", f"key-{name}"),)
        self.http = stack.http_addresses[0]

    def parsed(self, name: str, content: bytes, callback: str = "") -> job_pb2.Job:
        request = parser_service_pb2.SubmitJobRequest(file_name=name, content=content)
        if callback:
            request.callback.url, request.callback.secret_name = callback, "main"
        job = self.stub.SubmitJob(request, metadata=self.metadata, timeout=60).job
        watch = parser_service_pb2.WatchJobRequest(job_id=job.job_id)
        for event in self.stub.WatchJob(watch, metadata=self.metadata, timeout=600):
            if event.HasField("job"):
                job = event.job
        return job

    def result(self, job_id: str) -> tuple[int, float]:
        started = time.perf_counter()
        conn = http.client.HTTPConnection(self.http, timeout=600)
        try:
            conn.request(
                "GET", f"/v1/jobs/{job_id}/result", headers={"X-Api-Key": self.metadata[0][1]}
            )
            response = conn.getresponse()
            response.read()
            return response.status, time.perf_counter() - started
        finally:
            conn.close()


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"n": len(ordered), "p50_ms": statistics.median(ordered) * 1000, "p99_ms": p99 * 1000}


def while_running(
    load: Callable[[threading.Event], None], threads: int, measure: Callable[[], Any]
) -> Any:
    stop = threading.Event()
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(threads):
            pool.submit(load, stop)
        try:
            return measure()
        finally:
            stop.set()


def bench_render(stack: LocalStack, samples: int) -> dict[str, Any]:
    a, b = Tenant(stack, "a"), Tenant(stack, "b")
    big = a.parsed("big.xlsx", workbook()).job_id
    small = b.parsed("one.pdf", pdf("tenant b")).job_id
    b.result(small)  # warm
    alone = [b.result(small)[1] for _ in range(samples)]
    statuses: list[int] = []

    def load(stop: threading.Event) -> None:
        while not stop.is_set():
            statuses.append(a.result(big)[0])

    def measure() -> list[float]:
        time.sleep(2.0)  # A's six renders under way
        return [b.result(small)[1] for _ in range(samples)]

    loaded = while_running(load, 6, measure)
    return {
        "b_alone": summary(alone),
        "b_while_a_renders_6": summary(loaded),
        "a_answers": {str(s): statuses.count(s) for s in sorted(set(statuses))},
    }


class Hooks(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        super().__init__((HOOK_HOST, 0), HookHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


class HookHandler(http.server.BaseHTTPRequestHandler):
    server: Hooks

    def do_POST(self) -> None:
        now = time.time()
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.server.arrived.setdefault(body["data"]["job_id"], now)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def webhook_delays(b: Tenant, hooks: Hooks, samples: int) -> list[float]:
    delays = []
    url = f"http://{HOOK_HOST}:{hooks.server_address[1]}/hook"
    for i in range(samples):
        job = b.parsed("b.pdf", pdf(f"b {time.time()} {i}"), callback=url)
        ended = job.update_time.ToNanoseconds() / 1e9
        deadline = time.monotonic() + 300
        while job.job_id not in hooks.arrived and time.monotonic() < deadline:
            time.sleep(0.005)
        delays.append(hooks.arrived.get(job.job_id, float("inf")) - ended)
    return delays


def bench_webhooks(stack: LocalStack, samples: int, callbacks: int) -> dict[str, Any]:
    a, b = Tenant(stack, "a"), Tenant(stack, "b")
    hooks = Hooks()
    hole = socket.socket()
    hole.bind((HOOK_HOST, 0))
    hole.listen(1024)
    held: list[socket.socket] = []
    threading.Thread(
        target=lambda: held.extend(iter(lambda: hole.accept()[0], None)), daemon=True
    ).start()
    alone = webhook_delays(b, hooks, samples)
    url = f"http://{HOOK_HOST}:{hole.getsockname()[1]}/never"
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda i: a.parsed("a.pdf", pdf(f"a {time.time()} {i}"), url), range(callbacks)
            )
        )
    loaded = webhook_delays(b, hooks, samples)
    return {"b_alone": summary(alone), f"b_while_a_{callbacks}_black_hole": summary(loaded)}


def bench_reads(stack: LocalStack, seconds: float, nice: int = 0) -> dict[str, Any]:
    a, b = Tenant(stack, "a"), Tenant(stack, "b")
    job = b.parsed("b.pdf", pdf("status")).job_id
    for i in range(50):
        a.stub.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name="a.pdf", content=pdf(f"a {i}")),
            metadata=a.metadata,
        )
    request = parser_service_pb2.GetStatusRequest(job_id=job)

    def polls() -> list[float]:
        out, end = [], time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.perf_counter()
            b.stub.GetStatus(request, metadata=b.metadata, timeout=10)
            out.append(time.perf_counter() - started)
        return out

    alone = polls()
    # A's flood in processes of its own: threads here would share this process's GIL with B's
    # poller and slow it down themselves.
    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
        address = stack.gateway_addresses[0]
        # The floods start together once their interpreters are up (spawning four takes
        # seconds of CPU, which is not the flood's cost); B's polls once they are under way.
        start_at = time.time() + 4.0
        floods = [pool.submit(flood, address, seconds + 1, nice, start_at) for _ in range(4)]
        time.sleep(max(0.0, start_at + 0.5 - time.time()))
        loaded = polls()
        counts = [f.result() for f in floods]
    return {
        "b_getstatus_alone": summary(alone),
        "b_getstatus_while_a_floods_listjobs": summary(loaded),
        "a_listjobs_answered_refused": [sum(c[0] for c in counts), sum(c[1] for c in counts)],
    }


def flood(address: str, seconds: float, nice: int = 0, start_at: float = 0.0) -> tuple[int, int]:
    """Tenant A's ListJobs, as fast as one process can ask, for `seconds` from `start_at`
    (time.time()); `nice`: at that scheduling priority (the flood's own CPU is then the
    box's spare: a client elsewhere)."""
    if nice:
        os.nice(nice)
    time.sleep(max(0.0, start_at - time.time()))
    channel = grpc.insecure_channel(address)
    stub = parser_service_pb2_grpc.ParserServiceStub(channel)
    listing, metadata = parser_service_pb2.ListJobsRequest(page_size=100), (("x-api-key", "key-a"),)
    answered = refused = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            stub.ListJobs(listing, metadata=metadata, timeout=10)
            answered += 1
        except grpc.RpcError:
            refused += 1
    channel.close()
    return answered, refused


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=("render", "webhooks", "reads", "parse"), default=None)
    parser.add_argument("--jobs", type=int, default=200, help="parse: one-page jobs for jobs/s")
    parser.add_argument("--a-jobs", type=int, default=30, help="parse: A's scanned jobs")
    parser.add_argument("--fifo-samples", type=int, default=1, help="parse: B's, without")
    parser.add_argument("--admit-window", type=int, default=0, help="parse: DOCPARSE_ADMIT_WINDOW")
    parser.add_argument("--rounds", type=int, default=1, help="parse: stacks of each kind")
    parser.add_argument("--admit-reserve", default="", help="parse: DOCPARSE_ADMIT_RESERVE")
    parser.add_argument("--fifo-first", action="store_true", help="parse: the FIFO stack first")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--callbacks", type=int, default=200)
    parser.add_argument("--list-jobs-per-s", default="")
    parser.add_argument("--flood-nice", type=int, default=0, help="reads: A's processes' nice")
    args = parser.parse_args()
    root = Path("var/bench/fairness-stack")
    root.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    if args.only == "parse":
        results["parse"] = bench_parse(root, stack_env(root, ""), args)
        print(json.dumps(results, indent=2))
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.with_name("fairness_parse.json").write_text(json.dumps(results, indent=2))
        return
    with LocalStack(
        root, replicas=1, gateways=1, env="bench", extra_env=stack_env(root, args.list_jobs_per_s)
    ) as stack:
        if args.only in (None, "render"):
            results["render"] = bench_render(stack, args.samples)
        if args.only in (None, "webhooks"):
            results["webhooks"] = bench_webhooks(stack, min(args.samples, 10), args.callbacks)
        if args.only in (None, "reads"):
            results["reads"] = bench_reads(stack, 10.0, args.flood_nice)
    print(json.dumps(results, indent=2))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
