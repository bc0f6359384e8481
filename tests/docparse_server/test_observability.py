"""Observability against a real stack (3 parser_svc replicas, 1 gateway): every Prometheus
endpoint scraped before and after a run moves exactly as the run implies, and the JSON logs of
all children tell, for one job id, which pid created it and which pid answered each poll."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.logs import JsonFormatter, direct_handler, setup_logging
from tests.conftest import make_stack
from tests.helpers import eventually, make_pdf, served_by, stub, wait_terminal

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    every_call = {"DOCPARSE_ACCESS_LOG": "all", "DOCPARSE_GATEWAY_ACCESS_LOG": "all"}
    s = make_stack(
        tmp_path_factory.mktemp("observability"), replicas=3, gateways=1, extra_env=every_call
    )
    s.start()
    yield s
    s.stop()


def scrape(address: str) -> Samples:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(scrapes: list[Samples], name: str, **labels: str) -> float:
    """Sum of `name` over every scrape and every series whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(
        value
        for samples in scrapes
        for (sample_name, sample_labels), value in samples.items()
        if sample_name == name and wanted <= sample_labels
    )


def _submit(address: str, content: bytes, name: str) -> tuple[job_pb2.Job, list[str]]:
    channel, s = stub(address)
    with channel:
        reply, call = s.SubmitJob.with_call(
            parser_service_pb2.SubmitJobRequest(file_name=name, content=content), timeout=30
        )
    return reply.job, served_by(call)


def _poll(address: str, job_id: str) -> tuple[job_pb2.Job, list[str]]:
    """GetStatus on a brand-new channel: nothing pins it to the replica of the last call."""
    channel, s = stub(address)
    with channel:
        reply, call = s.GetStatus.with_call(
            parser_service_pb2.GetStatusRequest(job_id=job_id), timeout=10
        )
    return reply.job, served_by(call)


def _not_found(address: str, job_id: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _poll(address, job_id)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_metrics_move_as_the_run_implies(stack: LocalStack) -> None:
    gateway = stack.gateway_addresses[0]
    parsers = [child.metrics_address for child in stack.parsers]
    gateways = [child.metrics_address for child in stack.gateways]
    assert all(parsers + gateways)
    before_p, before_g = [scrape(a) for a in parsers], [scrape(a) for a in gateways]

    good = [make_pdf(1, f"metrics run {i}") for i in range(3)]
    bad = [b"%PDF-1.7 x" + bytes([65 + i]) for i in range(2)]  # distinct: no dedupe joining
    jobs = [_submit(gateway, content, f"doc{i}.pdf")[0] for i, content in enumerate(good + bad)]
    final = [wait_terminal(gateway, job.job_id, timeout=60) for job in jobs]
    assert [j.state for j in final] == [job_pb2.STATE_SUCCEEDED] * 3 + [job_pb2.STATE_FAILED] * 2
    assert {j.error.reason for j in final[3:]} == {"CORRUPT_DOCUMENT"}
    for _ in range(3):
        _not_found(gateway, "no-such-job")
    _not_found(stack.parser_addresses[0], "no-such-job")

    def grew(scrapes: tuple[list[Samples], list[Samples]], name: str, **labels: str) -> float:
        return total(scrapes[1], name, **labels) - total(scrapes[0], name, **labels)

    # An aborted call is counted right after its status went out, so the client can see its
    # NOT_FOUND a moment before the counter moves: scrape until the last errors are counted.
    rpc = "docparse_rpc_total"
    deadline = time.monotonic() + 10
    while True:
        after_p, after_g = [scrape(a) for a in parsers], [scrape(a) for a in gateways]
        p, g = (before_p, after_p), (before_g, after_g)
        counted = grew(p, rpc, code="NOT_FOUND") >= 4 and grew(g, rpc, code="NOT_FOUND") >= 3
        if counted or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    # parser_svc: every call the gateway forwarded, counted once over the replicas.
    assert grew(p, rpc, service="parser_svc", method="SubmitJob", code="OK") == 5
    assert grew(p, rpc, service="parser_svc", method="WatchJob", code="OK") == 5
    assert grew(p, rpc, service="parser_svc", method="GetStatus", code="NOT_FOUND") == 4
    errors = "docparse_rpc_errors_total"
    assert grew(p, errors, method="GetStatus", code="NOT_FOUND", reason="JOB_NOT_FOUND") == 4
    assert grew(p, "docparse_rpc_seconds_count", method="SubmitJob") == 5
    assert grew(p, "docparse_jobs_created_total", tenant="default") == 5
    assert grew(p, "docparse_jobs_finished_total", state="SUCCEEDED") == 3
    assert grew(p, "docparse_jobs_finished_total", state="FAILED", reason="CORRUPT_DOCUMENT") == 2
    assert grew(p, "docparse_parse_seconds_count", content_type="pdf") == 5
    assert grew(p, "docparse_redis_errors_total") == 0
    # Every replica exports the queue depth gauge (refreshed on a timer) and its watchers.
    for samples in after_p:
        assert total([samples], "docparse_queue_jobs", state="failed") >= 0
        assert ("docparse_queue_jobs", frozenset({("state", "waiting")})) in samples
    # The gateway: the same calls at the edge; NOT_FOUND was a replica's answer, relayed.
    assert grew(g, rpc, service="gateway", method="SubmitJob", code="OK") == 5
    assert grew(g, rpc, service="gateway", method="WatchJob", code="OK") == 5
    assert grew(g, rpc, service="gateway", method="GetStatus", code="NOT_FOUND") == 3
    assert grew(g, errors, method="GetStatus", code="NOT_FOUND", reason="JOB_NOT_FOUND") == 3
    upstream_errors = "docparse_gateway_upstream_errors_total"
    assert grew(g, upstream_errors, code="NOT_FOUND", origin="replica") == 3
    assert grew(g, "docparse_rpc_seconds_count", service="gateway", method="GetStatus") == 3
    # Parser metrics stay on parser_svc.
    assert total(after_g, "docparse_jobs_created_total") == 0
    # Watch streams end with the terminal record: every watcher gauge returns to zero.
    eventually(
        lambda: all(total([scrape(a)], "docparse_watch_streams") == 0 for a in parsers),
        timeout=10,
        what="watch stream gauges back to 0",
    )


def _log_lines(stack: LocalStack) -> list[dict[str, Any]]:
    lines = []
    for path in sorted((stack.data_dir / "logs").glob("*.log")):
        for raw in path.read_text(errors="replace").splitlines():
            if raw.startswith("{"):
                lines.append(json.loads(raw))
    return lines


def test_by_default_a_successful_poll_has_no_access_line_and_everything_else_has(
    big_stack: LocalStack,
) -> None:
    """DOCPARSE_ACCESS_LOG / DOCPARSE_GATEWAY_ACCESS_LOG unset (`quiet_reads`): the submit and
    a failed GetStatus get their lines, with the reason; successful polls, through the gateway
    or straight to a replica, none (the `all` stack above logs them)."""
    gateway = big_stack.gateway_addresses[0]
    job, _ = _submit(gateway, make_pdf(1, "quiet polls"), "quiet.pdf")
    for address in (gateway, *big_stack.parser_addresses):
        _poll(address, job.job_id)
    missing = uuid.uuid4().hex
    _not_found(gateway, missing)

    def lines() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        rpc = [x for x in _log_lines(big_stack) if x.get("event") == "rpc"]
        return (
            [x for x in rpc if x.get("job_id") == job.job_id],
            [x for x in rpc if x.get("job_id") == missing],
        )

    def logged() -> bool:
        mine, failed = lines()
        submits = {x["service"] for x in mine if x["method"] == "SubmitJob"}
        return submits == {"gateway", "parser_svc"} and len(failed) == 2

    eventually(logged, 10, "the submit's and the failed poll's access lines")
    mine, failed = lines()
    assert [x for x in mine if x["method"] == "GetStatus"] == []
    assert {(x["service"], x["code"], x["reason"]) for x in failed} == {
        ("gateway", "NOT_FOUND", "JOB_NOT_FOUND"),
        ("parser_svc", "NOT_FOUND", "JOB_NOT_FOUND"),
    }
    assert all("peer" not in x for x in failed)  # read only for calls that always get a line
    assert all("peer" in x for x in mine)


def test_logs_tell_which_pid_created_a_job_and_which_answered_each_poll(
    stack: LocalStack,
) -> None:
    gateway = stack.gateway_addresses[0]
    job, submit_trailers = _submit(gateway, make_pdf(2, "who answered"), "who.pdf")
    creator, gateway_identity = submit_trailers[0], submit_trailers[-1]

    targets = [gateway, *stack.parser_addresses]
    polls = []  # (through the gateway?, replica identity, gateway identity or "")
    for i in range(12):
        address = targets[i % len(targets)]
        _, trailers = _poll(address, job.job_id)
        via_gateway = address == gateway
        polls.append((via_gateway, trailers[0], trailers[-1] if via_gateway else ""))
    assert len({replica for _, replica, _ in polls}) == 3  # every replica answered some
    assert wait_terminal(gateway, job.job_id, timeout=60).state == job_pb2.STATE_SUCCEEDED

    def story() -> dict[str, Any] | None:
        mine = [line for line in _log_lines(stack) if line.get("job_id") == job.job_id]

        def who(line: dict[str, Any]) -> str:
            return f"{line['replica']}/{line['pid']}"

        created = [who(x) for x in mine if x.get("event") == "job.created"]
        finished = [x for x in mine if x.get("event") == "job.finished"]
        answered = [
            who(x)
            for x in mine
            if x.get("event") == "rpc" and x["service"] == "parser_svc"
            if x["method"] == "GetStatus" and x["code"] == "OK"
        ]
        at_gateway = [
            (who(x), x.get("upstream"))
            for x in mine
            if x.get("event") == "rpc" and x["service"] == "gateway" and x["method"] == "GetStatus"
        ]
        submitted = [
            (who(x), x.get("upstream"))
            for x in mine
            if x.get("event") == "rpc" and x["service"] == "gateway" and x["method"] == "SubmitJob"
        ]
        if not created or not finished or len(answered) < len(polls):
            return None
        return {
            "created": created,
            "submitted": submitted,
            "finished": finished,
            "answered": answered,
            "at_gateway": at_gateway,
            "lines": mine,
        }

    found = eventually(story, timeout=15, what=f"the log lines of job {job.job_id}")
    # One creation, by the pid whose x-served-by the SubmitJob answer carried.
    assert found["created"] == [creator]
    # The gateway's access line of that SubmitJob names the job and the replica it went to.
    assert found["submitted"] == [(gateway_identity, creator)]
    creator_pid = int(creator.rpartition("/")[2])
    assert creator_pid in {child.pid for child in stack.parsers}
    # Each poll: exactly one parser_svc access line with its job id, from the pid its
    # x-served-by named; through the gateway, the gateway's line names the same replica.
    assert Counter(found["answered"]) == Counter(replica for _, replica, _ in polls)
    assert Counter(found["at_gateway"]) == Counter(
        (gw, replica) for via, replica, gw in polls if via
    )
    assert {gw for gw, _ in found["at_gateway"]} == {gateway_identity}
    # The rest of the job's story is there too: claimed (attempt 1) and finished, on some pid.
    [done] = found["finished"]
    assert done["state"] == "SUCCEEDED" and done["attempt"] == 1 and done["duration_ms"] >= 0
    claimed = [x for x in found["lines"] if x.get("event") == "job.claimed"]
    assert [(x["pid"], x["attempt"]) for x in claimed] == [(done["pid"], 1)]
    for line in found["lines"]:
        assert {"ts", "level", "logger", "msg", "service", "replica", "pid"} <= line.keys()


def test_json_formatter_emits_one_object_with_extras() -> None:
    record = logging.LogRecord("docparse.jobs", logging.INFO, __file__, 1, "job %s", ("j1",), None)
    record.job_id = "j1"
    record.tenant = "acme"
    try:
        raise ValueError("boom")
    except ValueError:
        record.exc_info = sys.exc_info()
    line = JsonFormatter("parser_svc").format(record)
    assert "\n" not in line
    data = json.loads(line)
    assert data["msg"] == "job j1" and data["job_id"] == "j1" and data["tenant"] == "acme"
    assert data["service"] == "parser_svc" and data["level"] == "INFO" and data["pid"] > 0
    assert data["ts"].endswith("Z") and "ValueError: boom" in data["exc"]


def test_stack_children_expose_metrics(tmp_path: Path) -> None:
    """LocalStack keeps its API: metrics ports are extra, given to every child."""
    s = make_stack(tmp_path, replicas=1, gateways=1)
    addresses = [child.metrics_address for child in s.parsers + s.gateways]
    assert len(set(addresses)) == 2 and all(a.startswith("127.0.0.1:") for a in addresses)


def test_each_service_registers_its_own_metrics_only_when_it_serves_them() -> None:
    """Importing the shared module (and both services' metric modules) registers the RPC metrics
    only: parser_svc's and the gateway's are registered by their own server at start, so
    neither exports the other's (or zeros of metrics it never moves)."""
    code = (
        "import docparse_server.observability, parser_svc.observability, gateway.observability\n"
        "from prometheus_client import REGISTRY\n"
        "print(' '.join(sorted(REGISTRY._names_to_collectors)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    ours = {name for name in out if name.startswith("docparse_")}
    assert "docparse_rpc_total" in ours and "docparse_rpc_seconds_count" in ours
    assert {name for name in ours if not name.startswith("docparse_rpc")} == set()


def test_access_lines_without_a_log_record_read_as_with_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The access line is formatted and written without a LogRecord only where nothing but
    setup_logging's JSON handler would see it, and then reads byte for byte as the record's."""
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    saved = logging.root.handlers[:], logging.root.level
    try:
        setup_logging("parser_svc", "json")
        access = logging.getLogger("docparse.access")
        [handler] = logging.root.handlers
        assert direct_handler(access, logging.INFO) is handler
        extra = {"event": "rpc", "method": "GetStatus", "code": "OK", "duration_ms": 1.25,
                 "job_id": "j1", "peer": "ipv4:127.0.0.1:5", "tenant": "acme"}  # fmt: skip
        now = 1_764_806_400_123_456_789
        monkeypatch.setattr(time, "time_ns", lambda: now)
        formatter = handler.formatter
        assert isinstance(formatter, JsonFormatter)
        direct = formatter.format_now(logging.INFO, access.name, "GetStatus OK 1.2 ms", extra)
        record = access.makeRecord(
            access.name, logging.INFO, "", 0, "%s %s %s%.1f ms",
            ("GetStatus", "OK", "", 1.25), None, extra=extra,
        )  # fmt: skip
        record.created, record.msecs = now / 1e9, 123.0
        assert direct == formatter.format(record)
        # Values the common types' short cut does not write itself are the encoder's.
        odd = {"peer": 'ipv6:[::1]:5 "q" \\ \x01 é ☃', "n": float("nan"), "big": 10**30,
               "flag": True, "none": None, "path": Path("/x"), "ratio": 0.1,
               "_hidden": 1}  # fmt: skip
        message = 'Get"Status" ✓'
        record = access.makeRecord(access.name, logging.INFO, "", 0, message, (), None, extra=odd)
        record.created, record.msecs = now / 1e9, 123.0
        assert formatter.format_now(logging.INFO, access.name, message, odd) == formatter.format(
            record
        )
        # Anything else on the way takes the record path: a capture, a filter, a handler.
        capture = logging.Handler()
        logging.root.addHandler(capture)
        assert direct_handler(access, logging.INFO) is None
        logging.root.removeHandler(capture)
        access.addFilter(lambda r: True)
        assert direct_handler(access, logging.INFO) is None
        access.filters.clear()
        access.addHandler(capture)
        assert direct_handler(access, logging.INFO) is None
        access.removeHandler(capture)
        assert direct_handler(access, logging.INFO) is handler
    finally:
        logging.root.handlers[:] = saved[0]
        logging.root.setLevel(saved[1])


def test_a_forked_child_writes_its_own_pid_on_its_access_lines() -> None:
    """The pid on a line comes from a value kept per process (no system call per line): a
    child forked after the parent wrote lines (the zygote's children do) writes its own."""
    formatter = JsonFormatter("parser_svc")
    parent = json.loads(formatter.format_now(logging.INFO, "docparse.access", "m", {}))
    assert parent["pid"] == os.getpid()
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's side
        try:
            line = formatter.format_now(logging.INFO, "docparse.access", "m", {})
            os.write(write_end, line.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        said = json.loads(pipe.read())
    os.waitpid(child, 0)
    assert said["pid"] == child != parent["pid"]


def test_the_access_log_setting_reads_its_old_on_off_values_and_refuses_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pydantic import ValidationError

    from gateway.settings import GatewaySettings
    from parser_svc.settings import Settings

    modes = {"": "quiet_reads", "true": "all", "1": "all", "all": "all", "false": "off",
             "OFF": "off", "quiet_reads": "quiet_reads"}  # fmt: skip
    for value, mode in modes.items():
        for name in ("DOCPARSE_ACCESS_LOG", "DOCPARSE_GATEWAY_ACCESS_LOG"):
            if value:
                monkeypatch.setenv(name, value)
            else:
                monkeypatch.delenv(name, raising=False)
        assert Settings().access_log == mode, value
        assert GatewaySettings().access_log == mode, value
    monkeypatch.setenv("DOCPARSE_ACCESS_LOG", "some")
    with pytest.raises(ValidationError):
        Settings()
