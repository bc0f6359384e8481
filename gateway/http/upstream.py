"""The HTTP side's calls to parser_svc: the gateway's own round-robin upstream channel, typed
stubs, the same authentication as the gRPC side (the API key in `Authorization: Bearer`,
`X-Api-Key`, or for a GET the `access_token` query parameter an EventSource or a link can
carry; parser_svc gets the caller's identity, never the key), the replica's `x-served-by`
carried into an `X-Served-By` response header, and failed calls turned into `HttpError` (a
`DocparseError` plus who answered)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import grpc
from aiohttp import web

from docparse.errors import DocparseError
from docparse.v1 import parser_service_pb2_grpc
from docparse_server import tracing
from docparse_server.serving import SERVED_BY_KEY, served_by
from docparse_server.tenancy import Caller
from gateway.auth import GatewayAuth
from gateway.proxy import no_replica

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Metadata = Sequence[tuple[str, str | bytes]]


class HttpError(Exception):
    """Ends an HTTP request with the JSON error body of `error` (see gateway.http.errors)."""

    def __init__(self, error: DocparseError, served_by: str = "") -> None:
        super().__init__(str(error))
        self.error = error
        self.served_by = served_by


def served_by_header(trailers: object) -> str:
    """`<replica>, <this gateway>`: the replica's x-served-by trailer first, as on gRPC."""
    replicas = [str(v) for k, v in (trailers or ()) if k == SERVED_BY_KEY]  # type: ignore[attr-defined]
    return ", ".join([*replicas, served_by()])


def rpc_failure(err: grpc.aio.AioRpcError) -> HttpError:
    error = no_replica(err) or DocparseError.from_rpc_error(err)
    return HttpError(error, served_by_header(err.trailing_metadata()))


class Upstream:
    def __init__(
        self, channel: grpc.aio.Channel, unary_timeout_s: float, auth: GatewayAuth
    ) -> None:
        self.stub = parser_service_pb2_grpc.ParserServiceStub(channel)
        self.unary_timeout_s = unary_timeout_s
        self.auth = auth

    def _incoming(self, request: web.Request) -> list[tuple[str, str | bytes]]:
        incoming: list[tuple[str, str | bytes]] = [("x-forwarded-for", request.remote or "")]
        if value := request.headers.get("Authorization"):
            incoming.append(("authorization", value))
        if value := request.headers.get("X-Api-Key"):
            incoming.append(("x-api-key", value))
        if request.method == "GET" and (value := request.query.get("access_token")):
            incoming.append(("x-api-key", value))
        return incoming

    def caller(self, request: web.Request) -> Caller:
        """The request's tenant and limits; DocparseError UNAUTHENTICATED (→ 401) without a
        valid key when the gateway requires one."""
        return self.auth.caller(self._incoming(request))

    def metadata(self, request: web.Request) -> Metadata:
        """What goes upstream with each call; DocparseError UNAUTHENTICATED (→ 401) without a
        valid key when the gateway requires one."""
        return tracing.with_current_carrier(self.auth.upstream_metadata(self._incoming(request)))

    async def unary(
        self,
        method: grpc.aio.UnaryUnaryMultiCallable[Req, Resp],
        message: Req,
        request: web.Request,
        *,
        extra_timeout_s: float = 0.0,
    ) -> tuple[Resp, str]:
        """One unary call; returns the response and the X-Served-By value."""
        call = method(
            message,
            timeout=self.unary_timeout_s + extra_timeout_s,
            metadata=self.metadata(request),
        )
        try:
            response = await call
            return response, served_by_header(await call.trailing_metadata())
        except grpc.aio.AioRpcError as err:
            raise rpc_failure(err) from err
