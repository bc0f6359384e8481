"""Generic forwarding of any method of the docparse.v1 services to parser_svc.

Nothing here knows a method by name: cardinality (unary / streaming) comes from the service
descriptors, and messages travel as raw bytes, never decoded. Deadlines, request metadata,
response headers, trailers (x-served-by of the replica) and rich error details pass through;
the gateway adds its own `x-served-by` after the replica's.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import Any

import grpc
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor

from docparse.aio_status import keep_server_status_on_failed_writes
from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse_server import tracing
from docparse_server.errors import error
from docparse_server.flow_control import receive_window_options
from docparse_server.serving import SERVED_BY_KEY, abort, served_by_metadata
from gateway import observability
from gateway.auth import GatewayAuth
from gateway.span_ids import SpanIds

Context = grpc.aio.ServicerContext[Any, Any]
_HOP_BY_HOP = {"user-agent", "te", "content-type", "host", "connection"}


def upstream_target(backends: str) -> str:
    """A gRPC target with every replica in it, so round_robin spreads calls over all of them."""
    if "://" in backends or backends.startswith(("ipv4:", "ipv6:", "unix:", "dns:")):
        return backends
    addresses = []
    for entry in (part.strip() for part in backends.split(",") if part.strip()):
        host, _, port = entry.rpartition(":")
        try:
            ipaddress.IPv4Address(host)
            addresses.append(entry)
        except ValueError:
            resolved = {info[4][0] for info in socket.getaddrinfo(host, port, socket.AF_INET)}
            addresses += [f"{ip}:{port}" for ip in sorted(resolved)]
    return "ipv4:" + ",".join(addresses)


def tls_server_name(backends: str) -> str:
    """The name the replicas' certificate is checked against when none is configured: the host
    of the first entry of a host:port list (the channel's target lists the addresses it
    resolves to, which name no host: grpc would check against all of them at once); "" for a
    gRPC target URI, whose own authority is checked."""
    if "://" in backends or backends.startswith(("ipv4:", "ipv6:", "unix:", "dns:")):
        return ""
    first = next((part.strip() for part in backends.split(",") if part.strip()), "")
    return first.rpartition(":")[0].strip("[]")


def upstream_channel(
    backends: str,
    max_message_bytes: int,
    receive_window_bytes: int,
    credentials: grpc.ChannelCredentials | None = None,
    server_name: str = "",
) -> grpc.aio.Channel:
    """The channel to the replicas: TLS with `credentials` (the replicas' CA; `server_name`
    the name their certificate must carry, else `tls_server_name`), else plaintext."""
    # An upload parser_svc refuses on its header is relayed with its status, not as INTERNAL
    # (a write racing the refusal: docparse/aio_status.py).
    keep_server_status_on_failed_writes()
    config: dict[str, Any] = {"loadBalancingConfig": [{"round_robin": {}}]}
    options: list[tuple[str, Any]] = [
        ("grpc.service_config", json.dumps(config)),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.dns_min_time_between_resolutions_ms", 5_000),
        *receive_window_options(receive_window_bytes),
    ]
    target = upstream_target(backends)
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=options)
    server_name = server_name or tls_server_name(backends)
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    return grpc.aio.secure_channel(target, credentials, options=options)


async def _relay_headers(call: Any, context: Context) -> None:
    """Sends the upstream call's initial metadata on, only when there is something to pass on:
    an explicit send is a flush and a completion of its own, while grpc sends empty headers
    with the response."""
    headers = tuple(await call.initial_metadata() or ())
    if headers:
        await context.send_initial_metadata(headers)


def _client_metadata(context: Context) -> list[tuple[str, str | bytes]]:
    out: list[tuple[str, str | bytes]] = []
    for key, value in context.invocation_metadata() or ():
        if key.startswith((":", "grpc-")) or key in _HOP_BY_HOP:
            continue
        out.append((key, value))
    out.append(("x-forwarded-for", context.peer()))
    return out


def _trailers(upstream: Iterable[tuple[str, str | bytes]] | None) -> tuple[Any, ...]:
    return tuple(upstream or ()) + served_by_metadata()


class ForwardingHandler(grpc.GenericRpcHandler):
    def __init__(
        self,
        channel: grpc.aio.Channel,
        services: Iterable[ServiceDescriptor],
        default_unary_timeout_s: float,
        auth: GatewayAuth,
    ) -> None:
        services = list(services)
        self._channel = channel
        self._auth = auth
        self._span_ids = SpanIds(services)  # docparse.job_id of the calls' spans
        self._streams: set[Any] = set()
        self._draining = False
        self._default_timeout = default_unary_timeout_s
        self._methods: dict[str, MethodDescriptor] = {
            f"/{service.full_name}/{method.name}": method
            for service in services
            for method in service.methods
        }
        # Built once per method, not per call: a handler and its channel callable are reusable.
        self._handlers = {name: self._handler(name, m) for name, m in self._methods.items()}
        self._refusals = {name: self._refusal(m) for name, m in self._methods.items()}

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        """The method's forwarding handler; for a call without a valid API key, a handler that
        refuses it (UNAUTHENTICATED) without reading its request: grpc reads a unary request
        whole before any handler runs, and a SubmitJob may be 64 MB from anyone."""
        method = handler_call_details.method
        if self._auth.required and method in self._handlers:
            try:
                self._auth.caller(handler_call_details.invocation_metadata or ())
            except DocparseError:
                return self._refusals[method]
        return self._handlers.get(method)

    def _refusal(self, method: MethodDescriptor) -> grpc.RpcMethodHandler[Any, Any]:
        """A request-streaming handler (never reads the request) with the method's response
        kind, which aborts with the caller's authentication error."""

        async def refuse(context: Context) -> None:
            await abort(context, self._auth.refusal(context.invocation_metadata() or ()))

        async def unary(requests: Any, context: Context) -> bytes:
            await refuse(context)
            raise AssertionError("unreachable")

        async def stream(requests: Any, context: Context) -> AsyncIterator[bytes]:
            await refuse(context)
            yield b""  # unreachable: makes this an async generator

        if method.server_streaming:
            return grpc.stream_stream_rpc_method_handler(stream)
        return grpc.stream_unary_rpc_method_handler(unary)

    def _handler(
        self, method_name: str, method: MethodDescriptor
    ) -> grpc.RpcMethodHandler[Any, Any]:
        client_streaming = method.client_streaming
        server_streaming = method.server_streaming
        if not client_streaming and not server_streaming:
            return grpc.unary_unary_rpc_method_handler(self._unary(method_name))
        if not client_streaming:
            return grpc.unary_stream_rpc_method_handler(self._stream(method_name, False))
        if not server_streaming:
            return grpc.stream_unary_rpc_method_handler(self._unary(method_name, True))
        return grpc.stream_stream_rpc_method_handler(self._stream(method_name, True))

    def drain(self) -> int:
        """Shutdown: ends every forwarded stream now with UNAVAILABLE/SERVER_SHUTTING_DOWN, so
        watch clients resume through another gateway instead of waiting out the grace."""
        self._draining = True
        for call in list(self._streams):
            call.cancel()
        return len(self._streams)

    async def _metadata(self, context: Context) -> list[tuple[str, str | bytes]]:
        """Upstream metadata with the caller's identity; aborts UNAUTHENTICATED without one."""
        try:
            metadata = self._auth.upstream_metadata(_client_metadata(context))
            return tracing.with_current_carrier(metadata)
        except DocparseError as err:
            await abort(context, err)
            raise AssertionError("unreachable") from err

    def _timeout(self, context: Context, unary: bool) -> float | None:
        remaining = context.time_remaining()
        if remaining is not None:
            return float(remaining)
        return self._default_timeout if unary else None

    def _unary(self, method: str, client_streaming: bool = False) -> Any:
        factory = self._channel.stream_unary if client_streaming else self._channel.unary_unary
        callable_: Any = factory(method)

        async def handle(request: Any, context: Context) -> bytes:
            if not tracing.enabled():
                return await forward(request, context)
            parent = tracing.carrier_from(context.invocation_metadata() or ())
            named = self._span_ids.of_request(method, request)
            with tracing.span(method, parent=parent, kind="server", attributes=named) as current:
                response = await forward(request, context)
                tracing.set_attributes(current, self._span_ids.of_response(method, response))
                return response

        async def forward(request: Any, context: Context) -> bytes:
            call = callable_(
                request,
                timeout=self._timeout(context, unary=True),
                metadata=await self._metadata(context),
            )
            # A client stream's headers go on as soon as the replica sends them: an upload's
            # `x-docparse-upload: header-accepted` tells its client that the header passed
            # before it streams files (a refusal then reaches it as the replica's status).
            early = None
            if client_streaming:
                early = asyncio.ensure_future(_relay_headers(call, context))
            try:
                response: bytes = await call
                if early is not None:
                    await early
                else:
                    await _relay_headers(call, context)
            except grpc.aio.AioRpcError as err:
                if early is not None:
                    await early  # the call has ended: its headers are known, or there are none
                await _relay_error(context, err)
                raise
            except asyncio.CancelledError:
                call.cancel()
                if early is not None:
                    early.cancel()
                raise
            context.set_trailing_metadata(_trailers(await call.trailing_metadata()))
            return response

        return handle

    def _stream(self, method: str, client_streaming: bool) -> Any:
        factory = self._channel.stream_stream if client_streaming else self._channel.unary_stream
        callable_: Any = factory(method)

        async def traced(request: Any, context: Context) -> AsyncIterator[bytes]:
            parent = tracing.carrier_from(context.invocation_metadata() or ())
            named = self._span_ids.of_request(method, request)
            with tracing.span(method, parent=parent, kind="server", attributes=named):
                async with contextlib.aclosing(handle(request, context)) as messages:
                    async for message in messages:
                        yield message

        async def handle(request: Any, context: Context) -> AsyncGenerator[bytes, None]:
            call = callable_(
                request,
                timeout=self._timeout(context, unary=False),
                metadata=await self._metadata(context),
            )
            self._streams.add(call)
            try:
                await context.send_initial_metadata(tuple(await call.initial_metadata() or ()))
                async for message in call:
                    yield message
            except grpc.aio.AioRpcError as err:
                if self._draining and err.code() == grpc.StatusCode.CANCELLED:
                    await abort(context, gateway_draining())
                await _relay_error(context, err)
                raise
            except asyncio.CancelledError:
                if self._draining:  # drain() cancelled the upstream call: tell the client why
                    await abort(context, gateway_draining())
                raise
            finally:
                self._streams.discard(call)
                call.cancel()
            context.set_trailing_metadata(_trailers(await call.trailing_metadata()))

        # A span per stream only when tracing is on (set up before the handlers are built,
        # gateway/server.py): otherwise the messages go through no extra generator.
        return traced if tracing.enabled() else handle


def gateway_draining() -> DocparseError:
    return error(
        ErrorReason.SERVER_SHUTTING_DOWN,
        "this gateway is shutting down; resume the watch with after_version on another",
    )


def no_replica(err: grpc.aio.AioRpcError) -> DocparseError | None:
    """UNAVAILABLE NO_REPLICA_REACHABLE for an upstream call no replica answered (it carries no
    x-served-by): the gateway's own reason, so the error names one. None for anything else."""
    if err.code() != grpc.StatusCode.UNAVAILABLE:
        return None
    if any(key == SERVED_BY_KEY for key, _ in err.trailing_metadata() or ()):
        return None
    return error(
        ErrorReason.NO_REPLICA_REACHABLE,
        f"the gateway reached no parser_svc replica: {err.details() or 'no details'}",
    )


async def _relay_error(context: Context, err: grpc.aio.AioRpcError) -> None:
    observability.upstream_error(err)
    if (own := no_replica(err)) is not None:
        await abort(context, own)
    await context.abort(err.code(), err.details() or "", _trailers(err.trailing_metadata()))
