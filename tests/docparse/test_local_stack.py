"""What a user meets running several local stacks and waiting on jobs that cannot run (issue
17): a taken port refuses a second server instead of sharing it, stacks never share a data
directory, every wait ends within its --timeout, and the CLI exits as documented, without a
traceback.

One stack (`docparse up` without workers, DOCPARSE_ROLE=api, so jobs stay QUEUED) serves the
whole module."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from docparse.errors import DocparseError
from docparse.local.stack import wait_serving
from docparse.ports import free_port, listening_sockets
from docparse.v1 import parser_service_pb2
from tests.conftest import make_stack
from tests.helpers import Up, stub

ROOT = Path(__file__).resolve().parents[2]
MEMO = ROOT / "examples" / "memo-1-page.pdf"


@pytest.fixture(scope="module")
def no_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    """A stack started from a folder of its own, with no --data-dir."""
    up = Up(
        "--replicas", "1", "--port", str(free_port()), "--http-port", str(free_port()),
        cwd=tmp_path_factory.mktemp("no-workers"), env={"DOCPARSE_ROLE": "api"},
    )  # fmt: skip
    yield up
    assert up.stop() == 0


def cli(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "docparse", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )  # fmt: skip
    return done, time.monotonic() - start


def assert_no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_a_second_stack_on_a_taken_port_exits_2_and_the_first_goes_on(
    no_workers: Up, tmp_path: Path
) -> None:
    port = port_of(no_workers.target)
    second, took = cli("up", "--port", str(port), "--data-dir", str(tmp_path / "second"))
    assert second.returncode == 2 and took < 10
    assert "PORT_IN_USE" in second.stderr and f"127.0.0.1:{port}" in second.stderr
    assert "by pid " in second.stderr and "python -m gateway" in second.stderr  # the holder
    assert_no_traceback(second)
    assert len(listening_sockets(port)) == 1
    wait_serving(no_workers.target, timeout=5)  # the first stack still answers

    http_port = port_of(no_workers.ready["http"].split(",")[0])
    third, _ = cli("up", "--http-port", str(http_port), "--data-dir", str(tmp_path / "third"))
    assert third.returncode == 2 and "PORT_IN_USE" in third.stderr
    assert len(listening_sockets(http_port)) == 1


@pytest.mark.parametrize("module", ["gateway", "parser_svc"])
def test_a_lone_server_on_a_taken_port_exits_2_naming_it(no_workers: Up, module: str) -> None:
    port = port_of(no_workers.target)
    env = {
        **os.environ,
        "DOCPARSE_GATEWAY_LISTEN": no_workers.target,
        "DOCPARSE_GATEWAY_HTTP_LISTEN": "",
        "DOCPARSE_LISTEN": no_workers.target,
        # the ready line masks the password; the owner-only redis.url has it
        "DOCPARSE_REDIS_URL": (Path(no_workers.ready["data"]) / "redis.url").read_text().strip(),
        "DOCPARSE_ROLE": "api",  # never take a job of the running stack
        "DOCPARSE_ENV": "lone",
        "DOCPARSE_DEV_MODE": "true",  # no internal token, on purpose
        "DOCPARSE_GATEWAY_AUTH": "disabled",
    }
    start = time.monotonic()
    lone = subprocess.run(
        [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=30
    )
    # A stall bound, not a speed goal: exits, not retries; its imports alone take 2-5 s on a
    # loaded 2-core box (10 s was passed once at load 9).
    assert lone.returncode == 2 and time.monotonic() - start < 20
    assert "PORT_IN_USE" in lone.stderr and f"127.0.0.1:{port}" in lone.stderr
    assert "python -m gateway" in lone.stderr  # the process that holds it
    assert_no_traceback(lone)
    assert len(listening_sockets(port)) == 1
    wait_serving(no_workers.target, timeout=5)


def test_stacks_without_data_dir_get_their_own_and_a_shared_one_is_refused(
    no_workers: Up, tmp_path: Path
) -> None:
    folder = Path(no_workers.ready["data"]).parents[2]  # <cwd>/var/stack/<run>
    other = Up("--replicas", "1", "--port", str(free_port()), "--http-port", str(free_port()),
               cwd=folder, env={"DOCPARSE_ROLE": "api"})  # fmt: skip
    try:
        assert other.ready["data"] != no_workers.ready["data"]
        assert Path(other.ready["data"]).parent == Path(no_workers.ready["data"]).parent
        shared, took = cli("up", "--port", str(free_port()), "--http-port", str(free_port()),
                           "--data-dir", other.ready["data"])  # fmt: skip
        assert shared.returncode == 2 and took < 10
        assert "DIR_IN_USE" in shared.stderr and other.ready["data"] in shared.stderr
        assert_no_traceback(shared)
    finally:
        assert other.stop() == 0
    aofs = {p.resolve() for p in Path(other.ready["data"]).parent.glob("*/redis/appendonly*")}
    assert len(aofs) >= 2  # one per run, never one file for two servers


def test_waits_on_a_job_that_never_runs_end_with_exit_3_within_the_timeout(
    no_workers: Up,
) -> None:
    target = ("--target", no_workers.target)
    submitted, took = cli("submit", str(MEMO), "--watch", "--timeout", "5", *target)
    assert submitted.returncode == 3 and took < 10, submitted.stderr
    assert "timeout: job " in submitted.stderr and "still QUEUED" in submitted.stderr
    job_id = submitted.stderr.split("timeout: job ", 1)[1].split()[0]
    assert_no_traceback(submitted)

    watched, took = cli("watch", job_id, "--timeout", "5", *target)
    assert watched.returncode == 3 and took < 10 and job_id in watched.stderr

    folder, took = cli("submit", str(ROOT / "examples"), "--watch", "--timeout", "5", *target)
    assert folder.returncode == 3 and took < 10
    assert folder.stdout.startswith("batch ") and "timeout: batch " in folder.stderr


def test_a_cursor_beyond_the_job_is_answered_at_once(no_workers: Up) -> None:
    target = ("--target", no_workers.target)
    queued, _ = cli("submit", str(MEMO), "--json", *target)
    job_id = queued.stdout.split('"job_id": "', 1)[1].split('"')[0]
    ahead, took = cli("watch", job_id, "--after-version", "100", "--timeout", "5", *target)
    assert ahead.returncode == 2 and took < 5
    assert "OUT_OF_RANGE AFTER_VERSION_AHEAD" in ahead.stderr and "version 1" in ahead.stderr
    channel, s = stub(no_workers.target)
    with channel, pytest.raises(grpc.RpcError) as err:
        list(s.WatchJob(parser_service_pb2.WatchJobRequest(job_id=job_id, after_version=9),
                        timeout=5))  # fmt: skip
    assert err.value.code() == grpc.StatusCode.OUT_OF_RANGE
    events = f"{no_workers.ready['http'].split(',')[0]}/v1/jobs/{job_id}/events?after_version=9"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(events, timeout=10)
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["reason"] == "AFTER_VERSION_AHEAD"


def test_a_cursor_beyond_a_batch_is_answered_at_once(no_workers: Up) -> None:
    """As for a job: the gRPC watch and the HTTP event stream refuse it before streaming, with
    the batch's version and id (the HTTP stream once answered 200 and an `event: stream-error`
    worded for a job)."""
    channel, s = stub(no_workers.target)
    with channel:
        created = s.CreateBatch(
            parser_service_pb2.CreateBatchRequest(
                files=[
                    parser_service_pb2.BatchFile(file_name="memo.pdf", content=MEMO.read_bytes())
                ],
                request_id=os.urandom(16).hex(),
            ),
            timeout=10,
        )
        batch_id, version = created.batch.batch_id, created.batch.version
        with pytest.raises(grpc.RpcError) as err:
            request = parser_service_pb2.WatchBatchRequest(batch_id=batch_id, after_version=99)
            list(s.WatchBatch(request, timeout=5))
    assert err.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert f"batch {batch_id} is at version {version}" in (err.value.details() or "")
    http = no_workers.ready["http"].split(",")[0]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{http}/v1/batches/{batch_id}/events?after_version=99", timeout=10)
    assert refused.value.code == 400
    body = json.loads(refused.value.read())
    assert (body["reason"], body["metadata"]["batch_id"]) == ("AFTER_VERSION_AHEAD", batch_id)
    assert body["metadata"]["version"] == str(version)


def test_expected_failures_exit_2_with_a_code_and_a_reason(no_workers: Up, tmp_path: Path) -> None:
    target = ("--target", no_workers.target)
    cases = [
        (("submit", str(tmp_path / "missing.pdf"), *target), "INVALID_ARGUMENT FILE_NOT_FOUND"),
        (("result", "0" * 32, "--format", "raw", *target), "INVALID_ARGUMENT OUTPUT_REQUIRED"),
        # 2 s, not the default 30 (test_client_retries holds the default)
        (("status", "0" * 32, "--target", f"127.0.0.1:{free_port()}",
          "--unreachable-timeout", "2"), "UNAVAILABLE TARGET_UNREACHABLE"),
        (("status", "0" * 32, *target), "NOT_FOUND JOB_NOT_FOUND"),
    ]  # fmt: skip
    for args, expected in cases:
        done, _ = cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith(f"error: {expected}: "), done.stderr
        assert_no_traceback(done)


@pytest.mark.stack  # a stack in its body
def test_a_stack_whose_replica_refuses_a_setting_says_which(tmp_path: Path) -> None:
    stack = make_stack(tmp_path, replicas=1, gateways=1,
                       extra_env={"DOCPARSE_WORKER_CONCURRENCY": "two"})  # fmt: skip
    with pytest.raises(DocparseError) as refused:
        stack.start(timeout=30)
    error = refused.value
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SETTING_INVALID")
    assert error.metadata["setting"] == "DOCPARSE_WORKER_CONCURRENCY"
    assert "Input should be a valid integer" in error.message


@pytest.mark.stack  # `docparse up` in its body
def test_a_stack_that_stops_mid_watch_ends_it_with_exit_2(tmp_path: Path) -> None:
    up = Up("--replicas", "1", "--port", str(free_port()), "--http-port", str(free_port()),
            "--data-dir", str(tmp_path / "stack"), cwd=tmp_path,
            env={"DOCPARSE_ROLE": "api"})  # fmt: skip
    watch = subprocess.Popen(
        [sys.executable, "-m", "docparse", "submit", str(MEMO), "--watch",
         "--target", up.target, "--unreachable-timeout", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert watch.stdout is not None
    assert "QUEUED" in watch.stdout.readline()  # following the job
    assert up.stop() == 0
    out, err = watch.communicate(timeout=30)
    assert watch.returncode == 2, err
    assert "UNAVAILABLE" in err and ("TARGET_UNREACHABLE" in err or "SHUTTING_DOWN" in err)
    assert "Traceback" not in out + err


@pytest.mark.stack  # `docparse up` in its body
def test_a_local_stack_with_tls_and_api_keys(tmp_path: Path) -> None:
    """README, "On a local stack": keys file, certificate, `docparse up` with both, clients."""
    key = "local-stack-key"
    digest = hashlib.sha256(key.encode()).hexdigest()
    (tmp_path / "keys.json").write_text(json.dumps({"keys": [{"sha256": digest, "tenant": "me"}]}))
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(tmp_path / "gateway.key"), "-out", str(tmp_path / "gateway.pem")],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    up = Up("--replicas", "1", "--port", str(free_port()), "--http-port", str(free_port()),
            "--data-dir", str(tmp_path / "stack"), "--api-keys-file", "keys.json",
            "--tls-cert", "gateway.pem", "--tls-key", "gateway.key", cwd=tmp_path)  # fmt: skip
    try:
        assert "API keys required" in "".join(up.output)
        tls = ("--target", up.target, "--tls-ca", str(tmp_path / "gateway.pem"))
        done, _ = cli("submit", str(MEMO), "--watch", "--api-key", key, *tls)
        assert done.returncode == 0, done.stderr
        job_id = done.stdout.strip().splitlines()[-1].split()[1]
        refused, _ = cli("status", job_id, *tls)
        assert refused.returncode == 2 and "UNAUTHENTICATED API_KEY_MISSING" in refused.stderr
        # A plaintext client never gets through (UNAVAILABLE, retried until the limit).
        plaintext, _ = cli(
            "status", job_id, "--api-key", key, "--target", up.target, "--unreachable-timeout", "2"
        )
        assert plaintext.returncode == 2 and "UNAVAILABLE" in plaintext.stderr
        http = up.ready["http"].split(",")[0]
        request = urllib.request.Request(
            f"{http}/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {key}"}
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert json.loads(reply.read())["state"] == "STATE_SUCCEEDED"
    finally:
        assert up.stop() == 0
    log = (tmp_path / "stack" / "logs" / "gateway-0.log").read_text().splitlines()
    lines = [json.loads(line) for line in log if line.startswith("{")]
    http = [r for r in lines if r.get("event") == "http" and r.get("job_id") == job_id]
    assert http and http[0]["status"] == 200 and http[0]["upstream"]  # the HTTP call, logged
