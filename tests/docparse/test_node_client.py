"""The Node.js example client (clients/node, @grpc/grpc-js + @grpc/proto-loader) on a real stack.

What a Node user runs, as a subprocess: submit a PDF and watch it to the end, ask for an unknown
job, submit something that is not a document, and lose the gateway in the middle of a watch.
Skipped where node or npm is missing; the client's dependencies are installed once with
`npm ci` from its committed package-lock.json.
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from tests.conftest import make_stack
from tests.helpers import make_pdf, stub

REPO = Path(__file__).resolve().parents[2]
CLIENT_DIR = REPO / "clients" / "node"
SCRIPT = CLIENT_DIR / "docparse.js"
SUBMITTED = re.compile(r"^job (\S+) submitted .*served_by=(\S+)$")
RECORD = re.compile(
    r"^version=(\d+) state=(\w+) progress=(\d+)/(\d+) stage=(\S+)"
    r"(?: attempt=\d+)?(?: reason=(\S+))?"
)


@dataclass
class Record:
    version: int
    state: str
    done: int
    total: int
    stage: str
    reason: str | None


@pytest.fixture(scope="session")
def node() -> str:
    """The node binary, with the client's pinned dependencies installed by `npm ci`."""
    node_bin, npm_bin = shutil.which("node"), shutil.which("npm")
    if node_bin is None or npm_bin is None:
        pytest.skip("node and npm are needed for the Node.js client test (not on PATH)")
    done = subprocess.run(
        [npm_bin, "ci", "--prefix", str(CLIENT_DIR), "--ignore-scripts", "--no-audit", "--no-fund"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"npm ci in {CLIENT_DIR} failed:\n{done.stdout}\n{done.stderr}")
    return node_bin


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """2 parser_svc replicas behind 1 gateway; pages take a little time, so progress shows."""
    with make_stack(
        tmp_path_factory.mktemp("node-client"),
        replicas=2,
        gateways=1,
        extra_env={"DOCPARSE_PARSE_PAGE_DELAY_MS": "40"},
    ) as running:
        yield running


def run_client(node: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [node, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def records(stdout: str) -> list[Record]:
    found = []
    for line in stdout.splitlines():
        match = RECORD.match(line)
        if match:
            version, state, done, total, stage, reason = match.groups()
            found.append(Record(int(version), state, int(done), int(total), stage, reason))
    return found


def submitted(stdout: str) -> tuple[str, list[str]]:
    """The job id and the x-served-by identities the client printed for its submit."""
    first = stdout.splitlines()[0]
    match = SUBMITTED.match(first)
    assert match, f"the first line does not announce the job: {first!r}"
    return match.group(1), match.group(2).split(",")


def server_job(address: str, job_id: str) -> job_pb2.Job:
    """What the service says about the job, through the project's own Python stub."""
    channel, s = stub(address)
    with channel:
        request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        return s.GetStatus(request, timeout=10).job


def identity(pid: int) -> str:
    return f"{socket.gethostname()}/{pid}"


def assert_watched_to_success(stdout: str, stack: LocalStack, gateway_pid: int) -> list[int]:
    """The checks a user makes on a watched job; returns the versions printed."""
    job_id, served_by = submitted(stdout)
    assert identity(gateway_pid) in served_by, f"x-served-by {served_by} misses the gateway"
    seen = records(stdout)
    assert len(seen) >= 2, stdout
    versions = [record.version for record in seen]
    assert versions == sorted(set(versions)), f"versions not strictly increasing: {versions}"
    dones = [record.done for record in seen]
    assert dones == sorted(dones), f"progress went backwards: {dones}"
    assert stdout.rstrip().splitlines()[-1].startswith(f"version={versions[-1]} state=SUCCEEDED")
    last = seen[-1]
    assert last.state == "SUCCEEDED"
    assert last.done == last.total > 0
    assert [r for r in seen if r.state in ("SUCCEEDED", "FAILED", "CANCELLED")] == [last]
    job = server_job(stack.gateway_addresses[0], job_id)
    assert job.state == job_pb2.STATE_SUCCEEDED
    assert job.version == last.version
    return versions


def test_submit_and_watch_to_success(node: str, stack: LocalStack, tmp_path: Path) -> None:
    document = tmp_path / "eight-pages.pdf"
    document.write_bytes(make_pdf(8))
    target = stack.gateway_addresses[0]

    done = run_client(node, "submit", str(document), "--target", target, "--wait")

    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.stderr == "", done.stderr
    assert_watched_to_success(done.stdout, stack, stack.gateways[0].pid)
    job_id, _ = submitted(done.stdout)
    assert any(r.state == "RUNNING" and 0 < r.done < r.total for r in records(done.stdout)), (
        f"no progress between the first and the last page was shown:\n{done.stdout}"
    )

    status = run_client(node, "status", job_id, "--target", target)
    assert status.returncode == 0, status.stderr
    assert f"job {job_id} file=eight-pages.pdf type=pdf" in status.stdout
    assert records(status.stdout)[-1].state == "SUCCEEDED"


def test_status_of_an_unknown_job_is_not_found(node: str, stack: LocalStack) -> None:
    done = run_client(node, "status", "no-such-job", "--target", stack.gateway_addresses[0])

    assert done.returncode == 2, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "NOT_FOUND" in done.stderr
    assert "JOB_NOT_FOUND" in done.stderr
    assert done.stdout == ""


def test_a_non_document_is_rejected(node: str, stack: LocalStack, tmp_path: Path) -> None:
    hello = tmp_path / "hello.pdf"  # the name says PDF; the bytes are a 7-Zip archive's
    hello.write_bytes(b"7z\xbc\xaf\x27\x1c" + bytes(26))

    done = run_client(node, "submit", str(hello), "--target", stack.gateway_addresses[0], "--wait")

    assert done.returncode == 2, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "INVALID_ARGUMENT" in done.stderr
    assert "UNSUPPORTED_FORMAT" in done.stderr
    assert done.stdout == "", "no job id may be printed for a rejected upload"


def test_watch_resumes_on_another_server_when_the_gateway_dies(
    node: str, stack: LocalStack, tmp_path: Path
) -> None:
    """The gateway is killed mid-watch: the client resumes with after_version on the next
    target (a parser_svc replica; any server answers any call) and still sees every record
    once, in order, to SUCCEEDED."""
    document = tmp_path / "forty-pages.pdf"
    document.write_bytes(make_pdf(40))
    gateway = stack.gateways[0]
    gateway_pid = gateway.pid
    targets = f"{gateway.address},{stack.parser_addresses[0]}"
    client = subprocess.Popen(
        [node, str(SCRIPT), "submit", str(document), "--target", targets, "--wait",
         "--timeout", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert client.stdout is not None
    try:
        before: list[str] = []
        for line in client.stdout:  # until the parse is under way, seen through the gateway
            before.append(line)
            record = RECORD.match(line)
            if record and record.group(2) == "RUNNING" and int(record.group(3)) >= 2:
                break
        gateway.signal(signal.SIGKILL)
        # Read on from the same buffered reader; the client's own --timeout bounds the wait.
        stdout = client.stdout.read()
        assert client.stderr is not None
        stderr = client.stderr.read()
        client.wait(timeout=10)
    finally:
        if client.poll() is None:
            client.kill()
        stack.restart(gateway)
    output = "".join(before) + stdout

    assert client.returncode == 0, f"exit {client.returncode}\n{output}\n{stderr}"
    last_before = records("".join(before))[-1].version
    resumed = re.search(r"broke \(UNAVAILABLE.*resuming after_version=(\d+) on (\S+)", stderr)
    assert resumed, f"no resume reported:\n{stderr}"
    assert resumed.group(2) == stack.parser_addresses[0]
    assert "Submit" not in stderr, "waiting must never submit again"
    versions = assert_watched_to_success(output, stack, gateway_pid)
    after_version = int(resumed.group(1))
    assert after_version >= last_before
    assert after_version in versions, "the resume cursor is the last version the client printed"
    assert versions[-1] > after_version, "records after the resume came from the new server"
