"""Shared test helpers: fixture documents made on the fly and small gRPC conveniences."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import grpc
import pymupdf

from docparse.errors import DocparseError
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc

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
