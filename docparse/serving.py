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
    """`<host>/<pid>`: which process answered. Computed once per process; a forked child
    computes its own (the cache is cleared in the child at fork)."""
    global _served_by
    if _served_by is None:
        value = f"{socket.gethostname()}/{os.getpid()}"
        _served_by = (value, ((SERVED_BY_KEY, value),))
    return _served_by[0]


def served_by_metadata() -> tuple[tuple[str, str], ...]:
    served_by()
    assert _served_by is not None
    return _served_by[1]


_served_by: tuple[str, tuple[tuple[str, str], ...]] | None = None


def _forget_served_by() -> None:
    global _served_by
    _served_by = None


os.register_at_fork(after_in_child=_forget_served_by)


async def abort(context: grpc.aio.ServicerContext[Any, Any], err: DocparseError) -> None:
    """Ends the call with `err` as a rich status, keeping the `x-served-by` trailer."""
    status = err.to_status()
    trailers = tuple(status.trailing_metadata) + served_by_metadata()
    await context.abort(status.code, status.details, trailers)


def rebuild_handler(handler: Handler, unary: Any, stream: Any) -> Handler:
    """`handler` with its behaviour function replaced by `unary(fn)` (unary responses) or
    `stream(fn)` (streamed responses), same (de)serializers."""
    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), **kwargs)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(stream(handler.unary_stream), **kwargs)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary(handler.stream_unary), **kwargs)
    return grpc.stream_stream_rpc_method_handler(stream(handler.stream_stream), **kwargs)


class WrappingInterceptor(grpc.aio.ServerInterceptor):
    """Base for interceptors that wrap a method's handler the same way on every call.

    grpc.aio calls `intercept_service` on every call, but the handler `continuation` returns is
    the same object each time for a method (registered handlers and generic handlers' dicts),
    so the wrapped handler is built once per method and reused: `wrap(handler, method)` must
    not depend on the call (read per-call data from the context inside the wrapped function).
    The cache is keyed on the method name and holds the handler it wrapped: another handler
    object for that method is wrapped again (and replaces the entry)."""

    MAX_CACHED_METHODS = 1024  # a generic handler answering any method name can't grow it

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method: str = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self.wrap(handler, method)
        if cached is not None or len(self._wrapped) < self.MAX_CACHED_METHODS:
            self._wrapped[method] = (handler, wrapped)
        return wrapped

    def wrap(self, handler: Handler, method: str) -> Handler:
        raise NotImplementedError


class ServedByInterceptor(WrappingInterceptor):
    """Sets `x-served-by` as trailing metadata before any handler runs, so every response
    (success, error, health, reflection) names the replica that produced it."""

    def wrap(self, handler: Handler, method: str) -> Handler:
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

        return rebuild_handler(handler, wrap_unary, wrap_stream)


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
