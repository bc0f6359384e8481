"""Tenants and API keys: the gateway authenticates, parser_svc trusts only the gateway, and a
tenant cannot see, cancel or even detect another tenant's jobs, batches and results."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from docparse.local.embedded_redis import free_port
from docparse.local.stack import LocalStack, wait_serving
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from docparse_server.tenancy import key_digest
from gateway.auth import GatewayAuth
from gateway.settings import GatewaySettings
from tests.conftest import auth_env, make_stack
from tests.helpers import make_pdf, rpc_error, stub

TOKEN = "internal-secret-for-tests"
A, B = (("authorization", "Bearer key-of-a"),), (("x-api-key", "key-of-b"),)
KEYS = {
    "keys": [
        {"sha256": key_digest("key-of-a"), "tenant": "tenant-a"},
        {"sha256": key_digest("key-of-b"), "tenant": "tenant-b",
         "max_upload_bytes": 20_000, "submits_per_minute": 3},
    ]
}  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("auth"),
        replicas=2,
        gateways=1,
        extra_env=auth_env(KEYS, TOKEN),
    ) as running:
        yield running


def finished(s: parser_service_pb2_grpc.ParserServiceStub, job_id: str) -> job_pb2.Job:
    request = parser_service_pb2.WatchJobRequest(job_id=job_id)
    return [e.job for e in s.WatchJob(request, metadata=A, timeout=60) if e.HasField("job")][-1]


def test_calls_without_a_valid_key_are_unauthenticated(stack: LocalStack) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        request = parser_service_pb2.GetStatusRequest(job_id="0" * 32)
        missing = rpc_error(lambda: s.GetStatus(request, timeout=5))
        wrong = rpc_error(
            lambda: s.GetStatus(request, metadata=(("x-api-key", "nope"),), timeout=5)
        )
        known = rpc_error(lambda: s.GetStatus(request, metadata=A, timeout=5))
    assert (missing.code, missing.reason) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_MISSING")
    assert (wrong.code, wrong.reason) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_INVALID")
    assert (known.code, known.reason) == (grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND")


def test_a_refused_call_always_names_its_reason() -> None:
    """The handler that refuses a call without a valid key (it never reads the request) says
    why with the key check's own error; should the check pass when it runs again (the keys
    are read once, so it cannot), the call is still refused with a reason, never an empty one."""
    auth = GatewayAuth(GatewaySettings(auth="required", api_keys=json.dumps(KEYS)))
    missing, wrong, known = (auth.refusal(metadata) for metadata in ((), (("x-api-key", "no"),), A))
    assert (missing.code, missing.reason) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_MISSING")
    assert (wrong.code, wrong.reason) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_INVALID")
    assert (known.code, known.reason) == (grpc.StatusCode.UNAUTHENTICATED, "API_KEY_INVALID")
    assert known.message == "the API key was refused when the call began"


def test_other_tenants_jobs_batches_and_results_are_not_found(stack: LocalStack) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name="a.pdf", content=make_pdf(2, "a")),
            metadata=A,
            timeout=10,
        ).job
        assert finished(s, job.job_id).state == job_pb2.STATE_SUCCEEDED
        batch = s.CreateBatch(
            parser_service_pb2.CreateBatchRequest(
                files=[parser_service_pb2.BatchFile(file_name="x.pdf", content=make_pdf(1, "x"))]
            ),
            metadata=A,
            timeout=10,
        ).batch
        calls = {
            "GetStatus": lambda: s.GetStatus(
                parser_service_pb2.GetStatusRequest(job_id=job.job_id), metadata=B, timeout=5
            ),
            "WatchJob": lambda: list(
                s.WatchJob(
                    parser_service_pb2.WatchJobRequest(job_id=job.job_id), metadata=B, timeout=5
                )
            ),
            "GetResult": lambda: list(
                s.GetResult(
                    parser_service_pb2.GetResultRequest(job_id=job.job_id), metadata=B, timeout=5
                )
            ),
            "CancelJob": lambda: s.CancelJob(
                parser_service_pb2.CancelJobRequest(job_id=job.job_id), metadata=B, timeout=5
            ),
            "GetStatus(file of batch)": lambda: s.GetStatus(
                parser_service_pb2.GetStatusRequest(job_id=batch.jobs[0].job_id),
                metadata=B,
                timeout=5,
            ),
        }
        for name, call in calls.items():
            err = rpc_error(call)
            assert (err.code, err.reason) == (grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND"), name
        other_batch = rpc_error(
            lambda: s.GetBatch(
                parser_service_pb2.GetBatchRequest(batch_id=batch.batch_id), metadata=B, timeout=5
            )
        )
        assert (other_batch.code, other_batch.reason) == (
            grpc.StatusCode.NOT_FOUND,
            "BATCH_NOT_FOUND",
        )
        # The owner still sees everything.
        mine = s.GetBatch(
            parser_service_pb2.GetBatchRequest(batch_id=batch.batch_id), metadata=A, timeout=5
        )
        assert mine.batch.total == 1
        assert list(
            s.GetResult(
                parser_service_pb2.GetResultRequest(job_id=job.job_id), metadata=A, timeout=10
            )
        )


def test_forged_identity_sent_straight_to_parser_svc_is_refused(stack: LocalStack) -> None:
    forged = (("x-docparse-tenant", "tenant-a"),)
    channel, s = stub(stack.parser_addresses[0])
    with channel:
        request = parser_service_pb2.GetStatusRequest(job_id="0" * 32)
        no_token = rpc_error(lambda: s.GetStatus(request, metadata=forged, timeout=5))
        bad_token = rpc_error(
            lambda: s.GetStatus(
                request, metadata=(*forged, ("x-docparse-internal-token", "guess")), timeout=5
            )
        )
    for err in (no_token, bad_token):
        assert (err.code, err.reason) == (
            grpc.StatusCode.UNAUTHENTICATED,
            "INTERNAL_TOKEN_INVALID",
        )
    # Identity a client forges through the gateway is replaced by its key's tenant.
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(file_name="b.pdf", content=make_pdf(1, "b")),
            metadata=(*B, ("x-docparse-tenant", "tenant-a")),
            timeout=10,
        ).job
        as_a = rpc_error(
            lambda: s.GetStatus(
                parser_service_pb2.GetStatusRequest(job_id=job.job_id), metadata=A, timeout=5
            )
        )
    assert as_a.reason == "JOB_NOT_FOUND"


def test_tenant_limits_answer_resource_exhausted(stack: LocalStack) -> None:
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        too_big = rpc_error(
            lambda: s.SubmitJob(
                parser_service_pb2.SubmitJobRequest(file_name="big.pdf", content=make_pdf(60)),
                metadata=B,
                timeout=10,
            )
        )
        assert (too_big.code, too_big.reason) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "DOCUMENT_TOO_LARGE",
        )
        assert too_big.metadata["limit_bytes"] == "20000"
        # tenant-b may submit 3 a minute (one was used above); tenant-a has no such limit.
        outcomes = []
        for index in range(4):
            request = parser_service_pb2.SubmitJobRequest(
                file_name=f"r{index}.pdf", content=make_pdf(1, f"rate {index} {os.getpid()}")
            )
            try:
                s.SubmitJob(request, metadata=B, timeout=10)
                outcomes.append("OK")
            except grpc.RpcError as err:
                outcomes.append(err.code().name)
        assert outcomes.count("RESOURCE_EXHAUSTED") >= 2 and outcomes[0] == "OK"
        limited = rpc_error(
            lambda: s.SubmitJob(
                parser_service_pb2.SubmitJobRequest(file_name="r.pdf", content=make_pdf(1, "r")),
                metadata=B,
                timeout=10,
            )
        )
        assert limited.reason == "RATE_LIMITED" and 0 < int(limited.metadata["retry_after_s"]) <= 60
        for index in range(5):
            s.SubmitJob(
                parser_service_pb2.SubmitJobRequest(
                    file_name=f"a{index}.pdf", content=make_pdf(1, f"a {index}")
                ),
                metadata=A,
                timeout=10,
            )


def _self_signed(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "gateway.pem", folder / "gateway.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_gateway_serves_tls(stack: LocalStack, tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    address = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "DOCPARSE_GATEWAY_LISTEN": address,
        "DOCPARSE_GATEWAY_HTTP_LISTEN": "",
        "DOCPARSE_GATEWAY_BACKENDS": ",".join(stack.parser_addresses),
        **auth_env(KEYS, TOKEN),
        "DOCPARSE_GATEWAY_TLS_CERT_FILE": str(cert),
        "DOCPARSE_GATEWAY_TLS_KEY_FILE": str(key),
    }
    proc = subprocess.Popen([sys.executable, "-m", "gateway"], env=env, stderr=subprocess.DEVNULL)
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(address, credentials) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            s = parser_service_pb2_grpc.ParserServiceStub(channel)
            err = rpc_error(
                lambda: s.GetStatus(
                    parser_service_pb2.GetStatusRequest(job_id="0" * 32), metadata=A, timeout=5
                )
            )
            assert err.reason == "JOB_NOT_FOUND"  # authenticated, forwarded, answered over TLS
        with pytest.raises(TimeoutError):
            wait_serving(address, timeout=2)  # plaintext gets nowhere
    finally:
        proc.terminate()
        proc.wait(30)


def test_sdk_and_cli_carry_the_api_key(stack: LocalStack, tmp_path: Path) -> None:
    from docparse.client import Client
    from docparse.errors import DocparseError

    with Client(stack.gateway_addresses[0], api_key="key-of-a") as client:
        job = client.parse(make_pdf(2, "sdk"), file_name="sdk.pdf")
        assert len(client.result(job.job_id).pages) == 2
    anonymous = Client(stack.gateway_addresses[0], api_key="")
    with anonymous, pytest.raises(DocparseError) as refused:
        anonymous.status(job.job_id)
    assert refused.value.reason == "API_KEY_MISSING"

    def cli(*args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "DOCPARSE_API_KEY"}
        if key:
            env["DOCPARSE_API_KEY"] = key
        return subprocess.run(
            [sys.executable, "-m", "docparse", *args, "--target", stack.gateway_addresses[0]],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip

    assert cli("status", job.job_id, key="key-of-a").returncode == 0
    other = cli("status", job.job_id, "--api-key", "key-of-b")
    assert other.returncode == 2 and "NOT_FOUND JOB_NOT_FOUND" in other.stderr
    nobody = cli("status", job.job_id)
    assert nobody.returncode == 2 and "UNAUTHENTICATED API_KEY_MISSING" in nobody.stderr
