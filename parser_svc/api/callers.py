"""The caller of each docparse.v1 call, as the gateway vouched for it.

`CallerInterceptor` checks the internal token and puts the caller in a context variable
(parser_svc.state.caller_scope) for the duration of the call; the store scopes every job read
to that caller's tenant, so no handler can forget to. Work outside a call (queue workers) has
no caller and no scoping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from google.protobuf.message import DecodeError

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse_server.errors import error
from docparse_server.serving import Handler, WrappingInterceptor, abort, rebuild_handler
from docparse_server.tenancy import (
    ADMIN_KEY,
    INTERNAL_TOKEN_KEY,
    LIMITS_KEY,
    TENANT_KEY,
    Caller,
    caller_from_metadata,
)
from parser_svc.state.caller_scope import current_caller

SCOPED_PREFIX = "/docparse.v1."
_CALLER_KEYS = frozenset((TENANT_KEY, LIMITS_KEY, ADMIN_KEY, INTERNAL_TOKEN_KEY))
_MAX_CALLERS = 1024


# What a request deserializes to when its bytes are not the method's message: grpc.aio would
# answer UNKNOWN naming the Python exception and log an ERROR with a traceback per call.
MALFORMED = object()


def tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def parse(raw: bytes) -> Any:
        try:
            return deserializer(raw)
        except DecodeError:
            return MALFORMED

    return parse


def malformed(method: str) -> DocparseError:
    name = method.rpartition("/")[2][:64]
    return error(
        ErrorReason.MALFORMED_REQUEST,
        f"the request is not a valid {name} request message (protobuf that does not parse)",
        {"method": name},
    )


async def _checked(requests: AsyncIterator[Any], method: str) -> AsyncIterator[Any]:
    async for request in requests:
        if request is MALFORMED:
            raise malformed(method)
        yield request


class CallerInterceptor(WrappingInterceptor):
    """docparse.v1 calls: the caller is read from the call's metadata when the call runs (the
    wrapped handler is built once per method), then either set in `current_caller` for the
    rest of the call or the call is refused with UNAUTHENTICATED. Health and reflection stay
    open."""

    def __init__(self, internal_token: str) -> None:
        super().__init__()
        self.internal_token = internal_token
        self._callers: dict[tuple[Any, ...], Caller] = {}

    def caller(self, metadata: Any) -> Caller:
        """`caller_from_metadata`, memoized on the items it reads (token, tenant, limits, admin): a
        Caller is immutable and the gateway sends the same few all day. Refusals raise and are
        not cached (random tokens can't fill it); at most 1,024 entries."""
        key = tuple(item for item in metadata or () if item[0] in _CALLER_KEYS)
        caller = self._callers.get(key)
        if caller is None:
            caller = caller_from_metadata(key, self.internal_token)
            if len(self._callers) < _MAX_CALLERS:
                self._callers[key] = caller
        return caller

    def wrap(self, handler: Handler, method: str) -> Handler:
        if not method.startswith(SCOPED_PREFIX):
            return handler
        get_caller = self.caller

        streaming = handler.request_streaming

        def begin(request: Any, context: Any) -> Any:
            """The caller set for the call and the request checked (DocparseError if not)."""
            current_caller.set(get_caller(context.invocation_metadata()))
            if streaming:
                return _checked(request, method)
            if request is MALFORMED:
                raise malformed(method)
            return request

        def unary(fn: Any) -> Any:
            async def call(request: Any, context: Any) -> Any:
                try:
                    request = begin(request, context)
                except DocparseError as err:
                    await abort(context, err)
                    return None
                return await fn(request, context)

            return call

        def stream(fn: Any) -> Any:
            async def call(request: Any, context: Any) -> Any:
                try:
                    request = begin(request, context)
                except DocparseError as err:
                    await abort(context, err)
                    return
                async for item in fn(request, context):
                    yield item

            return call

        return rebuild_handler(handler, unary, stream, tolerant(handler.request_deserializer))
