"""GetResult through the gateway: a job's package (or some of its pages) read from a replica
and checked against the sha256 its first message names, before the HTTP answer starts."""

from __future__ import annotations

import asyncio

import grpc
from aiohttp import web

from docparse.errors import ContractError, DocparseError
from docparse.reasons import ErrorReason
from docparse.results import ResultAssembler
from docparse.v1 import job_pb2, parser_service_pb2
from docparse_server.errors import error
from gateway.http.keys import UPSTREAM
from gateway.http.upstream import HttpError, rpc_failure, served_by_header


async def fetch_result(request: web.Request, job_id: str) -> tuple[bytes, job_pb2.ResultRef, str]:
    """GetResult: the package checked against its ResultRef's sha256, the ref, X-Served-By."""
    data, assembler, served = await fetch_package(request, job_id)
    return data, assembler.ref, served


async def fetch_package(
    request: web.Request, job_id: str, pages: str = ""
) -> tuple[bytes, ResultAssembler, str]:
    """GetResult (with `pages`: some pages, also while the job runs): the bytes checked
    against their ResultRef's sha256, what the answer said of them, X-Served-By."""
    upstream = request.app[UPSTREAM]
    call = upstream.stub.GetResult(
        parser_service_pb2.GetResultRequest(job_id=job_id, pages=pages),
        timeout=upstream.unary_timeout_s,
        metadata=upstream.metadata(request),
    )
    assembler = ResultAssembler(job_id)
    try:
        async for message in call:
            assembler.add(message)
        served = served_by_header(await call.trailing_metadata())
        data = await asyncio.to_thread(assembler.verified_bytes)  # sha256 of MBs: off the loop
    except grpc.aio.AioRpcError as err:
        raise rpc_failure(err) from err
    except ContractError as err:
        raise HttpError(error(ErrorReason.UPSTREAM_CONTRACT, str(err))) from err
    except DocparseError as err:
        raise HttpError(err) from err
    finally:
        call.cancel()
    return data, assembler, served
