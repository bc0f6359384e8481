"""A job's pages over HTTP while it runs (gateway/http/page_events.py, page_results.py), against
a real stack: page events before the job ends, a resume with Last-Event-ID on another gateway
that repeats nothing, finals byte for byte the pages of GET result, `result?pages=` partial
while the job runs and exact after it, and the errors a client meets (a bad range, a bad
cursor)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from docparse import page_ranges
from docparse.local.stack import LocalStack
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from gateway.http.page_events import INLINE_RENDER_BYTES
from gateway.http.rendering import Renderer, render_pages
from parser_svc.child.draft_pages import page_part
from parser_svc.parsers import page_ranges as service_page_ranges
from tests.conftest import make_stack
from tests.gateway.test_http import Event, EventStream, error_of, read_all, request, submit
from tests.helpers import make_pdf

PAGES = 24


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("http-pages"),
        replicas=2,
        gateways=2,
        extra_env={"DOCPARSE_PARSE_PAGE_DELAY_MS": "250"},  # the job runs for 6 s
    ) as running:
        yield running


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """parser_svc ends every connection 1 s after it opened (max_connection_age), so a page
    stream longer than that is cut under the gateway."""
    with make_stack(
        tmp_path_factory.mktemp("http-pages-cut"),
        replicas=1,
        gateways=1,
        extra_env={
            "DOCPARSE_PARSE_PAGE_DELAY_MS": "100",
            "DOCPARSE_MAX_CONNECTION_AGE_MS": "1000",
            "DOCPARSE_MAX_CONNECTION_AGE_GRACE_MS": "200",
        },
    ) as running:
        yield running


def pages_of(events: list[Event]) -> list[dict[str, Any]]:
    data = []
    for event in events:
        if event.event == "page":
            assert event.id == event.json()["cursor"]  # the event id is the resume cursor
            data.append(event.json())
    return data


def state(address: str, job_id: str) -> str:
    return str(request(address, "GET", f"/v1/jobs/{job_id}").json()["state"])


def package_of(address: str, job_id: str, query: str = "") -> tuple[rp.ReadingPackage, str]:
    reply = request(address, "GET", f"/v1/jobs/{job_id}/result?format=proto{query}")
    assert reply.status == 200, reply.body
    return rp.ReadingPackage.FromString(reply.body), reply.headers.get("Docparse-Partial", "")


def first_pages(address: str, job_id: str, count: int) -> list[Event]:
    """The first `count` page events of the job's stream; then the browser leaves."""
    seen: list[Event] = []
    with EventStream(address, f"/v1/jobs/{job_id}/pages") as stream:
        assert stream.status == 200
        for event in stream:
            assert event.event == "page", (event, stream.comments)
            seen.append(event)
            if len(seen) == count:
                break
    return seen


def assert_partial_while_running(address: str, job_id: str, seen: set[int]) -> None:
    """result?pages= while the job runs: the pages read so far, marked partial."""
    reply = request(address, "GET", f"/v1/jobs/{job_id}/result?pages=2-3&format=proto")
    some = rp.ReadingPackage.FromString(reply.body)
    assert reply.headers["Docparse-Partial"] == "true"
    assert {page.number for page in some.pages} <= {2, 3}
    reply = request(address, "GET", f"/v1/jobs/{job_id}/result?pages=1-{PAGES}")
    assert reply.status == 200, reply.body
    body = reply.json()
    numbers = [page["number"] for page in body["pages"]]
    assert reply.headers["Docparse-Partial"] == "true" and body["partial"] is True
    assert seen <= set(numbers) and len(numbers) < PAGES, (seen, numbers)
    assert numbers == sorted(set(numbers)) and set(body["draft_pages"]) <= set(numbers)


def test_pages_stream_while_the_job_runs_and_end_as_the_result(stack: LocalStack) -> None:
    http_a, http_b = stack.http_addresses
    job_id = submit(http_a, make_pdf(PAGES, "paged"), "paged.pdf").json()["job_id"]
    first = first_pages(http_a, job_id, 3)
    assert state(http_a, job_id) == "STATE_RUNNING"  # the pages came before the end
    before = pages_of(first)
    assert not any(page["final"] for page in before)
    for page in before:
        number = page["page_number"]
        assert f"paged {number} of {PAGES}" in page["markdown"]
        assert page["json_url"] == f"/v1/jobs/{job_id}/result?pages={number}"
    assert_partial_while_running(http_b, job_id, {page["page_number"] for page in before})

    # The browser comes back on the other gateway with its Last-Event-ID: the rest, once.
    with EventStream(
        http_b, f"/v1/jobs/{job_id}/pages", {"Last-Event-ID": first[-1].id or ""}
    ) as s:
        assert s.status == 200
        rest = read_all(s)
    end = rest[-1]
    assert end.id == "end" and end.json()["state"] == "STATE_SUCCEEDED"
    after = pages_of(rest)
    drafts = [page["page_number"] for page in before + after if not page["final"]]
    assert len(drafts) == len(set(drafts)) and len(drafts) > 3  # none repeated
    finals = [page for page in after if page["final"]]
    assert [page["page_number"] for page in finals] == list(range(1, PAGES + 1))

    # The finals are GET result's pages byte for byte (their sha256), and their Markdown.
    package, partial = package_of(http_a, job_id)
    assert partial == ""  # no `pages`: the plain result
    for page, final in zip(package.pages, finals, strict=True):
        part = page_part(package, page)
        assert final["sha256"] == hashlib.sha256(part).hexdigest()
        assert final["markdown"] == to_markdown(rp.ReadingPackage.FromString(part))

    # After the end, result?pages=2-3 is the package's pages 2-3, not partial.
    some, partial = package_of(http_b, job_id, "&pages=3,2")
    assert partial == "false"
    assert [p.SerializeToString() for p in some.pages] == [
        p.SerializeToString() for p in package.pages[1:3]
    ]
    assert some.parser_version == package.parser_version
    whole = request(http_a, "GET", f"/v1/jobs/{job_id}/result").json()
    reply = request(http_a, "GET", finals[4]["json_url"])  # page 5 as JSON
    assert reply.headers["Docparse-Partial"] == "false"
    body = reply.json()
    assert (body["partial"], body["draft_pages"]) == (False, [])
    assert body["pages"] == [whole["pages"][4]]
    markdown = request(http_a, "GET", f"/v1/jobs/{job_id}/result?pages=2-3&format=markdown")
    assert markdown.body.decode() == to_markdown(some)

    # A resume from the last page: only the end; from the end itself: 204 (EventSource stops).
    path = f"/v1/jobs/{job_id}/pages"
    with EventStream(http_a, f"{path}?cursor={finals[-1]['cursor']}") as stream:
        assert [event.event for event in read_all(stream)] == ["end"]
    with EventStream(http_a, path, {"Last-Event-ID": "end"}) as stream:
        assert stream.status == 204


def test_a_finished_job_streams_its_finals_alone(stack: LocalStack) -> None:
    http_a, _ = stack.http_addresses
    reply = submit(http_a, make_pdf(3, "short"), "short.pdf", "&wait_ms=60000")
    job_id = reply.json()["job_id"]
    assert reply.json()["state"] == "STATE_SUCCEEDED"
    with EventStream(http_a, f"/v1/jobs/{job_id}/pages") as stream:
        events = read_all(stream)
    pages = pages_of(events)
    assert [(page["page_number"], page["final"]) for page in pages] == [
        (1, True),
        (2, True),
        (3, True),
    ]
    assert json.loads(events[-1].data)["job_id"] == job_id


def test_bad_ranges_and_cursors_are_400_with_the_reason(stack: LocalStack) -> None:
    http_a, _ = stack.http_addresses
    job_id = submit(http_a, make_pdf(PAGES, "errors"), "errors.pdf").json()["job_id"]
    for spec in ("3-1", "0", "x", "1-2-3", "1," * 70):
        reply = request(http_a, "GET", f"/v1/jobs/{job_id}/result?pages={spec}")
        assert reply.status == 400, (spec, reply.body)
        assert error_of(reply)["reason"] == "INVALID_PAGE_RANGE"
    path = f"/v1/jobs/{job_id}/pages"
    for cursor in ("x7", "d" * 80, "end"):  # not a cursor; too long; the end of a running job
        with EventStream(http_a, path, {"Last-Event-ID": cursor}) as stream:
            assert stream.status == 400, cursor
            assert json.loads(stream.response.read())["reason"] == "INVALID_RESUME_CURSOR"
    with EventStream(http_a, "/v1/jobs/no-such-job/pages") as stream:
        assert stream.status == 404
    request(http_a, "POST", f"/v1/jobs/{job_id}:cancel")


def test_the_gateway_resumes_a_cut_upstream_stream_without_a_gap(cut: LocalStack) -> None:
    address = cut.http_addresses[0]
    job_id = submit(address, make_pdf(30, "cut"), "cut.pdf").json()["job_id"]
    with EventStream(address, f"/v1/jobs/{job_id}/pages") as stream:
        assert stream.status == 200
        events = read_all(stream)
    resumed = [c for c in stream.comments if "resuming after cursor" in c]
    assert resumed, stream.comments  # the 3 s stream was cut at least once: else no proof
    pages = pages_of(events)
    drafts = [page["page_number"] for page in pages if not page["final"]]
    assert len(drafts) == len(set(drafts)) and drafts  # nothing twice across the resumes
    assert [page["page_number"] for page in pages if page["final"]] == list(range(1, 31))
    assert events[-1].json()["state"] == "STATE_SUCCEEDED"


@pytest.mark.parametrize(
    "spec", ["", "1", " 3, 1-2 ,5-", "7-7", "10-,2", "1-3,2-9", "0", "4-2", "a", "1-2-3", "5-,"]
)
def test_the_gateway_picks_the_pages_the_parser_reads(spec: str) -> None:
    """What `result?pages=` keeps of a finished package (`selects`) is what the PDF parser
    reads of a 12-page document for the same selection (`indexes`)."""
    try:
        selection = page_ranges.parse(spec)
    except page_ranges.PageRangeError:
        return  # refused alike: the service parses with the same function
    chosen = [n for n in range(1, 13) if page_ranges.selects(selection, n)]
    indexes = service_page_ranges.indexes(selection, 12)
    assert chosen == [i + 1 for r in indexes for i in r]


def _package(pages: int) -> rp.ReadingPackage:
    package = rp.ReadingPackage(content_type="pdf", parser_version="test")
    for number in range(1, pages + 1):
        page = package.pages.add(number=number)
        page.blocks.add(text=f"page {number} " + "words " * 50)
    package.sheets.add(name="not a page")
    return package


def test_a_restricted_package_keeps_the_selected_pages_and_document_fields() -> None:
    package = _package(5)
    cut = rp.ReadingPackage.FromString(render_pages(package.SerializeToString(), "4,2", "proto"))
    assert [page.number for page in cut.pages] == [2, 4] and not cut.sheets
    assert (cut.content_type, cut.parser_version) == ("pdf", "test")
    markdown = render_pages(package.SerializeToString(), "2", "markdown").decode()
    assert "page 2 " in markdown and "page 3 " not in markdown


@pytest.mark.slow  # starts a render worker process
def test_big_packages_are_cut_and_rendered_in_the_render_workers() -> None:
    package = _package(400)
    data = package.SerializeToString()
    assert len(data) > INLINE_RENDER_BYTES  # the path result?pages= takes for it

    async def run() -> bytes:
        renderer = Renderer(1)
        try:
            return await renderer.render(data, "markdown", pages="399-")
        finally:
            renderer.close()

    expected = render_pages(data, "399-", "markdown")
    assert asyncio.run(run()) == expected and b"page 400 " in expected
