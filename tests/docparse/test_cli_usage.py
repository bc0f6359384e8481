"""What the `docparse` command line refuses before it calls anything (usage errors: exit 2 with
the expected form), `--version`, and the lines `docparse up` prints about what is on. No
server: a malformed target is refused while the arguments are read, before a client exists."""

from __future__ import annotations

import pytest

from docparse import __version__
from docparse.cli_parser import parse_args
from docparse.local.features import feature_lines
from docparse.v1 import job_pb2


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as ended:
        parse_args(argv)
    assert ended.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "target",
    ["http://127.0.0.1:50050", "https://gw.example.com:443", "127.0.0.1", "localhost",
     "grpc://h:1", "h:0", "h:65536", "h:port", "::1:50050", ":50050", "h:50050/v1"],
)  # fmt: skip
def test_a_malformed_target_is_a_usage_error_naming_the_form(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(["status", "abc", "--target", target], capsys)
    assert "host:port" in err and repr(target) in err
    if "://" in target:
        assert "without a scheme" in err


def test_a_malformed_docparse_target_is_refused_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCPARSE_TARGET", "http://127.0.0.1:50050")
    assert "DOCPARSE_TARGET" in refused(["list"], capsys)


@pytest.mark.parametrize(
    "target",
    ["127.0.0.1:50050", "localhost:1", "gw.example.com:443", "[::1]:50050",
     "dns:///gw.example.com:443", "unix:/tmp/docparse.sock"],
)  # fmt: skip
def test_well_formed_targets_pass(target: str) -> None:
    assert parse_args(["status", "abc", "--target", target]).target == target


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        parse_args(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out.strip() == f"docparse {__version__}"


def test_result_json_goes_with_json_formats_only(capsys: pytest.CaptureFixture[str]) -> None:
    for fmt in ("markdown", "text", "html", "raw"):
        assert "--format json" in refused(["result", "j", "--json", "--format", fmt], capsys)
    for flags in (["--json"], ["--json", "--format", "json"], ["--json", "--format", "chunks"]):
        assert parse_args(["result", "j", *flags]).json


def test_list_options(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(["list", "--state", "running,QUEUED", "--state", "STATE_FAILED"])
    assert args.state == [job_pb2.STATE_RUNNING, job_pb2.STATE_QUEUED, job_pb2.STATE_FAILED]
    assert (args.limit, args.batch, args.page_token) == (50, "", "")
    assert "one of queued, running" in refused(["list", "--state", "done"], capsys)
    assert "--limit" in refused(["list", "--limit", "-1"], capsys)


def test_submit_callback_options() -> None:
    args = parse_args(["submit", "a.pdf", "--callback", "https://h/x", "--callback-secret", "s"])
    assert (args.callback, args.callback_secret) == ("https://h/x", "s")


def lines(env: dict[str, str], enforced: bool = False) -> dict[str, str]:
    return {
        line.split()[0]: line.split(None, 1)[1]
        for line in feature_lines(env, enforced)[1:]  # after the header
    }


def test_up_says_what_is_on() -> None:
    off = lines({})
    assert all(off[name].startswith("off") for name in ("auth", "webhooks", "tracing", "CORS"))
    assert "CALLBACK_SECRET_UNKNOWN" in off["webhooks"]

    on = lines(
        {
            "DOCPARSE_GATEWAY_API_KEYS_FILE": "/etc/keys.json",
            "DOCPARSE_WEBHOOK_SECRETS_FILE": "/etc/hooks.json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/",
            "DOCPARSE_GATEWAY_HTTP_CORS_ORIGINS": "http://localhost:3000",
        },
        enforced=True,
    )
    assert on["auth"].startswith("on: API keys required (keys file /etc/keys.json)")
    assert on["webhooks"].startswith("on: secrets /etc/hooks.json; receivers at public")
    assert on["tracing"] == "on: spans to http://127.0.0.1:4318/v1/traces (OTLP/HTTP)"
    assert on["CORS"].startswith("on for http://localhost:3000")


def test_up_says_which_tracing_endpoint_wins_and_what_turns_it_off() -> None:
    both = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
        "DOCPARSE_TRACING_ENDPOINT": "http://b/t",
    }
    assert lines(both)["tracing"] == "on: spans to http://b/t (OTLP/HTTP)"
    assert lines({**both, "OTEL_SDK_DISABLED": "true"})["tracing"].startswith("off")
    assert lines({**both, "OTEL_TRACES_EXPORTER": "none"})["tracing"].startswith("off")
    ignored = lines({"DOCPARSE_GATEWAY_API_KEYS": "{}"}, enforced=False)["auth"]
    assert ignored.startswith("off (DOCPARSE_GATEWAY_API_KEYS set but not checked)")
