"""Jobs through a stack: files submitted from 8 threads with the gRPC stub, one-page files
from concurrent SDK clients, and lone submits with GetStatus round trips. Each sends
`api_key` (a stack with keys; "" for none) and adds (file, job id) of every job to `made`, when
given, for bench.parse.check to download and check after the timed part."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.harness.jobs import run_job
from docparse.client import Client
from docparse.v1 import job_pb2, parser_service_pb2

Made = list[tuple[Path, str]]


def through_stack(
    address: str, paths: list[Path], rounds: int, api_key: str = "", made: Made | None = None
) -> tuple[int, float, list[str]]:
    """`rounds` times every file, 8 at a time: pages of the jobs that succeeded, seconds, and a
    line per failed job."""
    contents = [(path.name, path.read_bytes()) for path in paths]
    metadata = (("authorization", f"Bearer {api_key}"),) if api_key else ()

    def one(item: tuple[str, bytes]) -> job_pb2.Job:
        request = parser_service_pb2.SubmitJobRequest(file_name=item[0], content=item[1])
        return run_job(address, request, metadata=metadata)

    pages = 0
    failures = []
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(rounds):
            for path, job in zip(paths, pool.map(one, contents), strict=True):
                if job.state == job_pb2.STATE_SUCCEEDED:
                    pages += job.result.page_count
                    if made is not None:
                        made.append((path, job.job_id))
                else:
                    failures.append(f"{job.file_name}: {job.error.reason}")
    return pages, time.perf_counter() - started, failures


def concurrent_sdk_jobs(
    address: str, paths: list[Path], clients: int, api_key: str = "", made: Made | None = None
) -> tuple[int, float]:
    """Each of `clients` threads has its own SDK client and parses files one after another."""
    queue = list(paths)
    lock = threading.Lock()
    done = 0

    def client_loop() -> None:
        nonlocal done
        with Client(address, api_key=api_key) as client:
            while True:
                with lock:
                    if not queue:
                        return
                    path = queue.pop()
                job = client.parse(path)
                assert job.state == job_pb2.STATE_SUCCEEDED, job
                with lock:
                    done += 1
                    if made is not None:
                        made.append((path, job.job_id))

    started = time.perf_counter()
    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done, time.perf_counter() - started


def lone_latencies(
    address: str, paths: list[Path], api_key: str = "", made: Made | None = None
) -> tuple[list[float], list[float]]:
    """submit → SUCCEEDED of one file at a time, and GetStatus round trips of those jobs."""
    latencies, status = [], []
    with Client(address, api_key=api_key) as client:
        for path in paths:
            data = path.read_bytes()
            started = time.perf_counter()
            job = client.parse(data, file_name=path.name)
            latencies.append(time.perf_counter() - started)
            assert job.state == job_pb2.STATE_SUCCEEDED, job
            if made is not None:
                made.append((path, job.job_id))
            for _ in range(3):
                started = time.perf_counter()
                client.status(job.job_id)
                status.append(time.perf_counter() - started)
    return latencies, status
