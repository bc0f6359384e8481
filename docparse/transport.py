"""The SDK's one seam to the outside: every call to the service goes through a Transport.

`GrpcTransport` / `GrpcAsyncTransport` are the real ones; tests replace them to script
answers (sync answer, async answer, broken streams, ...) without a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from typing import Any, Protocol

import grpc
from google.protobuf.message import Message

from docparse.aio_status import keep_server_status_on_failed_writes
from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import parser_service_pb2_grpc

MESSAGE_LIMIT = 65 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MESSAGE_LIMIT),
    ("grpc.max_send_message_length", MESSAGE_LIMIT),
    ("grpc.keepalive_time_ms", 30_000),
]


class Transport(Protocol):
    def call(
        self, method: str, request: Message, deadline_s: float | None
    ) -> tuple[Any, tuple[str, ...]]:
        """A unary call: the response and the `x-served-by` values of its trailers."""

    def stream(self, method: str, request: Message, deadline_s: float | None) -> Iterator[Any]:
        """A server-streaming call; errors surface as DocparseError while iterating."""

    def upload(
        self, method: str, requests: Iterable[Message], deadline_s: float | None
    ) -> tuple[Any, tuple[str, ...]]:
        """A client-streaming call (UploadBatch): the requests are sent as grpc asks for them
        (flow control), never gathered first."""

    def close(self) -> None: ...


class AsyncTransport(Protocol):
    async def call(
        self, method: str, request: Message, deadline_s: float | None
    ) -> tuple[Any, tuple[str, ...]]: ...

    def stream(
        self, method: str, request: Message, deadline_s: float | None
    ) -> AsyncIterator[Any]: ...

    async def upload(
        self, method: str, requests: AsyncIterable[Message], deadline_s: float | None
    ) -> tuple[Any, tuple[str, ...]]: ...

    async def close(self) -> None: ...


def credentials_metadata(api_key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {api_key}"),) if api_key else ()


def open_channel(target: str, tls_root_cert: bytes | None, aio: bool) -> Any:
    """Plaintext, or TLS when a root certificate (PEM) is given (b"" uses the system roots)."""
    module: Any = grpc.aio if aio else grpc
    if aio:  # an upload the server refuses early says why, not INTERNAL (aio_status.py)
        keep_server_status_on_failed_writes()
    if tls_root_cert is None:
        return module.insecure_channel(target, options=CHANNEL_OPTIONS)
    credentials = grpc.ssl_channel_credentials(root_certificates=tls_root_cert or None)
    return module.secure_channel(target, credentials, options=CHANNEL_OPTIONS)


def served_by(metadata: Any) -> tuple[str, ...]:
    return tuple(str(v) for k, v in (metadata or ()) if k == "x-served-by")


# Told the method and the `x-served-by` values of every answer (errors and streams included).
AnswerObserver = Callable[[str, tuple[str, ...]], None]


def _trailers(err: grpc.RpcError) -> Any:
    trailing = getattr(err, "trailing_metadata", None)
    return trailing() if callable(trailing) else ()


def rpc_failure(err: grpc.RpcError, target: str) -> DocparseError:
    """The DocparseError of a failed call. UNAVAILABLE that no docparse process answered (no
    ErrorInfo, no x-served-by: nothing listening, a refused or broken connection, a TLS
    mismatch) gets a reason of our own, TARGET_UNREACHABLE, naming the target; a message over
    gRPC's size limit gets MESSAGE_TOO_LARGE."""
    error = DocparseError.from_rpc_error(err)
    if (
        error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        and not error.reason
        and "larger than max" in error.message
    ):  # grpc's own message size limit (this client's, or the server's): never retried
        return DocparseError(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            ErrorReason.MESSAGE_TOO_LARGE,
            f"a message to or from {target} is over gRPC's size limit: {error.message} "
            "(submit big files through UploadBatch: `docparse submit` does)",
            {"target": target},
        )
    unanswered = error.code == grpc.StatusCode.UNAVAILABLE and not error.reason
    if unanswered and not served_by(_trailers(err)):
        return DocparseError(
            grpc.StatusCode.UNAVAILABLE,
            ErrorReason.TARGET_UNREACHABLE,
            f"no docparse server answered at {target}: {error.message or 'no details'}",
            {"target": target},
        )
    return error


# A stream its reader leaves (at its terminal record, which its server follows with its end at
# once) is given this long to end by itself before it is cancelled, only when `on_answer` wants
# to hear who answered it: its trailers carry that.
LEFT_STREAM_END_WAIT_S = 1.0


def _ends_within(call: Any, seconds: float) -> bool:
    """Whether the (blocking API's) `call` ended within `seconds`."""
    ended = threading.Event()
    call.add_done_callback(lambda _call: ended.set())
    return ended.wait(seconds)


class GrpcConnection:
    """A channel to `target` with the caller's credentials, for either transport; it tells
    `on_answer(method, served_by)` who answered every call, errors and streams included."""

    aio = False  # a grpc.aio channel

    def __init__(
        self,
        target: str,
        api_key: str = "",
        tls_root_cert: bytes | None = None,
        on_answer: AnswerObserver | None = None,
    ) -> None:
        self.target = target
        self.channel = open_channel(target, tls_root_cert, aio=self.aio)
        self.stub = parser_service_pb2_grpc.ParserServiceStub(self.channel)
        self.metadata = credentials_metadata(api_key)
        self.on_answer = on_answer

    def _answered(self, method: str, metadata: Any) -> None:
        if self.on_answer is not None:
            self.on_answer(method, served_by(metadata))

    def _failed(self, method: str, err: grpc.RpcError) -> DocparseError:
        self._answered(method, _trailers(err))
        return rpc_failure(err, self.target)


class GrpcTransport(GrpcConnection):
    def call(
        self, method: str, request: Message, deadline_s: float | None
    ) -> tuple[Any, tuple[str, ...]]:
        try:
            response, call = getattr(self.stub, method).with_call(
                request, timeout=deadline_s, metadata=self.metadata
            )
        except grpc.RpcError as err:
            raise self._failed(method, err) from err
        replicas = served_by(call.trailing_metadata())
        self._answered(method, call.trailing_metadata())
        return response, replicas

    def stream(self, method: str, request: Message, deadline_s: float | None) -> Iterator[Any]:
        call = getattr(self.stub, method)(request, timeout=deadline_s, metadata=self.metadata)
        try:
            yield from call
            self._answered(method, call.trailing_metadata())
        except grpc.RpcError as err:
            raise self._failed(method, err) from err
        except GeneratorExit:  # left before its end: after its terminal record, or abandoned
            if self.on_answer is not None and _ends_within(call, LEFT_STREAM_END_WAIT_S):
                self._answered(method, call.trailing_metadata())
            raise
        finally:
            call.cancel()

    def upload(
        self, method: str, requests: Iterable[Message], deadline_s: float | None
    ) -> tuple[Any, tuple[str, ...]]:
        try:
            response, call = getattr(self.stub, method).with_call(
                iter(requests), timeout=deadline_s, metadata=self.metadata
            )
        except grpc.RpcError as err:
            raise self._failed(method, err) from err
        self._answered(method, call.trailing_metadata())
        return response, served_by(call.trailing_metadata())

    def close(self) -> None:
        self.channel.close()


class GrpcAsyncTransport(GrpcConnection):
    aio = True

    async def call(
        self, method: str, request: Message, deadline_s: float | None
    ) -> tuple[Any, tuple[str, ...]]:
        call = getattr(self.stub, method)(request, timeout=deadline_s, metadata=self.metadata)
        return await self._answer(method, call)

    async def stream(
        self, method: str, request: Message, deadline_s: float | None
    ) -> AsyncIterator[Any]:
        call = getattr(self.stub, method)(request, timeout=deadline_s, metadata=self.metadata)
        try:
            async for message in call:
                yield message
            if self.on_answer is not None:
                self._answered(method, await call.trailing_metadata())
        except grpc.RpcError as err:
            raise self._failed(method, err) from err
        except GeneratorExit:  # left before its end: after its terminal record, or abandoned
            if self.on_answer is not None:
                with contextlib.suppress(TimeoutError, grpc.RpcError):
                    await asyncio.wait_for(call.code(), LEFT_STREAM_END_WAIT_S)
                    self._answered(method, await call.trailing_metadata())
            raise
        finally:
            call.cancel()

    async def upload(
        self, method: str, requests: AsyncIterable[Message], deadline_s: float | None
    ) -> tuple[Any, tuple[str, ...]]:
        call = getattr(self.stub, method)(requests, timeout=deadline_s, metadata=self.metadata)
        return await self._answer(method, call)

    async def _answer(self, method: str, call: Any) -> tuple[Any, tuple[str, ...]]:
        """The response of a unary or client-streaming call and its `x-served-by` values."""
        try:
            response = await call
            trailers = await call.trailing_metadata()
        except grpc.RpcError as err:
            raise self._failed(method, err) from err
        self._answered(method, trailers)
        return response, served_by(trailers)

    async def close(self) -> None:
        await self.channel.close()
