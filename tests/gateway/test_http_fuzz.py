"""Generated requests against every HTTP route of a real stack: malformed
ids, query parameters, headers and bodies, known ones mixed with noise. Whatever arrives, the
gateway never answers 5xx, every /v1/ error is the JSON error body with a reason, and no
answer echoes a server path or a Python exception. DOCPARSE_FUZZ_EXAMPLES=5000 for a longer
run (the default 600 take about 30 s)."""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.tenancy import key_digest
from tests.gateway.test_hostile_http import keyed_stack
from tests.helpers import make_pdf, stub
from tests.parser_svc.child.test_hostile import finished

TOKEN = "internal-secret-for-fuzz-tests"
KEY = "key-of-fuzz"
KEYS = {"keys": [{"sha256": key_digest(KEY), "tenant": "fuzz", "max_streams": 20}]}
METADATA = (("x-api-key", KEY),)


@dataclass(frozen=True)
class Known:
    job_id: str
    batch_id: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    yield from keyed_stack(tmp_path_factory, "fuzz", KEYS, TOKEN)


@pytest.fixture(scope="module")
def known(stack: LocalStack) -> Known:
    """A SUCCEEDED job and a batch of the fuzzing tenant, so ids that exist get fuzzed too."""
    channel, s = stub(stack.gateway_addresses[0])
    with channel:
        request = parser_service_pb2.SubmitJobRequest(file_name="a.pdf", content=make_pdf(1))
        job = s.SubmitJob(request, metadata=METADATA, timeout=30).job
        files = [parser_service_pb2.BatchFile(file_name="b.pdf", content=make_pdf(1))]
        batch = s.CreateBatch(
            parser_service_pb2.CreateBatchRequest(files=files), metadata=METADATA, timeout=30
        ).batch
    assert finished(stack.gateway_addresses[0], job.job_id, METADATA).state == (
        job_pb2.STATE_SUCCEEDED
    )
    return Known(job.job_id, batch.batch_id)


ROUTES = [
    ("POST", "/v1/jobs"),
    ("GET", "/v1/jobs/{id}"),
    ("GET", "/v1/jobs/{id}/result"),
    ("POST", "/v1/jobs/{id}:cancel"),
    ("GET", "/v1/jobs/{id}/events"),
    ("POST", "/v1/batches"),
    ("GET", "/v1/batches/{id}"),
    ("GET", "/v1/batches/{id}/events"),
    ("GET", "/v1/jobs"),
    ("GET", "/v1/jobs/{id}/assets/{id}"),
    ("GET", "/healthz"),
    ("GET", "/"),
    ("GET", "/static/{id}"),
]
QUERY_NAMES = [
    "format", "after_version", "wait_ms", "file_name", "request_id", "access_token",
    "state", "batch_id", "page_size", "page_token",
]  # fmt: skip
HEADER_NAMES = [
    "Authorization", "X-Api-Key", "Last-Event-ID", "Idempotency-Key", "Content-Type", "Origin",
    "Sec-Fetch-Site", "X-Docparse-Password", "Accept", "If-None-Match", "Range",
]  # fmt: skip
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["", " ", "1e3", "0x1", "\u00b2", "\u0661", "9" * 5000, str(2**64)]),
)
# What an http.client header value can carry (latin-1, no line breaks).
HEADER_TEXT = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"),
    max_size=300,
)
ANY_TEXT = st.one_of(st.text(max_size=200), NUMBERS, st.just("x" * 5000))


def header_value(name: str) -> st.SearchStrategy[str]:
    special: dict[str, st.SearchStrategy[str]] = {
        "Authorization": st.one_of(HEADER_TEXT, st.just(f"Bearer {KEY}"), st.just("Bearer ")),
        "X-Api-Key": st.one_of(st.just(KEY), HEADER_TEXT),
        "Last-Event-ID": st.one_of(NUMBERS.filter(lambda v: len(v) < 6000), HEADER_TEXT),
        "Content-Type": st.one_of(
            st.sampled_from(
                [
                    "multipart/form-data",
                    "multipart/form-data; boundary=",
                    "multipart/form-data; boundary=zz",
                    "multipart/mixed; boundary=zz",
                    "application/json",
                    "application/pdf",
                    "text/plain; charset=nope",
                ]
            ),
            HEADER_TEXT,
        ),
        "Sec-Fetch-Site": st.sampled_from(["same-origin", "none", "cross-site", "same-site", ""]),
    }
    return special.get(name, HEADER_TEXT)


# one PDF for every draw: pymupdf writes a random /ID, whose escaped length varies, and a
# strategy whose sizes change between runs is flaky to hypothesis
PDF = make_pdf(1)


@st.composite
def multipart(draw: st.DrawFn) -> bytes:
    """A multipart body with random parts (boundary "zz"), sometimes cut short or broken."""
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from(["file", "password", "request_id", "wait_ms", "x", ""]))
        filename = draw(st.one_of(st.none(), st.text(max_size=40)))
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        content = draw(st.one_of(st.binary(max_size=300), st.just(PDF)))
        parts.append(
            f"--zz\r\nContent-Disposition: {disposition}\r\n\r\n".encode("utf-8", "replace")
            + content
            + b"\r\n"
        )
    body = b"".join(parts) + (b"--zz--\r\n" if draw(st.booleans()) else b"")
    if draw(st.booleans()):
        body = body[: draw(st.integers(0, max(0, len(body))))]
    return body


@st.composite
def requests(draw: st.DrawFn, known: Known) -> tuple[str, str, dict[str, str], bytes]:
    method, template = draw(st.sampled_from(ROUTES))
    if draw(st.integers(0, 9)) == 0:  # now and then a method the route does not take
        method = draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]))
    raw_id = draw(
        st.one_of(
            st.sampled_from([known.job_id, known.batch_id, "", "..", "%2e%2e", "a" * 300]),
            st.text(max_size=100),
        )
    )
    path = template.replace("{id}", urllib.parse.quote(raw_id, safe=""))
    query = draw(
        st.dictionaries(
            st.one_of(st.sampled_from(QUERY_NAMES), st.text(min_size=1, max_size=10)),
            ANY_TEXT,
            max_size=4,
        )
    )
    if query:
        path += "?" + urllib.parse.urlencode(query)
    headers: dict[str, str] = {}
    for name in draw(st.lists(st.sampled_from(HEADER_NAMES), max_size=5, unique=True)):
        headers[name] = draw(header_value(name))
    if draw(st.booleans()):
        headers["X-Api-Key"] = KEY
    body = draw(st.one_of(st.binary(max_size=500), multipart(), st.just(PDF)))
    if "Content-Type" not in headers and draw(st.booleans()):
        headers["Content-Type"] = "multipart/form-data; boundary=zz"
    return method, path, headers, body if method in ("POST", "PUT", "PATCH") else b""


def send(
    address: str, method: str, path: str, headers: dict[str, str], body: bytes
) -> tuple[int, str, bytes]:
    """One request; for an event stream only the status and the first bytes are read."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        wire = {k: v.encode("utf-8", "surrogatepass").decode("latin-1") for k, v in headers.items()}
        connection.request(method, path, body=body or None, headers=wire)
        response = connection.getresponse()
        kind = response.getheader("Content-Type", "")
        data = response.read(200) if "event-stream" in kind else response.read()
        return response.status, kind, data
    finally:
        connection.close()


def test_no_request_gets_a_5xx(stack: LocalStack, known: Known) -> None:
    address = stack.http_addresses[0]
    statuses: dict[int, int] = {}
    data_dir = str(stack.data_dir)

    @settings(
        max_examples=int(os.environ.get("DOCPARSE_FUZZ_EXAMPLES", "600")),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=True,
    )
    @given(requests(known))
    def check(request: tuple[str, str, dict[str, str], bytes]) -> None:
        method, path, headers, body = request
        status, kind, data = send(address, method, path, headers, body)
        statuses[status] = statuses.get(status, 0) + 1
        assert status < 500, (method, path[:200], headers, data[:500])
        text = data.decode("utf-8", "replace")
        assert data_dir not in text and "Traceback" not in text and "<class" not in text
        if status >= 400 and path.startswith("/v1/") and method != "HEAD":
            if not kind.startswith("application/json"):
                # Only what aiohttp cannot parse as HTTP at all (a request line over 8,190
                # bytes, a header it refuses) is answered before our handlers, as text.
                assert status == 400 and kind.startswith("text/plain"), (status, kind, path)
                return
            error = json.loads(data)
            assert error["reason"] and error["code"], data[:300]
            assert len(error["message"]) < 600, error["message"][:100]

    check()
    print(f"\nfuzzed HTTP statuses: {dict(sorted(statuses.items()))}")
    # The stack is still healthy afterwards, and nothing it was sent was worth an ERROR line.
    assert send(address, "GET", "/healthz", {}, b"")[0] == 200
    for child in stack.children:
        errors = [line for line in child.log.read_text().splitlines() if '"ERROR"' in line]
        assert not errors, (child.name, errors[:3])
