"""A real outside client: `buf curl` (npm @bufbuild/buf) with server reflection only.

No local protos are given to buf: everything it knows about docparse.v1 it learns from the
server it talks to, gateway or parser_svc, exactly as a user with nothing but an address would.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.rpc import error_details_pb2

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from tests.conftest import make_stack
from tests.helpers import make_pdf, stub, submit, wait_terminal

REPO = Path(__file__).resolve().parents[2]
BUF_VERSION = "1.75.0"
LOCAL_BUF = REPO / ".tools" / "node_modules" / ".bin" / "buf"
SERVICE = "docparse.v1.ParserService"
# Every RPC of the contract, as the compiled descriptor declares it.
RPCS = {m.name for m in parser_service_pb2.DESCRIPTOR.services_by_name["ParserService"].methods}
REFLECTION = {"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}
TERMINAL = {"STATE_SUCCEEDED", "STATE_FAILED", "STATE_CANCELLED"}
# buf curl exits with the gRPC code shifted left by three bits when the RPC itself fails.
EXIT_NOT_FOUND = 5 << 3


@pytest.fixture(scope="session")
def buf() -> str:
    """The buf binary: the repo's `make tools` copy, one on PATH, or installed here via npm."""
    if LOCAL_BUF.exists():
        return str(LOCAL_BUF)
    on_path = shutil.which("buf")
    if on_path:
        return on_path
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm not found: cannot install buf")
    done = subprocess.run(
        [npm, "install", "--no-fund", "--no-audit", "--prefix", str(REPO / ".tools"),
         f"@bufbuild/buf@{BUF_VERSION}"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not LOCAL_BUF.exists():
        pytest.fail(f"npm install @bufbuild/buf failed:\n{done.stdout}\n{done.stderr}")
    return str(LOCAL_BUF)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """2 parser_svc replicas and 1 gateway of its own."""
    local = make_stack(tmp_path_factory.mktemp("buf-curl"), replicas=2, gateways=1)
    local.start()
    yield local
    local.stop()


def buf_curl(
    buf: str, url: str, *args: str, data: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`buf curl` over plain-text HTTP/2 with the gRPC protocol; schema from reflection only."""
    command = [buf, "curl", "--protocol", "grpc", "--http2-prior-knowledge", *args]
    if data is not None:
        command += ["--data", data]
    return subprocess.run(
        [*command, url], capture_output=True, text=True, timeout=timeout, check=False
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"buf curl exited {done.returncode}:\n{done.stderr}"
    return done.stdout


def json_documents(text: str) -> list[dict[str, Any]]:
    """buf curl prints one pretty-printed JSON document per response message."""
    decoder = json.JSONDecoder()
    documents: list[dict[str, Any]] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return documents
        document, position = decoder.raw_decode(text, position)
        documents.append(document)


def method_url(address: str, method: str) -> str:
    return f"http://{address}/{SERVICE}/{method}"


def server_job(address: str, job_id: str) -> job_pb2.Job:
    """What the server says, through the project's own Python stub."""
    channel, s = stub(address)
    with channel:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        return s.GetStatus(request, timeout=10).job


def trailer_identities(verbose: str, method: str) -> list[str]:
    """`x-served-by` values of the call to `method` in buf curl's `-v` trace."""
    stream = re.search(rf"> \(#(\d+)\) POST /{re.escape(SERVICE)}/{method}\b", verbose)
    assert stream, f"no {method} call in the trace:\n{verbose}"
    pattern = rf"< \(#{stream.group(1)}\) x-served-by: (\S+)"
    return re.findall(pattern, verbose, flags=re.IGNORECASE)


def identity(pid: int) -> str:
    return f"{socket.gethostname()}/{pid}"


def targets(stack: LocalStack) -> dict[str, str]:
    return {"gateway": stack.gateway_addresses[0], "parser_svc": stack.parser_addresses[0]}


@pytest.fixture(scope="module")
def finished_job(stack: LocalStack) -> job_pb2.Job:
    job = submit(stack.gateway_addresses[0], make_pdf(3), "three.pdf")
    assert wait_terminal(stack.gateway_addresses[0], job.job_id).state == job_pb2.STATE_SUCCEEDED
    return server_job(stack.gateway_addresses[0], job.job_id)


@pytest.mark.parametrize("role", ["gateway", "parser_svc"])
def test_list_services_through_reflection(buf: str, stack: LocalStack, role: str) -> None:
    address = targets(stack)[role]
    services = set(ok(buf_curl(buf, f"http://{address}", "--list-services")).split())
    assert {SERVICE, "grpc.health.v1.Health"} <= services, services
    assert services & REFLECTION, f"no reflection service listed: {services}"


@pytest.mark.parametrize("role", ["gateway", "parser_svc"])
def test_list_methods_shows_every_rpc(buf: str, stack: LocalStack, role: str) -> None:
    address = targets(stack)[role]
    listed = ok(buf_curl(buf, f"http://{address}", "--list-methods")).split()
    ours = {line.split("/", 1)[1] for line in listed if line.startswith(f"{SERVICE}/")}
    assert ours == RPCS


@pytest.mark.parametrize("role", ["gateway", "parser_svc"])
def test_get_status_of_an_existing_job(
    buf: str, stack: LocalStack, finished_job: job_pb2.Job, role: str
) -> None:
    address = targets(stack)[role]
    data = json.dumps({"job_id": finished_job.job_id})
    done = buf_curl(buf, method_url(address, "GetStatus"), "-v", data=data)
    [response] = json_documents(ok(done))
    job = response["job"]
    assert job["jobId"] == finished_job.job_id
    assert job["state"] == job_pb2.State.Name(finished_job.state) == "STATE_SUCCEEDED"
    assert int(job["version"]) == finished_job.version  # int64 is a JSON string
    assert job["fileName"] == "three.pdf"
    assert job["contentSha256"] == finished_job.content_sha256
    assert job["progress"]["done"] == job["progress"]["total"] == 3

    # Which replica answered is visible to any client: the `x-served-by` trailer.
    answered = trailer_identities(done.stderr, "GetStatus")
    parsers = {identity(child.pid) for child in stack.parsers}
    if role == "gateway":
        # The gateway passes the parser_svc trailer through and adds its own.
        assert identity(stack.gateways[0].pid) in answered, answered
        assert parsers & set(answered), answered
    else:
        assert answered == [identity(stack.parsers[0].pid)]


@pytest.mark.parametrize("role", ["gateway", "parser_svc"])
def test_get_status_of_an_unknown_job_is_not_found(buf: str, stack: LocalStack, role: str) -> None:
    address = targets(stack)[role]
    job_id = uuid.uuid4().hex
    done = buf_curl(buf, method_url(address, "GetStatus"), data=json.dumps({"job_id": job_id}))
    assert done.returncode == EXIT_NOT_FOUND, f"exit {done.returncode}:\n{done.stderr}"
    assert done.stdout == ""
    [error] = json_documents(done.stderr)
    assert error["code"] == "not_found"
    assert job_id in error["message"]
    # buf curl prints the google.rpc.ErrorInfo detail as its type plus the raw bytes in base64.
    [detail] = [d for d in error["details"] if d["type"] == "google.rpc.ErrorInfo"]
    raw = detail["value"]
    info = error_details_pb2.ErrorInfo.FromString(base64.b64decode(raw + "=" * (-len(raw) % 4)))
    assert info.reason == "JOB_NOT_FOUND"
    assert info.domain == "docparse"
    assert info.metadata["job_id"] == job_id


def test_watch_job_through_gateway_streams_to_the_terminal_record(
    buf: str, stack: LocalStack
) -> None:
    gateway = stack.gateway_addresses[0]
    pages = 20
    job_id = submit(gateway, make_pdf(pages), "twenty.pdf").job_id
    done = buf_curl(
        buf, method_url(gateway, "WatchJob"), data=json.dumps({"job_id": job_id}), timeout=180
    )
    events = json_documents(ok(done))
    assert all(set(event) <= {"job", "heartbeat"} for event in events), events
    records = [event["job"] for event in events if "job" in event]
    assert records, f"no job record streamed: {events}"
    assert {record["jobId"] for record in records} == {job_id}

    versions = [int(record["version"]) for record in records]
    assert all(a < b for a, b in itertools.pairwise(versions)), versions
    states = [record["state"] for record in records]
    assert states[-1] == "STATE_SUCCEEDED", states
    assert not TERMINAL & set(states[:-1]), f"a terminal record before the last: {states}"
    assert records[-1]["progress"]["done"] == records[-1]["progress"]["total"] == pages

    # The stream ended on what the server holds as the final record.
    final = server_job(gateway, job_id)
    assert (states[-1], versions[-1]) == (job_pb2.State.Name(final.state), final.version)

    # Resuming just before the terminal version gets exactly the terminal record; at it, nothing.
    resumed = buf_curl(
        buf,
        method_url(gateway, "WatchJob"),
        data=json.dumps({"job_id": job_id, "after_version": str(final.version - 1)}),
    )
    assert [int(e["job"]["version"]) for e in json_documents(ok(resumed))] == [final.version]
    caught_up = buf_curl(
        buf,
        method_url(gateway, "WatchJob"),
        data=json.dumps({"job_id": job_id, "after_version": str(final.version)}),
    )
    assert [e for e in json_documents(ok(caught_up)) if "job" in e] == []
