"""One root: every outcome of an SDK call that is not its answer is a DocparseError (a failed
call, JobFailed, WaitTimeout, ContractError), and the outcomes are never retried or rewritten
as failed calls on the way out. The CLI still tells them apart."""

from __future__ import annotations

import io

import grpc
import pytest

from docparse import cli
from docparse.cli import Followed
from docparse.cli_output import EXIT_ERROR, EXIT_TIMEOUT
from docparse.errors import ContractError, DocparseError, JobFailed, WaitTimeout
from docparse.progress import ProgressBoard
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2, parser_service_pb2
from tests.docparse.test_sdk_offline import ScriptedTransport, client, job, submitted, unavailable


def test_a_failed_job_is_caught_as_a_docparse_error() -> None:
    failed = job(3, job_pb2.STATE_FAILED, error=job_pb2.JobError(reason="WRONG_PASSWORD"))
    sdk, _ = client(ScriptedTransport(SubmitJob=[submitted(failed)]))
    with pytest.raises(DocparseError) as caught:
        sdk.parse(b"%PDF-1.7")
    assert isinstance(caught.value, JobFailed)
    assert caught.value.reason == ErrorReason.WRONG_PASSWORD
    assert caught.value.metadata == {"job_id": failed.job_id, "state": "FAILED"}


def test_a_contract_error_after_a_retry_stays_a_contract_error() -> None:
    """The download's first attempt fails UNAVAILABLE (retried); the second sends a chunk at
    the wrong offset: ContractError at once, not a failed call "tried 2 times"."""
    ref = job_pb2.ResultRef(size_bytes=3, sha256="00" * 32)
    skipped = [parser_service_pb2.GetResultResponse(result=ref, chunk=b"abc", offset=7)]
    transport = ScriptedTransport(GetResult=[[unavailable()], skipped])
    sdk, _ = client(transport)
    with pytest.raises(ContractError) as caught:
        sdk.result("j1")
    assert str(caught.value) == "result of j1: chunk at offset 7, expected 0"
    assert "attempts" not in caught.value.metadata
    assert transport.methods() == ["GetResult", "GetResult"]


def test_the_cli_reports_a_timeout_as_a_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    record = job(2, job_pb2.STATE_RUNNING)
    timed_out = Followed(record, WaitTimeout(record.job_id, "RUNNING", 2, 5.0))
    board = ProgressBoard(["a.pdf"], out=io.StringIO(), quiet=True)
    assert cli._report([timed_out], True, board) == EXIT_TIMEOUT
    assert "timeout: job" in capsys.readouterr().err


def test_the_cli_reports_a_contract_error_as_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(args: object) -> int:
        raise ContractError("SubmitJob answered without a usable job")

    monkeypatch.setattr(cli, "_run", broken)
    with pytest.raises(SystemExit) as ended:
        cli.main(["status", "j1"])
    assert ended.value.code == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("error: CONTRACT ContractError: SubmitJob answered"), err
    assert grpc.StatusCode.INTERNAL.name not in err
