"""How the local stack knows a child serves: grpc.health.v1 on its gRPC port (plaintext, or
TLS trusting a given CA), or a gateway's `GET /healthz` when its gRPC port speaks TLS."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


class Watched(Protocol):
    """A child process being waited for: `check_alive` raises why it ended, if it did."""

    name: str

    def check_alive(self) -> None: ...


def replica_tls(env: dict[str, str]) -> tuple[grpc.ChannelCredentials, str] | None:
    """The credentials a parser_svc replica started with `env` is asked over: TLS trusting
    the CA the gateways trust (DOCPARSE_GATEWAY_UPSTREAM_TLS_CA_FILE) and the server name they
    check, when the replica serves TLS (DOCPARSE_TLS_CERT_FILE); None: plaintext."""
    ca = env.get("DOCPARSE_GATEWAY_UPSTREAM_TLS_CA_FILE")
    if not env.get("DOCPARSE_TLS_CERT_FILE") or not ca:
        return None
    credentials = grpc.ssl_channel_credentials(root_certificates=Path(ca).read_bytes())
    return credentials, env.get("DOCPARSE_GATEWAY_UPSTREAM_TLS_SERVER_NAME", "")


def _channel(address: str, tls: tuple[grpc.ChannelCredentials, str] | None) -> grpc.Channel:
    if tls is None:
        return grpc.insecure_channel(address)
    credentials, server_name = tls
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
    return grpc.secure_channel(address, credentials, options=options)


def wait_serving(
    address: str,
    timeout: float = 30.0,
    child: Watched | None = None,
    tls: tuple[grpc.ChannelCredentials, str] | None = None,
) -> None:
    """Blocks until `address` answers grpc.health.v1 Check with SERVING (plaintext, or TLS
    with `tls`: credentials and the server name to check, "" for the address's host).

    With `child`: a child that exits first raises its start failure (DocparseError)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if child is not None:
            child.check_alive()
        with _channel(address, tls) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=1.0
                )
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError as err:
                last = err
        time.sleep(0.05)
    raise TimeoutError(f"{address} did not become SERVING: {last}")


def wait_healthz(http_address: str, timeout: float, child: Watched) -> None:
    """Blocks until a gateway's `GET /healthz` answers 200 (it does once its gRPC side is
    SERVING): the readiness check of a gateway whose gRPC port speaks TLS."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        child.check_alive()
        try:
            with urllib.request.urlopen(f"http://{http_address}/healthz", timeout=1.0) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError) as err:
            last = err
        time.sleep(0.05)
    raise TimeoutError(f"{child.name}: http://{http_address}/healthz did not answer 200: {last}")
