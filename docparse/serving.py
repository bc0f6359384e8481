"""Pieces every docparse gRPC server shares: identity trailer, health, reflection, shutdown."""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from docparse.errors import DocparseError

SERVED_BY_KEY = "x-served-by"
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


def served_by() -> str:
    """`<host>/<pid>`: which process answered. Computed per call so forks get their own pid."""
    return f"{socket.gethostname()}/{os.getpid()}"


def served_by_metadata() -> tuple[tuple[str, str], ...]:
    return ((SERVED_BY_KEY, served_by()),)


async def abort(context: grpc.aio.ServicerContext[Any, Any], err: DocparseError) -> None:
    """Ends the call with `err` as a rich status, keeping the `x-served-by` trailer."""
    status = err.to_status()
    trailers = tuple(status.trailing_metadata) + served_by_metadata()
    await context.abort(status.code, status.details, trailers)


class ServedByInterceptor(grpc.aio.ServerInterceptor):
    """Sets `x-served-by` as trailing metadata before any handler runs, so every response
    (success, error, health, reflection) names the replica that produced it."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        return _wrap_handler(handler)


def _wrap_handler(handler: Handler) -> Handler:
    trailers = served_by_metadata()

    def wrap_unary(fn: Any) -> Any:
        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            context.set_trailing_metadata(trailers)
            return await fn(request, context)

        return call

    def wrap_stream(fn: Any) -> Any:
        async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            context.set_trailing_metadata(trailers)
            async for item in fn(request, context):
                yield item

        return call

    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(wrap_unary(handler.unary_unary), **kwargs)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(wrap_stream(handler.unary_stream), **kwargs)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(wrap_unary(handler.stream_unary), **kwargs)
    return grpc.stream_stream_rpc_method_handler(wrap_stream(handler.stream_stream), **kwargs)


def add_health_and_reflection(
    server: grpc.aio.Server, service_names: Sequence[str]
) -> health.aio.HealthServicer:
    """Registers grpc.health.v1 (overall "" plus each service) and server reflection."""
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    names = [*service_names, health.SERVICE_NAME, reflection.SERVICE_NAME]
    reflection.enable_server_reflection(names, server)
    return servicer


async def set_serving(servicer: Any, service_names: Sequence[str], serving: bool) -> None:
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for name in ["", *service_names]:
        await servicer.set(name, status)
