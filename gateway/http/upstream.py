"""The HTTP side's calls to parser_svc: the gateway's own round-robin upstream channel, typed
stubs, the replica's `x-served-by` carried into an `X-Served-By` response header, and failed
calls turned into `HttpError` (a `DocparseError` plus who answered)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import grpc
from aiohttp import web

from docparse.errors import DocparseError
from docparse.serving import SERVED_BY_KEY, served_by
from docparse.v1 import parser_service_pb2_grpc

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Metadata = Sequence[tuple[str, str]]


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


def call_metadata(request: web.Request) -> Metadata:
    return (("x-forwarded-for", request.remote or ""),)


def rpc_failure(err: grpc.aio.AioRpcError) -> HttpError:
    return HttpError(DocparseError.from_rpc_error(err), served_by_header(err.trailing_metadata()))


class Upstream:
    def __init__(self, channel: grpc.aio.Channel, unary_timeout_s: float) -> None:
        self.stub = parser_service_pb2_grpc.ParserServiceStub(channel)
        self.unary_timeout_s = unary_timeout_s

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
            metadata=call_metadata(request),
        )
        try:
            response = await call
            return response, served_by_header(await call.trailing_metadata())
        except grpc.aio.AioRpcError as err:
            raise rpc_failure(err) from err
