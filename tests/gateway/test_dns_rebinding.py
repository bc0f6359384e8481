"""DNS rebinding against a dev-mode gateway (no API keys, `docparse up`): a page of
attacker.example whose name now resolves to 127.0.0.1 sends `Host: attacker.example` and a
matching Origin. It must neither read the developer's jobs nor submit; loopback names, the
listen address and listed names still work. The HTTP side names no server software."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest

from docparse.local.stack import LocalStack
from gateway.http.hosts import AllowedHosts, host_name
from gateway.settings import GatewaySettings
from tests.conftest import make_stack
from tests.helpers import make_pdf


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("rebinding"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_GATEWAY_HTTP_ALLOWED_HOSTS": "docparse.lan"},
    ) as running:
        yield running


def call(
    stack: LocalStack, method: str, path: str, host: str, body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(stack.http_addresses[0], timeout=30)
    try:
        headers = {"Host": host, "Origin": f"http://{host}"}
        if body is not None:
            headers["Content-Type"] = "application/pdf"
        conn.request(method, path, body=body, headers=headers)
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read()
    finally:
        conn.close()


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8080", "10.1.2.3"])
def test_a_rebound_name_reads_and_writes_nothing(stack: LocalStack, host: str) -> None:
    for method, path, body in (
        ("GET", "/v1/jobs", None),
        ("POST", "/v1/jobs?file_name=x.pdf", make_pdf(1)),
        ("GET", "/", None),
    ):
        status, _, raw = call(stack, method, path, host, body)
        assert status == 403, (method, path, raw[:200])
        assert json.loads(raw)["reason"] == "CROSS_SITE_REQUEST"


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "app.localhost", "docparse.lan"])
def test_loopback_and_listed_names_are_served(stack: LocalStack, host: str) -> None:
    port = stack.http_addresses[0].rsplit(":", 1)[1]
    status, headers, raw = call(stack, "GET", "/v1/jobs", f"{host}:{port}")
    assert status == 200, raw[:200]
    assert headers["Server"] == "docparse"


def test_with_api_keys_the_check_is_off_unless_listed() -> None:
    keys = GatewaySettings(auth="required", internal_token="t" * 32)
    assert AllowedHosts(keys, dev_mode=False).allows("parse.example.com")
    listed = GatewaySettings(http_allowed_hosts="parse.example.com", internal_token="t" * 32)
    assert AllowedHosts(listed, dev_mode=False).allows("parse.example.com:443")
    assert not AllowedHosts(listed, dev_mode=False).allows("other.example")
    assert host_name("[::1]:8080") == "::1" and AllowedHosts(listed, dev_mode=True).allows("[::1]")
