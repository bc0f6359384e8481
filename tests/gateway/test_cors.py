"""CORS off (the default): a browser's preflight for a path the API has is refused 403
PERMISSION_DENIED `CORS_NOT_ALLOWED`, as the README says, whatever the origin or the method
asked; an OPTIONS that is no preflight stays 405 and an unknown path 404. (CORS on for one
origin: tests/gateway/test_assets_http.py.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from docparse.local.stack import LocalStack
from tests.conftest import make_stack
from tests.gateway.test_http import request

JOB = "0" * 32


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(tmp_path_factory.mktemp("cors"), replicas=1, gateways=1) as running:
        yield running


def test_a_preflight_with_cors_off_is_refused_as_documented(stack: LocalStack) -> None:
    address = stack.http_addresses[0]
    for path, method in [
        ("/v1/jobs", "POST"),
        ("/v1/jobs", "GET"),
        (f"/v1/jobs/{JOB}", "GET"),
        (f"/v1/jobs/{JOB}", "DELETE"),  # a method the path does not take: the same answer
        (f"/v1/jobs/{JOB}/events", "GET"),
    ]:
        for origin in ("https://app.example.com", "null"):
            asked = {"Origin": origin, "Access-Control-Request-Method": method}
            reply = request(address, "OPTIONS", path, headers=asked)
            body = reply.json()
            assert (reply.status, body["code"], body["reason"]) == (
                403,
                "PERMISSION_DENIED",
                "CORS_NOT_ALLOWED",
            ), (path, method, origin)
            assert "Access-Control-Allow-Origin" not in reply.headers
            assert "CORS is off" in body["message"]


def test_options_that_is_no_preflight_and_unknown_paths_answer_as_before(
    stack: LocalStack,
) -> None:
    address = stack.http_addresses[0]
    plain = request(address, "OPTIONS", "/v1/jobs", headers={"Origin": "https://app.example.com"})
    assert (plain.status, plain.json()["reason"]) == (405, "METHOD_NOT_ALLOWED")
    asked = {"Origin": "https://app.example.com", "Access-Control-Request-Method": "GET"}
    unknown = request(address, "OPTIONS", "/v1/nothing", headers=asked)
    assert (unknown.status, unknown.json()["reason"]) == (404, "NOT_FOUND")
