"""The caller of each docparse.v1 call, as the gateway vouched for it.

`CallerInterceptor` checks the internal token and puts the caller in a context variable for
the duration of the call; the store scopes every job read to that caller's tenant, so no
handler can forget to. Work outside a call (queue workers) has no caller and no scoping.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from docparse.errors import DocparseError
from docparse.serving import Handler, abort
from docparse.tenancy import Caller, caller_from_metadata

current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "docparse_caller", default=None
)
SCOPED_PREFIX = "/docparse.v1."


def current_tenant() -> str | None:
    caller = current_caller.get()
    return caller.tenant if caller else None


class CallerInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, internal_token: str) -> None:
        self.internal_token = internal_token

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or not method.startswith(SCOPED_PREFIX):
            return handler  # health and reflection stay open
        metadata = handler_call_details.invocation_metadata or ()
        try:
            caller = caller_from_metadata(metadata, self.internal_token)
        except DocparseError as err:
            return _refusing(handler, err)
        return _with_caller(handler, caller)


def _rebuild(handler: Handler, unary: Any, stream: Any) -> Handler:
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


def _with_caller(handler: Handler, caller: Caller) -> Handler:
    def unary(fn: Any) -> Any:
        async def call(request: Any, context: Any) -> Any:
            current_caller.set(caller)
            return await fn(request, context)

        return call

    def stream(fn: Any) -> Any:
        async def call(request: Any, context: Any) -> Any:
            current_caller.set(caller)
            async for item in fn(request, context):
                yield item

        return call

    return _rebuild(handler, unary, stream)


def _refusing(handler: Handler, err: DocparseError) -> Handler:
    def unary(_fn: Any) -> Any:
        async def call(request: Any, context: Any) -> Any:
            await abort(context, err)

        return call

    def stream(_fn: Any) -> Any:
        async def call(request: Any, context: Any) -> Any:
            await abort(context, err)
            yield None

        return call

    return _rebuild(handler, unary, stream)
