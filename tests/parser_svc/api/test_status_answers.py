"""GetStatus answers are encoded once per state of a job's record (parser_svc/api/status_answers.py)
and never differ from the record Redis holds at the time of the call."""

from __future__ import annotations

from typing import Any, cast

import grpc
import redis

from docparse.local.stack import LocalStack
from docparse.v1 import parser_service_pb2, parser_service_pb2_grpc
from parser_svc.api.service import ParserService, parser_service_handlers
from parser_svc.api.status_answers import EncodedStatus
from parser_svc.state.keys import Keys
from parser_svc.state.records import decode_hash, record_to_job
from tests.helpers import make_pdf, stub, submit, wait_terminal


def _encoded(record: dict[bytes, bytes]) -> bytes:
    job = record_to_job(decode_hash(record))
    return parser_service_pb2.GetStatusResponse(job=job).SerializeToString()


def _record(job_id: str, version: int, **fields: str) -> dict[bytes, bytes]:
    base = {"job_id": job_id, "state": "RUNNING", "version": str(version), "done": "1"}
    return {k.encode(): v.encode() for k, v in (base | fields).items()}


def test_an_answer_is_reused_only_for_the_same_record_and_the_memory_is_bounded() -> None:
    answers = EncodedStatus(capacity=8)
    first = _record("a", 3)
    assert answers.answer("a", first) == _encoded(first)
    assert answers.answer("a", dict(first)) is answers.answer("a", first)  # equal: reused
    # A field changed without a new version (no writer of ours does that) is still seen.
    moved = _record("a", 3, done="2")
    assert answers.answer("a", moved) == _encoded(moved) != _encoded(first)
    for n in range(20):
        record = _record(f"job{n}", n)
        assert answers.answer(f"job{n}", record) == _encoded(record)
        assert len(answers) <= 8
    assert len(answers) == 8
    assert answers.answer("a", moved) == _encoded(moved)  # evicted long ago: made again


class _Recorder:
    """Takes the place of a server in the generated registration, to compare its handlers."""

    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, name: str, handlers: dict[str, Any]) -> None:
        self.handlers = handlers


def test_the_handlers_are_the_generated_ones_but_get_status_answers_bytes() -> None:
    service = ParserService.__new__(ParserService)  # its methods only: nothing is called
    recorder = _Recorder()
    parser_service_pb2_grpc.add_ParserServiceServicer_to_server(
        service, cast(grpc.aio.Server, recorder)
    )
    ours = parser_service_handlers(service)
    assert ours.keys() == recorder.handlers.keys()
    for name, generated in recorder.handlers.items():
        handler = ours[name]
        assert handler.request_streaming == generated.request_streaming, name
        assert handler.response_streaming == generated.response_streaming, name
        assert handler.request_deserializer == generated.request_deserializer, name
        behaviour = "_".join(
            "stream" if s else "unary"
            for s in (handler.request_streaming, handler.response_streaming)
        )
        if name == "GetStatus":
            assert handler.response_serializer is None
            assert handler.unary_unary == service.get_status_encoded
        else:
            assert handler.response_serializer == generated.response_serializer, name
            assert getattr(handler, behaviour) == getattr(generated, behaviour), name


def test_get_status_answers_the_record_redis_holds_at_each_call(big_stack: LocalStack) -> None:
    """Through a replica: the answer is byte for byte the record read from Redis, polled twice
    (the second from the kept answer), and again after the record is changed behind the
    service's back without a version change."""
    job = submit(big_stack.parser_addresses[0], make_pdf(1), "answers.pdf")
    done = wait_terminal(big_stack.parser_addresses[0], job.job_id)
    request = parser_service_pb2.GetStatusRequest(job_id=job.job_id)
    key = Keys("test").job(job.job_id)
    with redis.Redis.from_url(big_stack.redis_url) as admin:
        channel, s = stub(big_stack.parser_addresses[1])
        with channel:
            for _ in range(2):
                record = admin.hgetall(key)
                answer = s.GetStatus(request, timeout=10)
                assert answer.SerializeToString() == _encoded(record)
                assert answer.job.version == done.version
            admin.hset(key, "file_name", "renamed.pdf")
            assert s.GetStatus(request, timeout=10).job.file_name == "renamed.pdf"
