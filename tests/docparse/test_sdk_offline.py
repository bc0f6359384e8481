"""The SDK's waiting rules, offline: a scripted Transport stands in for the network (the one
seam the SDK has), so each path runs exactly and instantly. The same paths run against a real
stack in test_sdk_stack.py."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from docparse.aio import AsyncClient
from docparse.client import Client
from docparse.errors import ContractError, DocparseError, JobFailed, WaitTimeout
from docparse.v1 import job_pb2, parser_service_pb2
from docparse.waiting import WaitPolicy

Script = Callable[[Message], Any]


def job(version: int, state: int, **extra: Any) -> job_pb2.Job:
    record = job_pb2.Job(job_id="j1", version=version, state=state, **extra)
    if state == job_pb2.STATE_SUCCEEDED and not record.result.sha256:
        record.result.sha256 = "ab" * 32
    return record


def events(*records: job_pb2.Job) -> list[parser_service_pb2.WatchJobResponse]:
    return [parser_service_pb2.WatchJobResponse(job=r) for r in records]


def unavailable() -> DocparseError:
    return DocparseError(grpc.StatusCode.UNAVAILABLE, "STATE_STORE_UNAVAILABLE", "blip")


class ScriptedTransport:
    """Answers each method from a queue of scripted outcomes and records every call."""

    def __init__(self, **script: list[Any]) -> None:
        self.script = {name: list(items) for name, items in script.items()}
        self.calls: list[tuple[str, Message]] = []
        self.uploaded: list[list[tuple[str | None, int]]] = []

    def _next(self, method: str, request: Message) -> Any:
        self.calls.append((method, request))
        queue = self.script.get(method)
        if not queue:
            raise AssertionError(f"unexpected call {method}")
        return queue.pop(0)

    def call(self, method: str, request: Message, deadline_s: float | None) -> Any:
        outcome = self._next(method, request)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome, ("replica/1",)

    def stream(self, method: str, request: Message, deadline_s: float | None) -> Iterator[Any]:
        for item in self._next(method, request):
            if isinstance(item, Exception):
                raise item
            yield item

    def upload(self, method: str, requests: Any, deadline_s: float | None) -> Any:
        """Reads the stream as grpc would (keeping only each part's kind and size)."""
        outcome = self._next(method, parser_service_pb2.UploadBatchRequest())
        self.uploaded.append([(r.WhichOneof("part"), len(r.chunk)) for r in requests])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome, ("replica/1",)

    def close(self) -> None:
        pass

    def methods(self) -> list[str]:
        return [name for name, _ in self.calls]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.01)


def client(transport: ScriptedTransport, **policy: Any) -> tuple[Client, FakeClock]:
    clock = FakeClock()
    return (
        Client(
            "unused:1",
            transport=transport,
            policy=WaitPolicy(**policy),
            sleep=clock.sleep,
            clock=clock,
        ),
        clock,
    )


def submitted(record: job_pb2.Job) -> parser_service_pb2.SubmitJobResponse:
    return parser_service_pb2.SubmitJobResponse(job=record)


def test_sync_answer_is_used_as_is_with_no_status_call() -> None:
    transport = ScriptedTransport(SubmitJob=[submitted(job(5, job_pb2.STATE_SUCCEEDED))])
    sdk, _ = client(transport)
    assert sdk.parse(b"%PDF-1.7", file_name="a.pdf").version == 5
    assert transport.methods() == ["SubmitJob"]


def test_async_answer_is_waited_for_by_watching() -> None:
    transport = ScriptedTransport(
        SubmitJob=[submitted(job(1, job_pb2.STATE_QUEUED))],
        WatchJob=[events(job(1, job_pb2.STATE_QUEUED), job(2, job_pb2.STATE_RUNNING),
                         job(3, job_pb2.STATE_SUCCEEDED))],
    )  # fmt: skip
    sdk, _ = client(transport)
    assert sdk.parse(b"%PDF-1.7").version == 3
    assert transport.methods() == ["SubmitJob", "WatchJob"]


def test_empty_answer_is_a_contract_error_at_once() -> None:
    for empty in (
        parser_service_pb2.SubmitJobResponse(),
        submitted(job_pb2.Job(job_id="j1")),  # no state
        submitted(job_pb2.Job(job_id="j1", version=3, state=job_pb2.STATE_SUCCEEDED)),  # no result
    ):
        transport = ScriptedTransport(SubmitJob=[empty])
        sdk, _ = client(transport)
        with pytest.raises(ContractError):
            sdk.parse(b"%PDF-1.7")
        assert transport.methods() == ["SubmitJob"]


def test_broken_stream_resumes_after_the_last_version_and_never_resubmits() -> None:
    transport = ScriptedTransport(
        SubmitJob=[submitted(job(1, job_pb2.STATE_QUEUED))],
        WatchJob=[
            [*events(job(2, job_pb2.STATE_RUNNING)), unavailable()],
            events(job(3, job_pb2.STATE_RUNNING), job(4, job_pb2.STATE_SUCCEEDED)),
        ],
    )
    sdk, _ = client(transport)
    assert sdk.parse(b"%PDF-1.7").version == 4
    assert transport.methods() == ["SubmitJob", "WatchJob", "WatchJob"]
    resumed = transport.calls[2][1]
    assert isinstance(resumed, parser_service_pb2.WatchJobRequest)
    assert resumed.after_version == 2


def test_a_stream_cut_after_the_terminal_record_ends_the_wait_with_no_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The terminal record ends the wait there: a cut that follows it on the same stream (a
    server ending its connections) is not read, so it is no retry, no log and no second call."""
    transport = ScriptedTransport(
        SubmitJob=[submitted(job(1, job_pb2.STATE_QUEUED))],
        WatchJob=[[*events(job(2, job_pb2.STATE_RUNNING), job(3, job_pb2.STATE_SUCCEEDED)),
                   unavailable()]],
    )  # fmt: skip
    sdk, _ = client(transport)
    with caplog.at_level(logging.INFO, logger="docparse"):
        assert sdk.parse(b"%PDF-1.7").version == 3
    assert transport.methods() == ["SubmitJob", "WatchJob"]
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


def test_a_stream_the_server_side_cancelled_is_resumed() -> None:
    """A watch ended with CANCELLED (a proxy or replica stopping cancels its calls) is a cut
    stream: the wait resumes after the last version (a CANCELLED unary read stays final)."""
    cancelled = DocparseError(grpc.StatusCode.CANCELLED, "", "Cancelled")
    transport = ScriptedTransport(
        SubmitJob=[submitted(job(1, job_pb2.STATE_QUEUED))],
        WatchJob=[
            [*events(job(2, job_pb2.STATE_RUNNING)), cancelled],
            events(job(3, job_pb2.STATE_SUCCEEDED)),
        ],
    )
    sdk, _ = client(transport)
    assert sdk.parse(b"%PDF-1.7").version == 3
    assert transport.methods() == ["SubmitJob", "WatchJob", "WatchJob"]
    assert transport.calls[2][1].after_version == 2


def test_timeout_carries_the_job_id_and_the_last_state() -> None:
    running = job(2, job_pb2.STATE_RUNNING)
    transport = ScriptedTransport(
        SubmitJob=[submitted(job(1, job_pb2.STATE_QUEUED))],
        WatchJob=[events(running)] + [[unavailable()] for _ in range(100)],
        GetStatus=[parser_service_pb2.GetStatusResponse(job=running) for _ in range(100)],
    )
    sdk, clock = client(transport, timeout_s=10, poll_interval_s=1)
    with pytest.raises(WaitTimeout) as timeout:
        sdk.parse(b"%PDF-1.7")
    assert (timeout.value.job_id, timeout.value.last_state) == ("j1", "RUNNING")
    assert timeout.value.last_version == 2
    assert 10 <= clock.now < 12
    assert transport.methods().count("SubmitJob") == 1


def test_failed_job_raises_with_its_reason() -> None:
    failed = job(3, job_pb2.STATE_FAILED, error=job_pb2.JobError(reason="CORRUPT_DOCUMENT"))
    transport = ScriptedTransport(SubmitJob=[submitted(failed)])
    sdk, _ = client(transport)
    with pytest.raises(JobFailed) as err:
        sdk.parse(b"%PDF-1.7")
    assert (err.value.reason, err.value.state) == ("CORRUPT_DOCUMENT", "FAILED")


def test_not_found_is_final_and_says_whether_the_job_expired() -> None:
    expired = DocparseError(grpc.StatusCode.NOT_FOUND, "JOB_EXPIRED", "gone")
    transport = ScriptedTransport(WatchJob=[[expired]])
    sdk, _ = client(transport)
    with pytest.raises(DocparseError) as err:
        sdk.wait("j1")
    assert err.value.expired
    assert transport.methods() == ["WatchJob"]


def test_unavailable_submit_is_retried_with_the_same_request_id() -> None:
    transport = ScriptedTransport(
        SubmitJob=[unavailable(), unavailable(), submitted(job(1, job_pb2.STATE_SUCCEEDED))]
    )
    sdk, _ = client(transport)
    sdk.parse(b"%PDF-1.7")
    ids = {request.request_id for _, request in transport.calls}  # type: ignore[attr-defined]
    assert len(ids) == 1 and "" not in ids


def test_invalid_submit_is_not_retried() -> None:
    bad = DocparseError(grpc.StatusCode.INVALID_ARGUMENT, "UNSUPPORTED_FORMAT", "no")
    transport = ScriptedTransport(SubmitJob=[bad])
    sdk, _ = client(transport)
    with pytest.raises(DocparseError):
        sdk.parse(b"hello")
    assert transport.methods() == ["SubmitJob"]


def test_server_without_streaming_is_polled() -> None:
    unimplemented = DocparseError(grpc.StatusCode.UNIMPLEMENTED, "", "no streams here")
    transport = ScriptedTransport(
        WatchJob=[[unimplemented]],
        GetStatus=[
            parser_service_pb2.GetStatusResponse(job=job(2, job_pb2.STATE_RUNNING)),
            parser_service_pb2.GetStatusResponse(job=job(3, job_pb2.STATE_SUCCEEDED)),
        ],
    )
    sdk, _ = client(transport)
    assert sdk.wait("j1").version == 3
    assert transport.methods() == ["WatchJob", "GetStatus", "GetStatus"]


def test_result_checksum_mismatch_is_data_loss(tmp_path: Path) -> None:
    ref = job_pb2.ResultRef(size_bytes=3, sha256="00" * 32)
    chunks = [parser_service_pb2.GetResultResponse(result=ref, chunk=b"abc", offset=0)]
    transport = ScriptedTransport(GetResult=[chunks])
    sdk, _ = client(transport)
    with pytest.raises(DocparseError) as err:
        sdk.download_result("j1", tmp_path / "out.pb")
    assert (err.value.code, err.value.reason) == (grpc.StatusCode.DATA_LOSS, "CHECKSUM_MISMATCH")
    assert not (tmp_path / "out.pb").exists()


class AsyncScriptedTransport(ScriptedTransport):
    async def call(self, method: str, request: Message, deadline_s: float | None) -> Any:  # type: ignore[override]
        return ScriptedTransport.call(self, method, request, deadline_s)

    async def stream(  # type: ignore[override]
        self, method: str, request: Message, deadline_s: float | None
    ) -> AsyncIterator[Any]:
        for item in ScriptedTransport.stream(self, method, request, deadline_s):
            yield item

    async def close(self) -> None:  # type: ignore[override]
        pass


def test_async_client_takes_the_same_paths() -> None:
    async def run() -> None:
        sync_answer = AsyncScriptedTransport(SubmitJob=[submitted(job(5, job_pb2.STATE_SUCCEEDED))])
        assert (await AsyncClient("x:1", transport=sync_answer).parse(b"%PDF")).version == 5
        assert sync_answer.methods() == ["SubmitJob"]

        broken = AsyncScriptedTransport(
            SubmitJob=[submitted(job(1, job_pb2.STATE_QUEUED))],
            WatchJob=[
                [*events(job(2, job_pb2.STATE_RUNNING)), unavailable()],
                events(job(3, job_pb2.STATE_SUCCEEDED)),
            ],
        )
        fast = WaitPolicy(backoff_s=0.001)
        sdk = AsyncClient("x:1", transport=broken, policy=fast)
        assert (await sdk.parse(b"%PDF")).version == 3
        assert broken.methods() == ["SubmitJob", "WatchJob", "WatchJob"]

        empty = AsyncScriptedTransport(SubmitJob=[parser_service_pb2.SubmitJobResponse()])
        with pytest.raises(ContractError):
            await AsyncClient("x:1", transport=empty).parse(b"%PDF")

    asyncio.run(run())


def test_watch_of_a_job_that_ended_at_the_cursor_reads_its_status_and_stops() -> None:
    done = job(5, job_pb2.STATE_SUCCEEDED)
    transport = ScriptedTransport(
        WatchJob=[[]],  # the stream ends OK at once: nothing newer than version 5
        GetStatus=[parser_service_pb2.GetStatusResponse(job=done)],
    )
    sdk, clock = client(transport)
    assert list(sdk.watch("j1", after_version=5)) == []
    assert transport.methods() == ["WatchJob", "GetStatus"]
    assert clock.now < 1


def test_watch_with_a_cursor_ahead_of_the_job_fails_at_once() -> None:
    ahead = DocparseError(grpc.StatusCode.OUT_OF_RANGE, "AFTER_VERSION_AHEAD", "at 5")
    transport = ScriptedTransport(WatchJob=[[ahead]])
    sdk, _ = client(transport)
    with pytest.raises(DocparseError) as err:
        list(sdk.watch("j1", after_version=100))
    assert err.value.reason == "AFTER_VERSION_AHEAD"
    assert transport.methods() == ["WatchJob"]


def test_streams_that_end_without_news_back_off_and_the_timeout_ends_the_watch() -> None:
    queued = job(1, job_pb2.STATE_QUEUED)
    transport = ScriptedTransport(
        WatchJob=[events(queued)] + [[] for _ in range(100)],
        GetStatus=[parser_service_pb2.GetStatusResponse(job=queued) for _ in range(100)],
    )
    sdk, clock = client(transport, timeout_s=10)
    with pytest.raises(WaitTimeout) as timeout:
        list(sdk.watch("j1"))
    assert (timeout.value.job_id, timeout.value.last_state) == ("j1", "QUEUED")
    assert 10 <= clock.now < 12
    assert transport.methods().count("WatchJob") < 15  # backed off, did not spin


def test_a_service_that_stops_answering_ends_the_wait_with_its_error() -> None:
    gone = DocparseError(grpc.StatusCode.UNAVAILABLE, "TARGET_UNREACHABLE", "refused")
    transport = ScriptedTransport(
        WatchJob=[[*events(job(2, job_pb2.STATE_RUNNING)), gone]] + [[gone] for _ in range(100)],
        GetStatus=[gone for _ in range(100)],
    )
    sdk, clock = client(transport, timeout_s=600, unavailable_budget_s=20)
    with pytest.raises(DocparseError) as err:
        sdk.wait("j1")
    assert err.value.reason == "TARGET_UNREACHABLE"
    assert 20 <= clock.now < 30


def test_batch_watch_ends_when_every_file_ended_or_at_the_timeout() -> None:
    def batch(version: int, completed: int) -> parser_service_pb2.WatchBatchResponse:
        return parser_service_pb2.WatchBatchResponse(
            batch=parser_service_pb2.Batch(batch_id="b1", version=version, total=2,
                                           completed=completed)
        )  # fmt: skip

    transport = ScriptedTransport(WatchBatch=[[batch(2, 0), batch(5, 1), batch(8, 2)]])
    sdk, _ = client(transport)
    assert [b.completed for b in sdk.watch_batch("b1")] == [0, 1, 2]

    stuck = ScriptedTransport(
        WatchBatch=[[batch(2, 0)]] + [[] for _ in range(100)],
        GetBatch=[parser_service_pb2.GetBatchResponse(batch=batch(2, 0).batch)] * 100,
    )
    sdk, clock = client(stuck, timeout_s=5)
    with pytest.raises(WaitTimeout) as timeout:
        list(sdk.watch_batch("b1"))
    assert timeout.value.kind == "batch" and "0/2" in str(timeout.value)
    assert 5 <= clock.now < 7


def test_async_watch_takes_the_same_paths() -> None:
    async def run() -> None:
        done = job(5, job_pb2.STATE_SUCCEEDED)
        ended = AsyncScriptedTransport(
            WatchJob=[[]], GetStatus=[parser_service_pb2.GetStatusResponse(job=done)]
        )
        assert [
            j async for j in AsyncClient("x:1", transport=ended).watch("j1", after_version=5)
        ] == []
        assert ended.methods() == ["WatchJob", "GetStatus"]

        queued = job(1, job_pb2.STATE_QUEUED)
        stuck = AsyncScriptedTransport(
            WatchJob=[events(queued)] + [[] for _ in range(1000)],
            GetStatus=[parser_service_pb2.GetStatusResponse(job=queued)] * 1000,
        )
        sdk = AsyncClient("x:1", transport=stuck, policy=WaitPolicy(timeout_s=0.5, backoff_s=0.01))
        with pytest.raises(WaitTimeout):
            await sdk.wait("j1")

    asyncio.run(run())


# --- the retry table (docparse.retries), pinned for both clients -----------------------------


def err(code: grpc.StatusCode, reason: str = "", **metadata: str) -> DocparseError:
    return DocparseError(code, reason, "scripted", metadata)


SC = grpc.StatusCode
# (error, method, retried?) — SubmitJob and GetStatus are idempotent, CancelJob is not.
RETRY_TABLE = [
    (err(SC.UNAVAILABLE, "TARGET_UNREACHABLE"), "SubmitJob", True),
    (err(SC.UNAVAILABLE, "STATE_STORE_UNAVAILABLE"), "CancelJob", True),
    (err(SC.DEADLINE_EXCEEDED), "SubmitJob", True),
    (err(SC.DEADLINE_EXCEEDED), "GetStatus", True),
    (err(SC.DEADLINE_EXCEEDED), "CancelJob", False),
    (err(SC.ABORTED), "GetStatus", True),
    (err(SC.ABORTED), "CancelJob", False),
    (err(SC.RESOURCE_EXHAUSTED, "RATE_LIMITED", retry_after_s="7"), "SubmitJob", True),
    (err(SC.RESOURCE_EXHAUSTED, "RATE_LIMITED"), "SubmitJob", False),  # no delay named
    (err(SC.RESOURCE_EXHAUSTED, "RATE_LIMITED", retry_after_s="600"), "SubmitJob", False),
    (err(SC.RESOURCE_EXHAUSTED, "DOCUMENT_TOO_LARGE", limit_bytes="10"), "SubmitJob", False),
    (err(SC.RESOURCE_EXHAUSTED, "DOCUMENT_TOO_LARGE", retry_after_s="1"), "SubmitJob", False),
    (err(SC.RESOURCE_EXHAUSTED, "MESSAGE_TOO_LARGE"), "SubmitJob", False),
    (err(SC.INVALID_ARGUMENT, "UNSUPPORTED_FORMAT"), "SubmitJob", False),
    (err(SC.PERMISSION_DENIED, "CROSS_SITE_REQUEST"), "SubmitJob", False),
    (err(SC.UNAUTHENTICATED, "API_KEY_INVALID"), "SubmitJob", False),
    (err(SC.INTERNAL, "STATE_STORE_ERROR"), "SubmitJob", False),
    (err(SC.INTERNAL), "GetStatus", False),
    (err(SC.CANCELLED), "GetStatus", False),
    (err(SC.NOT_FOUND, "JOB_NOT_FOUND"), "GetStatus", False),
]
TABLE_IDS = [f"{e.code.name}-{e.reason or 'none'}-{e.metadata}-{m}" for e, m, _ in RETRY_TABLE]


def _answer(method: str) -> Message:
    done = job(2, job_pb2.STATE_SUCCEEDED)
    if method == "SubmitJob":
        return submitted(done)
    if method == "GetStatus":
        return parser_service_pb2.GetStatusResponse(job=done)
    return parser_service_pb2.CancelJobResponse(job=done)


def _invoke_sync(sdk: Client, method: str) -> Any:
    if method == "SubmitJob":
        return sdk.submit("a.pdf", b"%PDF-1.7")
    if method == "GetStatus":
        return sdk.status("j1")
    return sdk.cancel("j1")


async def _invoke_async(sdk: AsyncClient, method: str) -> Any:
    if method == "SubmitJob":
        return await sdk.submit("a.pdf", b"%PDF-1.7")
    if method == "GetStatus":
        return await sdk.status("j1")
    return await sdk.cancel("j1")


def _run_both(
    script: dict[str, list[Any]], method: str, **policy: Any
) -> list[tuple[ScriptedTransport, FakeClock, list[float], Any]]:
    """Runs `method` once through the sync and once through the asyncio client, each on its
    own copy of the script: (transport, clock, the sleeps, the outcome: answer or error)."""
    runs = []
    transport = ScriptedTransport(**script)
    sdk, clock = client(transport, **policy)
    sleeps: list[float] = []
    real_sleep = clock.sleep
    sdk._sleep = lambda s: (sleeps.append(s), real_sleep(s))[1]  # type: ignore[func-returns-value]
    try:
        outcome: Any = _invoke_sync(sdk, method)
    except DocparseError as failure:
        outcome = failure
    runs.append((transport, clock, sleeps, outcome))

    atransport = AsyncScriptedTransport(**script)
    aclock = FakeClock()
    asleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        asleeps.append(seconds)
        aclock.sleep(seconds)

    async def run() -> Any:
        asdk = AsyncClient(
            "x:1", transport=atransport, policy=WaitPolicy(**policy), clock=aclock,
            sleep=fake_sleep,
        )  # fmt: skip
        try:
            return await _invoke_async(asdk, method)
        except DocparseError as failure:
            return failure

    runs.append((atransport, aclock, asleeps, asyncio.run(run())))
    return runs


@pytest.mark.parametrize(("error", "method", "retried"), RETRY_TABLE, ids=TABLE_IDS)
def test_retry_table_is_the_same_for_both_clients(
    error: DocparseError, method: str, retried: bool
) -> None:
    for transport, clock, sleeps, outcome in _run_both({method: [error, _answer(method)]}, method):
        if retried:
            assert not isinstance(outcome, DocparseError), outcome
            assert transport.methods() == [method, method]
            if error.retry_after_s is not None:  # after the delay the server named, not before
                assert sleeps == [float(error.retry_after_s)]
            else:
                assert len(sleeps) == 1 and 0 < sleeps[0] <= 0.1
        else:
            assert isinstance(outcome, DocparseError)
            assert (outcome.code, outcome.reason) == (error.code, error.reason)
            assert transport.methods() == [method] and sleeps == [] and clock.now == 0


def test_a_target_that_refuses_connections_fails_within_30_s_saying_what_was_tried() -> None:
    refused = DocparseError(
        SC.UNAVAILABLE, "TARGET_UNREACHABLE", "no docparse server answered at 127.0.0.1:9: "
        "connection refused", {"target": "127.0.0.1:9"},
    )  # fmt: skip
    for transport, clock, sleeps, outcome in _run_both({"SubmitJob": [refused] * 200}, "SubmitJob"):
        assert isinstance(outcome, DocparseError) and outcome.reason == "TARGET_UNREACHABLE"
        assert 15 < clock.now <= 30  # the default budget, not the 10 minutes of old
        tries = len(transport.calls)
        assert f"SubmitJob tried {tries} times over" in outcome.message
        assert "127.0.0.1:9" in outcome.message and outcome.metadata["attempts"] == str(tries)
        assert 8 <= tries <= 20  # backed off (0.1 s doubling up to 5 s), did not spin
        assert all(delay <= 5 for delay in sleeps)


def test_backoff_is_jittered_so_clients_do_not_retry_in_step() -> None:
    delays = []
    for seed in (1, 2):
        transport = ScriptedTransport(SubmitJob=[unavailable()] * 6 + [submitted(job(1, 3))])
        clock = FakeClock()
        slept: list[float] = []
        sdk = Client("x:1", transport=transport, sleep=slept.append, clock=clock,
                     rng=random.Random(seed))  # fmt: skip
        sdk.submit("a.pdf", b"%PDF")
        delays.append(slept)
    assert delays[0] != delays[1]
    for slept in delays:  # each delay within [half, all] of its doubling ceiling
        ceilings = [min(0.1 * 2**i, 5.0) for i in range(6)]
        assert all(c / 2 <= d <= c for d, c in zip(slept, ceilings, strict=True))


def test_each_retry_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    limited = err(SC.RESOURCE_EXHAUSTED, "RATE_LIMITED", retry_after_s="3")
    transport = ScriptedTransport(SubmitJob=[unavailable(), limited, submitted(job(1, 3))])
    sdk, _ = client(transport)
    with caplog.at_level(logging.INFO, logger="docparse.client"):
        sdk.submit("a.pdf", b"%PDF")
    lines = [r.getMessage() for r in caplog.records if r.name == "docparse.client"]
    assert len(lines) == 2
    assert "retrying SubmitJob" in lines[0] and "UNAVAILABLE STATE_STORE_UNAVAILABLE" in lines[0]
    assert "retrying SubmitJob in 3.0 s after RESOURCE_EXHAUSTED RATE_LIMITED" in lines[1]


def test_waits_follow_the_table_too() -> None:
    """A watch that meets INTERNAL or DOCUMENT_TOO_LARGE-like errors stops at once; a rate
    limit with a delay is waited out; UNAVAILABLE is ridden out."""
    internal = err(SC.INTERNAL, "STATE_STORE_ERROR")
    transport = ScriptedTransport(WatchJob=[[internal]])
    sdk, clock = client(transport)
    with pytest.raises(DocparseError) as failure:
        sdk.wait("j1")
    assert failure.value.reason == "STATE_STORE_ERROR" and transport.methods() == ["WatchJob"]

    limited = err(SC.RESOURCE_EXHAUSTED, "RATE_LIMITED", retry_after_s="4")
    transport = ScriptedTransport(
        WatchJob=[[limited], [unavailable()], events(job(3, job_pb2.STATE_SUCCEEDED))]
    )
    sdk, clock = client(transport)
    assert sdk.wait("j1").version == 3
    assert transport.methods() == ["WatchJob"] * 3 and 4 <= clock.now < 5


def test_upload_batch_streams_files_in_chunks_and_retries_from_the_start(tmp_path: Path) -> None:
    big, small = tmp_path / "big.pdf", tmp_path / "small.pdf"
    big.write_bytes(b"%PDF" + b"x" * (2 * 1024 * 1024 + 10))
    small.write_bytes(b"%PDF-1.7 small")
    answer = parser_service_pb2.UploadBatchResponse(batch=parser_service_pb2.Batch(batch_id="b"))
    transport = ScriptedTransport(UploadBatch=[unavailable(), answer])
    sdk, _ = client(transport)
    assert sdk.upload_batch([big, ("renamed.pdf", small)]).batch_id == "b"
    chunk = 1024 * 1024
    expected = [("header", 0), ("file", 0), ("chunk", chunk), ("chunk", chunk), ("chunk", 14),
                ("file", 0), ("chunk", 14)]  # fmt: skip
    assert transport.uploaded == [expected, expected]  # the retry sent it all again


def test_an_upload_status_lost_in_transport_is_asked_again_at_most_twice(tmp_path: Path) -> None:
    """A bare INTERNAL (no ErrorInfo) ending an UploadBatch is gRPC losing the replica's
    refusal; the upload (same request_id) is repeated to learn it, twice at most. An INTERNAL
    a server sent with a reason is final, as everywhere."""
    doc = tmp_path / "a.pdf"
    doc.write_bytes(b"%PDF-1.7")
    bare = err(SC.INTERNAL)
    too_large = err(SC.RESOURCE_EXHAUSTED, "DOCUMENT_TOO_LARGE")
    transport = ScriptedTransport(UploadBatch=[bare, too_large])
    sdk, _ = client(transport)
    with pytest.raises(DocparseError) as failure:
        sdk.upload_batch([doc])
    assert failure.value.reason == "DOCUMENT_TOO_LARGE" and len(transport.uploaded) == 2

    transport = ScriptedTransport(UploadBatch=[bare, bare, bare, too_large])
    sdk, _ = client(transport)
    with pytest.raises(DocparseError) as failure:
        sdk.upload_batch([doc])
    assert failure.value.code == SC.INTERNAL and len(transport.uploaded) == 3

    transport = ScriptedTransport(UploadBatch=[err(SC.INTERNAL, "STATE_STORE_ERROR")])
    sdk, _ = client(transport)
    with pytest.raises(DocparseError):
        sdk.upload_batch([doc])
    assert len(transport.uploaded) == 1


def test_stream_pages_counts_its_retry_budget_anew_after_each_delivering_stream() -> None:
    """A long job's page stream cut twelve times (a replica's max connection age), each time
    after a page: every page arrives, though the cuts together outlast the budget."""
    page = parser_service_pb2.StreamResultResponse
    cuts = [[page(page_number=n, cursor=f"d{n}"), unavailable()] for n in range(1, 13)]
    last = [page(cursor="f12", job=job(9, job_pb2.STATE_SUCCEEDED))]
    transport = ScriptedTransport(StreamResult=[*cuts, last])
    sdk, clock = client(transport, unavailable_budget_s=1.0, backoff_s=0.2, max_backoff_s=0.2)
    messages = list(sdk.stream_pages("j1"))
    assert [m.page_number for m in messages[:-1]] == list(range(1, 13))
    assert messages[-1].job.state == job_pb2.STATE_SUCCEEDED
    assert clock.now > 1.0  # more than one budget spent in all
    resumed = [r.cursor for m, r in transport.calls if m == "StreamResult"]
    assert resumed == ["", *(f"d{n}" for n in range(1, 13))]


def test_stream_pages_hands_pages_sent_several_a_message_out_one_each() -> None:
    """Pages the server sends several a message come out one a message with their own
    cursors, and a cut resumes after the last page handed out."""
    page = parser_service_pb2.StreamResultResponse

    def several(*numbers: int) -> parser_service_pb2.StreamResultResponse:
        pages = [
            parser_service_pb2.StreamedPage(page_number=n, page_part=bytes([n]), cursor=f"d{n}")
            for n in numbers
        ]
        return page(pages=pages, cursor=pages[-1].cursor)

    end = page(cursor="d4", job=job(9, job_pb2.STATE_SUCCEEDED))
    transport = ScriptedTransport(
        StreamResult=[[several(1, 2, 3), unavailable()], [several(4), end]]
    )
    sdk, _ = client(transport)
    messages = list(sdk.stream_pages("j1"))
    assert [(m.page_number, m.page_part, m.cursor, len(m.pages)) for m in messages[:-1]] == [
        (n, bytes([n]), f"d{n}", 0) for n in range(1, 5)
    ]
    assert messages[-1] == end
    requests = [r for m, r in transport.calls if m == "StreamResult"]
    assert [(r.cursor, r.pages_per_message) for r in requests] == [("", 16), ("d3", 16)]


def test_stream_pages_ends_at_the_terminal_record_even_if_the_stream_is_cut_after_it() -> None:
    """A cut between the last message (the terminal record) and the stream's end would resume
    after it and hand the terminal record out twice: the stream ends at that record instead."""
    page = parser_service_pb2.StreamResultResponse
    terminal = page(cursor="f1", job=job(5, job_pb2.STATE_SUCCEEDED))
    transport = ScriptedTransport(
        StreamResult=[[page(page_number=1, cursor="f1"), terminal, unavailable()], [terminal]]
    )
    sdk, _ = client(transport)
    messages = list(sdk.stream_pages("j1"))
    assert [m.HasField("job") for m in messages] == [False, True]
    assert transport.methods() == ["StreamResult"]
