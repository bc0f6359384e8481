"""The HTTP API's OpenAPI 3.1 document (gateway/http/openapi.py): it validates, the committed
copy (docs/openapi.json) is the one the gateway serves, every route of the aiohttp app is in
it and every documented operation is a route (drift either way fails), and schemathesis
against a live gateway with API keys finds no 5xx and no answer the document does not allow:
generated requests for every operation, then each operation with ids of a real job, batch
and asset (the 200s and their bodies). DOCPARSE_OPENAPI_EXAMPLES sets the generated requests
per operation (default 25: about 350 in all)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from openapi_spec_validator import validate
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, reading_package_pb2
from docparse_server.tenancy import key_digest
from gateway.auth import GatewayAuth
from gateway.http import build_app
from gateway.http.openapi import build_document, document_text
from gateway.settings import GatewaySettings
from tests import fixtures
from tests.conftest import auth_env, make_stack
from tests.gateway.test_http import multipart, request
from tests.helpers import stub

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "internal-secret-for-openapi-tests"
KEY = "key-of-openapi"
# An admin key: GET /v1/admin/tenants answers it (and its documented 200) too.
KEYS = {"keys": [{"sha256": key_digest(KEY), "tenant": "openapi", "admin": True}]}
METADATA = (("x-api-key", KEY),)
EXAMPLES = int(os.environ.get("DOCPARSE_OPENAPI_EXAMPLES", "25"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


def test_the_document_is_valid_and_committed() -> None:
    validate(build_document())  # OpenAPI 3.1, with its JSON Schema dialect
    committed = (ROOT / "docs" / "openapi.json").read_text()
    assert committed == document_text(), (
        "docs/openapi.json is stale: .venv/bin/python -m gateway.http.openapi > docs/openapi.json"
    )


def _routes() -> set[tuple[str, str]]:
    """(method, path) of every route of the gateway's HTTP app, in OpenAPI's path syntax."""
    return asyncio.run(_app_routes())  # a grpc.aio channel needs a running loop


async def _app_routes() -> set[tuple[str, str]]:
    channel = grpc.aio.insecure_channel("127.0.0.1:9")  # never called
    settings = GatewaySettings(auth="disabled")
    app = build_app(channel, settings, GatewayAuth(settings))
    await channel.close()
    routes = set()
    for route in app.router.routes():
        if route.method == "HEAD":  # aiohttp adds one per GET
            continue
        path = re.sub(r"\{(\w+):[^}]*\}\}?", r"{\1}", route.resource.canonical)  # type: ignore[union-attr]
        routes.add((route.method.lower(), path))
    return routes


def test_every_route_is_documented_and_every_operation_is_a_route() -> None:
    documented = {
        (method, path)
        for path, operations in build_document()["paths"].items()
        for method in operations
    }
    routes = _routes()
    assert routes - documented == set(), "routes the document does not describe"
    assert documented - routes == set(), "documented operations that are no route"


def test_every_query_parameter_the_routes_read_is_documented() -> None:
    """The URL parameters the handlers read (`query.get("x")`, `query.getall("x")`, and the
    names of `for k in (...)` lookups) are parameters of some operation, or the access_token
    security scheme."""
    read: set[str] = set()
    for path in sorted((ROOT / "gateway" / "http").glob("*.py")):
        source = path.read_text()
        read |= set(re.findall(r'query\.get(?:all)?\(\s*"([a-z_]+)"', source))
        read |= set(re.findall(r'"([a-z_]+)" in request\.query', source))
        for names in re.findall(r"for k in \(([^)]*)\)", source):
            read |= set(re.findall(r'"([a-z_]+)"', names))
    documented = {"access_token"} | {
        parameter["name"]
        for operations in build_document()["paths"].values()
        for operation in operations.values()
        for parameter in operation.get("parameters", [])
        if parameter["in"] == "query"
    }
    assert read, "found no query parameter reads: the pattern needs updating"
    assert read - documented == set(), "query parameters the document does not describe"


# ------------------------------------------------------------------------- live gateway


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("openapi"), replicas=1, gateways=1, extra_env=auth_env(KEYS, TOKEN)
    ) as running:
        yield running


@pytest.fixture(scope="module")
def known(stack: LocalStack) -> dict[str, str]:
    """Ids of a SUCCEEDED job with an image, its first asset, and a batch."""
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        job = s.SubmitJob(
            parser_service_pb2.SubmitJobRequest(
                file_name="t.pdf",
                content=fixtures.pdf_with_table_and_image(),
                wait_timeout_ms=60_000,
            ),
            metadata=METADATA,
            timeout=90,
        ).job
        assert job.state == job_pb2.STATE_SUCCEEDED, job
        data = b"".join(
            m.chunk
            for m in s.GetResult(
                parser_service_pb2.GetResultRequest(job_id=job.job_id), metadata=METADATA
            )
        )
        batch = s.CreateBatch(
            parser_service_pb2.CreateBatchRequest(
                files=[
                    parser_service_pb2.BatchFile(
                        file_name="m.pdf", content=fixtures.pdf_with_table_and_image()
                    )
                ]
            ),
            metadata=METADATA,
            timeout=30,
        ).batch
    package = reading_package_pb2.ReadingPackage.FromString(data)
    return {
        "job_id": job.job_id,
        "asset_id": package.assets[0].asset_id,
        "batch_id": batch.batch_id,
    }


def _schema(stack: LocalStack) -> Any:
    served = request(stack.http_addresses[0], "GET", "/openapi.json")
    assert served.status == 200
    document = json.loads(served.body)
    assert document == build_document()
    return schemathesis.openapi.from_dict(document)


def _operations(schema: Any) -> list[Any]:
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(_routes())
    return operations


def _without_callbacks(case: Any) -> Any:
    """No generated webhook URL: the replica resolves a callback's host at submit, and a test
    makes no DNS lookups of made-up names (tests/parser_svc/webhooks/test_webhooks.py covers
    callbacks)."""
    for values in (case.query, case.body):
        if isinstance(values, dict):
            values.pop("callback_url", None)
            values.pop("callback_secret", None)
    return case


def _fuzz(operation: Any, base_url: str, calls: dict[str, int]) -> None:
    """EXAMPLES generated requests for `operation`, each answer checked."""

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy().map(_without_callbacks))
    def run(case: Any) -> None:
        case.call_and_validate(
            base_url=base_url, headers={"X-Api-Key": KEY}, checks=CHECKS, timeout=30
        )
        calls[operation.label] = calls.get(operation.label, 0) + 1

    run()


def test_generated_requests_get_no_5xx_and_conforming_answers(stack: LocalStack) -> None:
    base_url = f"http://{stack.http_addresses[0]}"
    calls: dict[str, int] = {}
    for operation in _operations(_schema(stack)):
        _fuzz(operation, base_url, calls)
    print(f"\nschemathesis: {sum(calls.values())} requests over {len(calls)} operations")
    assert len(calls) == len(_routes()) and sum(calls.values()) >= 200


def test_real_ids_get_documented_200s(stack: LocalStack, known: dict[str, str]) -> None:
    """Each operation once with the ids of real things: what a client really gets back (the
    job, the package in every format, the asset, the listing, the ended event streams)."""
    base_url = f"http://{stack.http_addresses[0]}"
    schema = _schema(stack)
    statuses = {}
    for operation in _operations(schema):
        if operation.method.upper() == "POST":
            continue  # the generated run posts; here only reads
        names = {p.name for p in operation.path_parameters}
        path_parameters = {name: known[name] for name in names if name in known}
        if "name" in names:
            path_parameters["name"] = "app.js"
        queries: list[dict[str, str]] = [{}]
        if operation.path.endswith("/result"):
            formats = ("json", "text", "markdown", "html", "chunks", "proto")
            queries = [{"format": f} for f in formats] + [{"format": "html", "furniture": "true"}]
        for query in queries:
            case = operation.Case(path_parameters=path_parameters, query=query)
            response = case.call_and_validate(
                base_url=base_url, headers={"X-Api-Key": KEY}, checks=CHECKS, timeout=60
            )
            statuses[f"{operation.label} {query}"] = response.status_code
    assert all(status == 200 for status in statuses.values()), statuses


def test_found_by_schemathesis_an_empty_file_in_a_batch_is_400(stack: LocalStack) -> None:
    """The replica refuses an empty file when the next file's header arrives, so a gateway
    still writing that file lost the race: 500 (a write to a finished call) or the reason lost
    (INTERNAL). The gateway now refuses the empty file itself, and answers a write that meets
    a finished call with the replica's status."""
    address = stack.http_addresses[0]
    files = [("empty.pdf", b""), ("next.pdf", fixtures.pdf_with_table_and_image())]
    body, headers = multipart(files)
    for _ in range(10):
        reply = request(address, "POST", "/v1/batches", body, {"X-Api-Key": KEY, **headers})
        assert reply.status == 400, reply.body
        assert reply.json()["reason"] == "EMPTY_CONTENT"
        assert reply.json()["metadata"]["file_index"] == "0"
