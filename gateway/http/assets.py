"""GET /v1/jobs/{job_id}/assets/{asset_id}: one asset (an image) of a SUCCEEDED job, over HTTP;
GET /v1/jobs/{job_id}/assets: the list of them (`list_assets`).

The bytes come from parser_svc's GetAsset (the caller's tenant only: another tenant's job is
404 like an unknown one) and are checked against the size and sha256 the first message
announces before anything is sent (500 CHECKSUM_MISMATCH otherwise). Asset ids are derived
from the content, so an asset never changes: `ETag` is its sha256, `Cache-Control: private`
(a browser may keep it, a shared cache may not), `If-None-Match` answers 304 without fetching
the bytes, and one byte range (`Range: bytes=a-b`, `a-`, `-n`; `If-Range` with the ETag) is
206 with `Content-Range`, or 416 when it starts beyond the end. Several ranges are answered
with the whole asset (200), as RFC 9110 allows.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import grpc
from aiohttp import web

from docparse.reasons import ErrorReason
from docparse.v1 import parser_service_pb2, reading_package_pb2
from docparse_server.errors import error
from docparse_server.serving import served_by
from gateway.http.api import text, to_json
from gateway.http.errors import echo, error_body
from gateway.http.keys import UPSTREAM
from gateway.http.result_fetch import fetch_result
from gateway.http.upstream import HttpError, rpc_failure, served_by_header

ID = r"[^/:{}]+"
CHUNK_BYTES = 1024 * 1024
CACHE_CONTROL = "private, max-age=86400, immutable"
# An asset is shown, never run: an SVG or HTML-looking image gets no script and no origin.
ASSET_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"


def parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """The single byte range `header` asks for, as (first, last) inclusive; None to answer
    with the whole asset (no range, several ranges, or one that is not understood: RFC 9110
    says ignore it); "unsatisfiable" when it starts beyond the end."""
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first_text, dash, last_text = spec.strip().partition("-")
    if not dash:
        return None
    first_text, last_text = first_text.strip(), last_text.strip()
    if not all(t.isascii() and t.isdigit() and len(t) <= 20 for t in (first_text, last_text) if t):
        return None
    if not first_text:  # the last N bytes
        if not last_text:
            return None
        suffix = int(last_text)
        if suffix == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - suffix), size - 1
    first = int(first_text)
    last = int(last_text) if last_text else None
    if last is not None and last < first:
        return None  # not a valid range: ignored
    if first >= size:
        return "unsatisfiable"
    return first, size - 1 if last is None else min(last, size - 1)


def etag_matches(header: str, etag: str) -> bool:
    """If-None-Match: "*" or any listed tag equal to ours (weak comparison)."""
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags


async def _first(messages: AsyncIterator[Any]) -> Any:
    try:
        return await messages.__anext__()
    except StopAsyncIteration:
        raise HttpError(error(ErrorReason.UPSTREAM_CONTRACT, "GetAsset sent nothing")) from None


async def get_asset(request: web.Request) -> web.StreamResponse:
    job_id = text(request.match_info["job_id"])
    asset_id = text(request.match_info["asset_id"])
    upstream = request.app[UPSTREAM]
    call = upstream.stub.GetAsset(
        parser_service_pb2.GetAssetRequest(job_id=job_id, asset_id=asset_id),
        timeout=upstream.unary_timeout_s,
        metadata=upstream.metadata(request),
    )
    try:
        messages = call.__aiter__()
        first = await _first(messages)
        asset = first.asset
        etag = f'"{asset.sha256}"'
        headers = {
            "ETag": etag,
            "Cache-Control": CACHE_CONTROL,
            "Accept-Ranges": "bytes",
            "Content-Security-Policy": ASSET_CSP,
        }
        if etag_matches(request.headers.get("If-None-Match", ""), etag):
            # The client has these bytes: none are fetched.
            return web.Response(status=304, headers={**headers, "X-Served-By": served_by()})
        chunks = [first.chunk]
        async for message in messages:
            chunks.append(message.chunk)
        served = served_by_header(await call.trailing_metadata())
    except grpc.aio.AioRpcError as err:
        raise rpc_failure(err) from err
    finally:
        call.cancel()
    data = b"".join(chunks)
    digest = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
    if len(data) != asset.size_bytes or digest != asset.sha256:
        raise HttpError(
            error(
                ErrorReason.CHECKSUM_MISMATCH,
                f"asset {asset_id} of job {job_id} arrived with {len(data)} bytes and another "
                "sha256 than announced; retry",
                {"job_id": job_id, "asset_id": asset_id},
            ),
            served,
        )
    headers["X-Served-By"] = served
    headers["Content-Type"] = asset.mime_type or "application/octet-stream"
    return await _answer(request, data, etag, headers)


async def _answer(
    request: web.Request, data: bytes, etag: str, headers: dict[str, str]
) -> web.StreamResponse:
    """The checked asset: whole (200), the one range asked for (206), or 416 for a range
    that starts beyond its end."""
    status, body = 200, memoryview(data)
    wanted = request.headers.get("Range")
    if wanted and request.headers.get("If-Range", etag) == etag:
        picked = parse_range(wanted, len(data))
        if picked == "unsatisfiable":
            refusal = error(
                ErrorReason.RANGE_NOT_SATISFIABLE,
                f"the range {echo(wanted)} starts beyond the asset's {len(data)} bytes",
                {"size_bytes": str(len(data))},
            )
            headers["Content-Type"] = "application/json"
            headers["Content-Range"] = f"bytes */{len(data)}"
            return web.Response(status=416, text=json.dumps(error_body(refusal)), headers=headers)
        if isinstance(picked, tuple):
            first_byte, last_byte = picked
            status, body = 206, body[first_byte : last_byte + 1]
            headers["Content-Range"] = f"bytes {first_byte}-{last_byte}/{len(data)}"
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = len(body)
    await response.prepare(request)
    if request.method != "HEAD":
        for offset in range(0, len(body), CHUNK_BYTES):
            await response.write(body[offset : offset + CHUNK_BYTES])
    await response.write_eof()
    return response


def asset_records(job_id: str, data: bytes) -> dict[str, Any]:
    """The package's assets as JSON: each Asset record in its JSON form (as in the result),
    with `page`, the first page (or slide) that shows it (0: none does), and `url`, the path
    that GETs its bytes."""
    package = reading_package_pb2.ReadingPackage.FromString(data)
    first_page: dict[str, int] = {}
    shown = [(p.number, p.images) for p in package.pages]
    shown += [(slide.number, slide.images) for slide in package.slides]
    for number, images in shown:
        for image in images:
            first_page.setdefault(image.asset_id, number)
    job_path = f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}/assets/"
    records = []
    for asset in package.assets:
        record: dict[str, Any] = json.loads(to_json(asset))
        record["page"] = first_page.get(asset.asset_id, 0)
        record["url"] = job_path + urllib.parse.quote(asset.asset_id, safe="")
        records.append(record)
    return {"job_id": job_id, "assets": records}


async def list_assets(request: web.Request) -> web.Response:
    """GET /v1/jobs/{job_id}/assets: the asset records of a SUCCEEDED job's package, read from
    the package GET /v1/jobs/{job_id}/result sends (checked against its sha256 first), with
    the same answers for another tenant's job (404 JOB_NOT_FOUND), an unknown one, or one that
    did not succeed."""
    job_id = text(request.match_info["job_id"])
    data, ref, served = await fetch_result(request, job_id)
    listing = await asyncio.to_thread(asset_records, job_id, data)  # a big package: off the loop
    return web.Response(
        text=json.dumps(listing, separators=(",", ":")),
        content_type="application/json",
        headers={"X-Served-By": served, "ETag": f'"{ref.sha256}"', "Cache-Control": "no-store"},
    )


def register(app: web.Application) -> None:
    app.router.add_get(f"/v1/jobs/{{job_id:{ID}}}/assets", list_assets)
    app.router.add_get(f"/v1/jobs/{{job_id:{ID}}}/assets/{{asset_id:{ID}}}", get_asset)
