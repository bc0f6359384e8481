"""Compressed request bodies are refused before they are read: eight 80 KB gzip uploads that
inflate to 64 MB each leave the gateway's peak memory where it was and store nothing."""

from __future__ import annotations

import gzip
import http.client
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from docparse.local.stack import LocalStack
from tests.conftest import make_stack
from tests.helpers import status_kb


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with make_stack(
        tmp_path_factory.mktemp("encoding"),
        replicas=1,
        gateways=1,
        extra_env={"DOCPARSE_GATEWAY_HTTP_MAX_UPLOAD_BYTES": str(64 * 1024 * 1024)},
    ) as running:
        yield running


def _bomb(size: int) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as archive:
        archive.write(b"%PDF-1.7\n")
        chunk = b"0" * (1024 * 1024)
        for _ in range(size // len(chunk)):
            archive.write(chunk)
    return out.getvalue()


def _post(
    address: str, path: str, body: bytes, coding: str, answers: list[tuple[int, str]]
) -> None:
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request(
            "POST", path, body=body,
            headers={"Content-Encoding": coding, "Content-Type": "application/pdf"},
        )  # fmt: skip
        reply = connection.getresponse()
        raw = reply.read()
        answers.append(
            (
                reply.status,
                json.loads(raw).get("reason", "") if raw.startswith(b"{") else raw.decode()[:80],
            )
        )
    finally:
        connection.close()


def test_compressed_uploads_are_refused_before_they_inflate(stack: LocalStack) -> None:
    bomb = _bomb(64 * 1024 * 1024)
    assert len(bomb) < 100 * 1024
    pid = stack.gateways[0].pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS
    before = status_kb(pid, "VmHWM")
    answers: list[tuple[int, str]] = []
    address = stack.http_addresses[0]
    threads = [
        threading.Thread(target=_post, args=(address, "/v1/jobs?file_name=a.pdf", bomb, c, answers))
        for c in ("gzip", "GZIP", "deflate", "gzip", "deflate", "gzip", "Gzip", "gzip")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [(400, "CONTENT_ENCODING_REFUSED")] * 8, answers
    grown_mb = (status_kb(pid, "VmHWM") - before) / 1024
    assert grown_mb < 32, f"the gateway grew {grown_mb:.0f} MB"
    assert not list((stack.data_dir / "blobs").rglob("*inputs*/*"))
    # Uncompressed, the same document is taken.
    plain: list[tuple[int, str]] = []
    _post(address, "/v1/jobs?file_name=a.pdf", b"%PDF-1.7\n", "identity", plain)
    assert plain and plain[0][1] != "CONTENT_ENCODING_REFUSED"
    # Codings aiohttp cannot decode are refused by its parser, as plain text.
    other: list[tuple[int, str]] = []
    _post(address, "/v1/jobs?file_name=a.pdf", bomb, "br", other)
    assert other[0][0] == 400
