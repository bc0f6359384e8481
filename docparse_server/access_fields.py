"""What the RPC interceptor (`observability.RpcObserver`) reads from a call for its access line
and its error metric: the job or batch id of the request or of the answer (decoded from raw
bytes on a proxy), the ErrorInfo reason of a failure, the peer, the trailers and the final code.

Each reader tolerates a call that has already ended or a message it cannot decode: it answers
with nothing rather than failing the call it observes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass
from google.rpc import error_details_pb2, status_pb2

ID_FIELDS = ("job_id", "batch_id")

Parsers = dict[str, Callable[[bytes], Message]]


def ids_of(message: Message) -> dict[str, str]:
    out = {}
    for name in ID_FIELDS:
        value = getattr(message, name, "")
        if value and isinstance(value, str):
            out[name] = value
    return out


def request_ids(request: Any, parse_raw: Callable[[bytes], Message] | None) -> dict[str, str]:
    """job_id / batch_id of a request: a message, or raw bytes that `parse_raw` decodes."""
    if isinstance(request, Message):
        return ids_of(request)
    if parse_raw is not None and isinstance(request, bytes):
        with contextlib.suppress(DecodeError):
            return ids_of(parse_raw(request))
    return {}


def response_ids(message: Any, parse_raw: Callable[[bytes], Message] | None) -> dict[str, str]:
    """job_id / batch_id of a unary response that carries a job or batch (SubmitJob, ...)."""
    if parse_raw is not None and isinstance(message, bytes):
        try:
            message = parse_raw(message)
        except DecodeError:
            return {}
    if not isinstance(message, Message):
        return {}
    for name in ("job", "batch"):
        if name in message.DESCRIPTOR.fields_by_name and message.HasField(name):
            return ids_of(getattr(message, name))
    return {}


def raw_parsers(services: Iterable[ServiceDescriptor]) -> tuple[Parsers, Parsers]:
    """For a proxy that sees raw bytes: request parsers for the methods whose request carries
    a job_id or batch_id and nothing big (never an upload): GetStatus, WatchJob, GetBatch, ...;
    response parsers for the other unary methods answering with a job or batch: the ones that
    create them (SubmitJob, CreateBatch, UploadBatch)."""
    methods = [(f"/{s.full_name}/{m.name}", m) for s in services for m in s.methods]

    def small_with_id(desc: Descriptor) -> bool:
        fields = desc.fields_by_name
        return any(name in fields for name in ID_FIELDS) and not any(
            f.type in (FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE)
            for f in desc.fields
        )

    requests: Parsers = {
        name: GetMessageClass(method.input_type).FromString
        for name, method in methods
        if not method.client_streaming and small_with_id(method.input_type)
    }
    responses: Parsers = {
        name: GetMessageClass(method.output_type).FromString
        for name, method in methods
        if name not in requests
        and not method.server_streaming
        and any(field in method.output_type.fields_by_name for field in ("job", "batch"))
    }
    return requests, responses


def error_reason(trailers: Iterable[tuple[str, Any]] | None) -> str:
    """The ErrorInfo reason of a rich error status in `trailers`, "" when there is none."""
    for key, value in trailers or ():
        if key != "grpc-status-details-bin":
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except (DecodeError, TypeError):
            return ""
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return str(info.reason)
    return ""


def peer(context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str]:
    """Read while the call is alive: context.peer() on a call the client already dropped (a
    closed channel, a connection cut by max_connection_age) dereferences a freed grpc_call and
    kills the process with SIGSEGV (grpcio 1.85)."""
    try:
        return {"peer": context.peer()}
    except Exception:
        return {}


def trailing_metadata(context: grpc.aio.ServicerContext[Any, Any]) -> tuple[tuple[str, Any], ...]:
    try:
        return tuple(context.trailing_metadata() or ())
    except Exception:
        return ()


def final_code(context: grpc.aio.ServicerContext[Any, Any], error: BaseException | None) -> str:
    """The status the client gets: what abort()/set_code() set, else from the way it ended."""
    try:
        code = context.code()
    except Exception:
        code = None
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int):
        for member in grpc.StatusCode:
            if member.value[0] == code:
                return member.name
    if error is None:
        return "OK"
    if isinstance(error, asyncio.CancelledError):
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            return "DEADLINE_EXCEEDED"
        return "CANCELLED"
    return "UNKNOWN"
