"""Shared test helpers: fixture documents made on the fly and small gRPC conveniences."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import grpc
import pymupdf
from prometheus_client.parser import text_string_to_metric_families

from docparse.client import Client
from docparse.errors import DocparseError
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from docparse.waiting import TERMINAL

T = TypeVar("T")


def make_pdf(pages: int, label: str = "page") -> bytes:
    """A PDF with a text layer: page N says '<label> N of <pages>' plus a paragraph."""
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page()
        page.insert_text((72, 72), f"{label} {number} of {pages}", fontsize=14)
        page.insert_textbox(
            pymupdf.Rect(72, 100, 520, 300),
            "Any replica answers any call because job state lives in Redis. " * 3,
            fontsize=10,
        )
    data: bytes = doc.tobytes()
    return data


def stub(address: str) -> tuple[grpc.Channel, parser_service_pb2_grpc.ParserServiceStub]:
    channel = grpc.insecure_channel(address)
    return channel, parser_service_pb2_grpc.ParserServiceStub(channel)


def served_by(call: grpc.Call) -> list[str]:
    return [str(v) for k, v in (call.trailing_metadata() or ()) if k == "x-served-by"]


def submit(address: str, content: bytes, name: str = "doc.pdf") -> job_pb2.Job:
    channel, s = stub(address)
    with channel:
        return s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name=name, content=content), timeout=30
        ).job


def wait_terminal(address: str, job_id: str, timeout: float = 120) -> job_pb2.Job:
    """Follows WatchJob until the terminal record (the stream ends right after it)."""
    channel, s = stub(address)
    with channel:
        last = job_pb2.Job()
        for event in s.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job_id), timeout=timeout):
            if event.HasField("job"):
                last = event.job
        return last


def rpc_error(fn: Callable[[], object]) -> DocparseError:
    try:
        fn()
    except grpc.RpcError as err:
        return DocparseError.from_rpc_error(err)
    raise AssertionError("the call succeeded; an error was expected")


def eventually(check: Callable[[], T | None], timeout: float = 30, what: str = "") -> T:
    """Polls `check` until it returns a truthy value (a condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(0.05)


def ready_fields(line: str) -> dict[str, str]:
    """The key=value fields of `docparse up`'s ready line."""
    return dict(word.split("=", 1) for word in line.split()[2:] if "=" in word)


class Up:
    """`docparse up ARGS` as a user runs it (a child process), until its ready line; `stop()`
    sends SIGTERM and waits for it to exit."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.output: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "docparse", "up", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            if line.startswith("docparse ready"):
                self.ready = ready_fields(line)
                return
        raise AssertionError(f"docparse up exited {self.proc.wait()}:\n{''.join(self.output)}")

    @property
    def target(self) -> str:
        return self.ready["gateway"].split(",")[0]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


class Recorder:
    """Follows a job through the gateway in a thread (resuming broken streams, as the client
    does) and keeps every record it saw."""

    def __init__(self, target: str, job_id: str) -> None:
        self.records: list[job_pb2.Job] = []
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._run, args=(target, job_id), daemon=True)
        self._thread.start()

    def _run(self, target: str, job_id: str) -> None:
        try:
            with Client(target) as client:
                self.records.extend(client.watch(job_id))
        except Exception as err:
            self.error = err

    def final(self, timeout: float = 120) -> job_pb2.Job:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the watch did not end"
        assert self.error is None, self.error
        return self.records[-1]

    def assert_monotonic(self) -> None:
        versions = [job.version for job in self.records]
        assert all(a < b for a, b in itertools.pairwise(versions)), versions
        dones = [job.progress.done for job in self.records]
        assert dones == sorted(dones), dones

    def assert_ends_once(self) -> None:
        """Versions strictly increase and the one terminal record is the last: a terminal
        state never goes back (nor is written twice)."""
        versions = [job.version for job in self.records]
        assert all(a < b for a, b in itertools.pairwise(versions)), versions
        ended = [job.state in TERMINAL for job in self.records]
        assert ended.count(True) == 1 and ended[-1], [job.state for job in self.records]


CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def corpus_pdfs() -> Iterator[tuple[Path, pymupdf.Document, int]]:
    """The shared corpus' PDFs that pymupdf opens without a password, with their page counts
    (a corrupt file that pymupdf refuses has nothing to read)."""
    for path in sorted(CORPUS.glob("*_pdf/*.pdf")):
        try:
            doc = pymupdf.open(path)  # type: ignore[no-untyped-call]
            if doc.needs_pass:
                continue
            count = doc.page_count
        except Exception:
            continue
        yield path, doc, count


class Stalls:
    """Freezes processes again and again (SIGSTOP for `stop_s`, then SIGCONT for `run_s`) while
    it is open: a server descheduled on a busy node, as the CI box does to it at random. While a
    receiver is stopped its peer keeps sending into the connection's flow-control window, and
    on waking the receiver takes all of it: how much that is, the server decides."""

    def __init__(self, pids: list[int], stop_s: float = 0.3, run_s: float = 0.1) -> None:
        self.pids, self.stop_s, self.run_s = pids, stop_s, run_s
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _signal(self, sig: int) -> None:
        for pid in self.pids:
            os.kill(pid, sig)

    def _loop(self) -> None:
        while not self.done.is_set():
            self._signal(signal.SIGSTOP)
            self.done.wait(self.stop_s)
            self._signal(signal.SIGCONT)
            self.done.wait(self.run_s)

    def __enter__(self) -> Stalls:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self._signal(signal.SIGCONT)


def status_kb(pid: int, field: str) -> int:
    """A size field of /proc/PID/status (VmRSS, VmHWM: the peak), in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def metric(stack: LocalStack, name: str) -> dict[str, float]:
    """Samples of `name` on the stack's first replica, by their labels
    ("cap=tenant,tenant=tenant-a")."""
    url = f"http://{stack.parsers[0].metrics_address}/metrics"
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    return {
        ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }
