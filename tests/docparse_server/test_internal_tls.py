"""TLS between the gateway and parser_svc: with the replicas' certificate and the CA that signs
it configured, a job goes end to end through the gateway while the replicas' port refuses a
plaintext client, so the internal token never travels in clear. Half a pair refuses to start
(exit 2, TLS_INCOMPLETE) instead of serving plaintext. Probes that cannot speak TLS ask a
plaintext port that answers grpc.health.v1 only."""

from __future__ import annotations

import datetime as dt
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

from docparse.client import Client
from docparse.local.embedded_redis import free_port
from docparse.local.readiness import wait_serving
from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2, parser_service_pb2_grpc
from docparse_server.tenancy import INTERNAL_TOKEN_KEY, TENANT_KEY, key_digest
from gateway.proxy import tls_server_name
from tests.conftest import auth_env, make_stack
from tests.helpers import make_pdf, rpc_error

pytestmark = pytest.mark.stack

TOKEN = "internal-token-over-tls"
KEYS: dict[str, object] = {"keys": [{"sha256": key_digest("key-of-a"), "tenant": "tenant-a"}]}
SERVER_NAME = "parser-svc.internal"  # the certificate names no IP: the override is needed


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
) -> x509.Certificate:  # fmt: skip
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(SERVER_NAME)]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate it signs (for SERVER_NAME): ca.pem, server.pem, server.key,
    the key readable by its owner alone."""
    ca_key, server_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca = _cert("docparse test CA", ca_key, None, ca_key)
    server = _cert(SERVER_NAME, server_key, ca, ca_key)
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(_pem_key(server_key))
    paths[2].chmod(0o600)
    return paths


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, pki: tuple[Path, Path, Path]
) -> Iterator[LocalStack]:
    ca, cert, key = pki
    tls_env = {
        "DOCPARSE_TLS_CERT_FILE": str(cert),
        "DOCPARSE_TLS_KEY_FILE": str(key),
        "DOCPARSE_GATEWAY_UPSTREAM_TLS_CA_FILE": str(ca),
        "DOCPARSE_GATEWAY_UPSTREAM_TLS_SERVER_NAME": SERVER_NAME,
    }
    running = make_stack(
        tmp_path_factory.mktemp("tls"),
        replicas=2,
        gateways=1,
        extra_env={**auth_env(KEYS, TOKEN), **tls_env},
    )
    running.parsers[0].env["DOCPARSE_HEALTH_LISTEN"] = f"127.0.0.1:{free_port()}"
    with running:  # the readiness wait of the replica went over TLS
        yield running


def test_a_job_goes_end_to_end_over_tls_to_the_replicas(stack: LocalStack) -> None:
    with Client(stack.gateway_addresses[0], api_key="key-of-a") as client:
        job = client.parse(make_pdf(2, "over tls"), file_name="tls.pdf")
        result = client.result(job.job_id)
    assert len(result.pages) == 2
    assert "over tls 2 of 2" in "\n".join(block.text for block in result.pages[1].blocks)


def test_the_replica_refuses_plaintext_so_the_token_is_never_sent_in_clear(
    stack: LocalStack, pki: tuple[Path, Path, Path]
) -> None:
    replica = stack.parser_addresses[0]
    request = parser_service_pb2.GetStatusRequest(job_id="0" * 32)
    identity = ((TENANT_KEY, "tenant-a"), (INTERNAL_TOKEN_KEY, TOKEN))
    with grpc.insecure_channel(replica) as channel:
        plain = rpc_error(
            lambda: parser_service_pb2_grpc.ParserServiceStub(channel).GetStatus(
                request, metadata=identity, timeout=5
            )
        )
    assert plain.code == grpc.StatusCode.UNAVAILABLE  # no HTTP/2 exchange, so no header sent
    with pytest.raises(TimeoutError):
        wait_serving(replica, timeout=2)  # plaintext health checks get nowhere either
    credentials = grpc.ssl_channel_credentials(root_certificates=pki[0].read_bytes())
    options = [("grpc.ssl_target_name_override", SERVER_NAME)]
    with grpc.secure_channel(replica, credentials, options=options) as channel:
        answered = rpc_error(
            lambda: parser_service_pb2_grpc.ParserServiceStub(channel).GetStatus(
                request, metadata=identity, timeout=5
            )
        )
    assert answered.reason == "JOB_NOT_FOUND"  # over TLS, with the CA: the replica answers


def test_probes_without_tls_ask_the_health_only_port(stack: LocalStack) -> None:
    health = stack.parsers[0].env["DOCPARSE_HEALTH_LISTEN"]
    wait_serving(health, timeout=10)  # plaintext, SERVING
    with grpc.insecure_channel(health) as channel:
        other = rpc_error(
            lambda: parser_service_pb2_grpc.ParserServiceStub(channel).GetStatus(
                parser_service_pb2.GetStatusRequest(job_id="0" * 32), timeout=5
            )
        )
    assert other.code == grpc.StatusCode.UNIMPLEMENTED  # health only, no job API


@pytest.mark.parametrize(
    ("module", "variable"),
    [
        ("parser_svc", "DOCPARSE_TLS_CERT_FILE"),
        ("parser_svc", "DOCPARSE_TLS_KEY_FILE"),
        ("gateway", "DOCPARSE_GATEWAY_TLS_CERT_FILE"),
        ("gateway", "DOCPARSE_GATEWAY_TLS_KEY_FILE"),
    ],
)
def test_half_a_tls_pair_refuses_to_start(
    module: str, variable: str, pki: tuple[Path, Path, Path]
) -> None:
    address = f"127.0.0.1:{free_port()}"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DOCPARSE_")}
    env = {
        **clean, **auth_env(KEYS, TOKEN), "DOCPARSE_LOG_FORMAT": "text",
        "DOCPARSE_GATEWAY_LOG_FORMAT": "text", "DOCPARSE_LISTEN": address,
        "DOCPARSE_GATEWAY_LISTEN": address, "DOCPARSE_GATEWAY_HTTP_LISTEN": "",
        variable: str(pki[1] if "CERT" in variable else pki[2]),
    }  # fmt: skip
    ended = subprocess.run(
        [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=30
    )
    assert ended.returncode == 2, ended.stderr
    assert "TLS_INCOMPLETE" in ended.stderr and variable in ended.stderr
    assert "Traceback" not in ended.stderr


def test_the_default_server_name_is_the_backends_host() -> None:
    """A host:port list becomes a target of the addresses it resolves to, which name no host:
    the replicas' certificate is checked against the first entry's host instead."""
    assert tls_server_name("parser-svc-headless:50051") == "parser-svc-headless"
    assert tls_server_name("a.internal:1, b.internal:2") == "a.internal"
    assert tls_server_name("[::1]:50051") == "::1"
    assert tls_server_name("dns:///parser-svc-headless:50051") == ""  # its own authority
