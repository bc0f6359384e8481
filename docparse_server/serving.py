"""Pieces every docparse gRPC server shares: identity trailer, health, reflection, shutdown."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, NoReturn, TypeAlias

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from docparse.errors import DocparseError
from docparse.ports import port_in_use, port_is_free, split_address
from docparse.reasons import ErrorReason
from docparse_server.errors import error

SERVED_BY_KEY = "x-served-by"
# Server option: never share a port. grpc sets SO_REUSEPORT by default, so a second server on
# a taken port would silently split the calls with the first one.
EXCLUSIVE_PORT: tuple[str, int] = ("grpc.so_reuseport", 0)
EXIT_CANNOT_LISTEN = 2
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


def rebuild_handler(
    handler: Handler, unary: Any, stream: Any, request_deserializer: Any = None
) -> Handler:
    """`handler` with its behaviour function replaced by `unary(fn)` (unary responses) or
    `stream(fn)` (streamed responses), same (de)serializers unless `request_deserializer`
    replaces the request's."""
    kwargs = {
        "request_deserializer": request_deserializer or handler.request_deserializer,
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


class InterceptorChain(WrappingInterceptor):
    """Several `WrappingInterceptor`s as one: the first wraps outermost, as if each were given
    to `grpc.aio.server(interceptors=...)` in this order, but grpc finds a call's handler
    through one interceptor instead of one per layer (each layer costs a coroutine and a cache
    lookup per call there: bench/README.md, GetStatus pass 7). The layers' wraps run once per
    method, here."""

    def __init__(self, *layers: WrappingInterceptor) -> None:
        super().__init__()
        self.layers = layers

    def wrap(self, handler: Handler, method: str) -> Handler:
        for layer in reversed(self.layers):
            handler = layer.wrap(handler, method)
        return handler


class ErrorInterceptor(WrappingInterceptor):
    """The one place a handler's `DocparseError` becomes the call's status: its gRPC code, its
    message and a `google.rpc.Status` with the ErrorInfo reason (and RetryInfo when it names a
    delay), keeping the `x-served-by` trailer. Handlers raise; they never abort by hand.
    Other exceptions pass through (grpc ends the call UNKNOWN and RpcObserver logs it).
    Register it innermost (last), so the interceptors outside it see the status it sets."""

    def wrap(self, handler: Handler, method: str) -> Handler:
        def wrap_unary(fn: Any) -> Any:
            async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                try:
                    return await fn(request, context)
                except DocparseError as err:
                    await abort(context, err)
                    raise AssertionError("unreachable") from err  # abort always raises

            return call

        def wrap_stream(fn: Any) -> Any:
            async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                try:
                    async for item in fn(request, context):
                        yield item
                except DocparseError as err:
                    await abort(context, err)

            return call

        return rebuild_handler(handler, wrap_unary, wrap_stream)


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


def bind_grpc(
    server: grpc.aio.Server, listen: str, credentials: grpc.ServerCredentials | None = None
) -> int:
    """Adds the listening port (create the server with EXCLUSIVE_PORT); FAILED_PRECONDITION
    PORT_IN_USE naming the holder when it is taken, BIND_FAILED for any other refusal."""
    try:
        if credentials is None:
            return server.add_insecure_port(listen)
        return server.add_secure_port(listen, credentials)
    except RuntimeError as err:
        raise _bind_error(listen, str(err)) from err


def _bind_error(listen: str, detail: str) -> DocparseError:
    host, port = split_address(listen)
    if port and not port_is_free(port, host or "0.0.0.0"):
        return port_in_use(listen)
    return error(
        ErrorReason.BIND_FAILED,
        f"cannot listen on {listen}: {detail}",
        {"address": listen},
    )


@contextlib.contextmanager
def binding(listen: str) -> Iterator[None]:
    """Turns an OSError of a bind to `listen` (an HTTP or metrics server) into the same error
    as `bind_grpc`."""
    try:
        yield
    except OSError as err:
        raise _bind_error(listen, err.strerror or str(err)) from err


def exit_cannot_listen(service: str, err: DocparseError) -> NoReturn:
    """Ends a server that could not bind: one error line naming the address (and the process
    holding it), then exit code 2, no traceback."""
    exit_on_startup_error(service, err)


def exit_on_startup_error(service: str, err: DocparseError) -> NoReturn:
    """Ends a server that must not start (a port taken, a secret missing): one error line with
    the reason, then exit code 2, no traceback."""
    logging.getLogger(service).error(
        "%s %s: %s", err.code.name, err.reason, err.message,
        extra={"event": "startup.failed", "code": err.code.name, "reason": err.reason,
               **err.metadata},
    )  # fmt: skip
    raise SystemExit(EXIT_CANNOT_LISTEN)


def bind_grpc_or_exit(
    service: str,
    server: grpc.aio.Server,
    listen: str,
    credentials: grpc.ServerCredentials | None = None,
) -> int:
    try:
        return bind_grpc(server, listen, credentials)
    except DocparseError as err:
        exit_cannot_listen(service, err)
