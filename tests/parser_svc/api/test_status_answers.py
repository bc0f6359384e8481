"""GetStatus answers and ListJobs pages are encoded once per state of a job's record
(parser_svc/api/status_answers.py) and never differ from the record Redis holds at the time of
the call: byte for byte what encoding the messages would give."""

from __future__ import annotations

from typing import Any, cast

import grpc
import redis

from docparse.local.stack import LocalStack
from docparse.proto_wire import length_delimited, varint
from docparse.v1 import parser_service_pb2, parser_service_pb2_grpc
from parser_svc.api.service import ParserService, parser_service_handlers
from parser_svc.api.status_answers import EncodedJobs
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
    answers = EncodedJobs(capacity=8)
    first = _record("a", 3)
    assert answers.status("a", first) == _encoded(first)
    assert answers.status("a", dict(first)) is answers.status("a", first)  # equal: reused
    assert answers.job("a", first) == record_to_job(decode_hash(first)).SerializeToString()
    # A field changed without a new version (no writer of ours does that) is still seen.
    moved = _record("a", 3, done="2")
    assert answers.status("a", moved) == _encoded(moved) != _encoded(first)
    assert answers.job("a", moved) == record_to_job(decode_hash(moved)).SerializeToString()
    for n in range(20):
        record = _record(f"job{n}", n)
        assert answers.status(f"job{n}", record) == _encoded(record)
        assert len(answers) <= 8
    assert len(answers) == 8
    assert answers.status("a", moved) == _encoded(moved)  # evicted long ago: made again


def test_fields_put_together_are_what_protobuf_encodes() -> None:
    """Lengths across the varint boundaries (127/128, 16383/16384)."""
    for size in (1, 127, 128, 300, 16_383, 16_384, 70_000):
        token = "t" * size
        expected = parser_service_pb2.ListJobsResponse(next_page_token=token).SerializeToString()
        assert length_delimited(2, token.encode()) == expected
    assert varint(0) == b"\x00" and varint(300) == b"\xac\x02"


class _Recorder:
    """Takes the place of a server in the generated registration, to compare its handlers."""

    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, name: str, handlers: dict[str, Any]) -> None:
        self.handlers = handlers


def test_the_handlers_are_the_generated_ones_but_two_answer_bytes() -> None:
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
        if name in ("GetStatus", "ListJobs"):
            assert handler.response_serializer is None
            encoded = "get_status_encoded" if name == "GetStatus" else "list_jobs_encoded"
            assert handler.unary_unary == getattr(service, encoded)
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


def test_list_jobs_answers_the_records_redis_holds_at_each_call(big_stack: LocalStack) -> None:
    """Through a replica, as a tenant's UI lists: the page is byte for byte the records read
    from Redis (newest first), listed twice (the second from the kept encodings), again after a
    record is changed behind the service's back, and with a next_page_token when cut short."""
    address = big_stack.parser_addresses[0]
    jobs = [submit(address, make_pdf(1), f"listed{i}.pdf").job_id for i in range(3)]
    for job_id in jobs:
        wait_terminal(address, job_id)
    keys = Keys("test")
    with redis.Redis.from_url(big_stack.redis_url) as admin:
        channel, s = stub(big_stack.parser_addresses[1])
        with channel:

            def expected(listed: list[str]) -> list[bytes]:
                records = [admin.hgetall(keys.job(job_id)) for job_id in listed]
                return [record_to_job(decode_hash(r)).SerializeToString() for r in records]

            for _ in range(2):
                page = s.ListJobs(parser_service_pb2.ListJobsRequest(page_size=500), timeout=10)
                listed = [job.job_id for job in page.jobs]
                assert set(jobs) <= set(listed)
                assert [job.SerializeToString() for job in page.jobs] == expected(listed)
            admin.hset(keys.job(jobs[1]), "file_name", "renamed.pdf")
            page = s.ListJobs(parser_service_pb2.ListJobsRequest(page_size=500), timeout=10)
            assert {j.job_id: j.file_name for j in page.jobs}[jobs[1]] == "renamed.pdf"
            short = s.ListJobs(parser_service_pb2.ListJobsRequest(page_size=2), timeout=10)
            assert len(short.jobs) == 2 and short.next_page_token
            rest = s.ListJobs(
                parser_service_pb2.ListJobsRequest(page_size=500, page_token=short.next_page_token),
                timeout=10,
            )
            walked = [j.job_id for j in [*short.jobs, *rest.jobs]]
            assert walked[: len(page.jobs)] == [j.job_id for j in page.jobs]
