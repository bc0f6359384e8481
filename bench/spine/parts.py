"""Where a GetStatus's server CPU goes: grpc.aio servers that each add one piece of
parser_svc's GetStatus to the one before, loaded in turn by the same client.

    .venv/bin/python -m bench.spine.parts                  # every variant, about 2 minutes
    .venv/bin/python -m bench.spine.parts bare read layers --rounds 8

Each variant is a server process on uvloop (parser_svc's default loop) reading the same job
record from one embedded Redis; `LoadClient` (50 callers, 5 channels) loads them in turn, in
rotating order, `--seconds` each per round. Per variant: calls/s and the server's CPU per call
(medians over rounds), and calls/s over `bare`'s in the same round. Differences below about
20 us are the noise of a shared 2-core box. bench/README.md, GetStatus pass 8.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import redis

from bench.spine.get_status import LoadClient
from bench.spine.settings import SERVICE
from docparse.local.embedded_redis import EmbeddedRedis, free_port
from docparse.v1 import parser_service_pb2
from docparse_server import logs, loops, observability
from docparse_server.serving import ErrorInterceptor, InterceptorChain, ServedByInterceptor
from parser_svc.api.callers import CallerInterceptor
from parser_svc.api.status_answers import EncodedJobs
from parser_svc.state.caller_scope import current_tenant
from parser_svc.state.pipelined_reads import PipelinedReader
from parser_svc.state.records import decode_hash, record_to_job
from parser_svc.state.redis_conn import RedisTarget

JOB_ID = "0123456789abcdef0123456789abcdef"
KEY = f"docparse:bench:job:{JOB_ID}"
RECORD = {
    "job_id": JOB_ID, "state": "SUCCEEDED", "version": "7", "done": "3", "total": "3",
    "stage": "done", "attempt": "1", "file_name": "report.pdf", "content_sha256": "ab" * 32,
    "content_type": "application/pdf", "size_bytes": "123456", "create_ms": "1764806400000",
    "update_ms": "1764806401000", "expire_ms": "1764892800000", "res_sha256": "cd" * 32,
    "res_storage": "inline", "res_size": "9999", "tenant": "default",
}  # fmt: skip
VARIANTS = {
    "bare": "generic handler, fixed bytes (bench_spine's `bare` on uvloop)",
    "registered": "+ registered method: request decoded, a fixed response encoded",
    "built": "registered, the Job built from a fixed record and encoded per call",
    "read": "generic handler, request decoded, one pipelined HGETALL, fixed bytes",
    "read_timeout": "read, inside asyncio.timeout (a loop timer per call)",
    "read_built": "registered + read + record decoded, Job built and encoded per call",
    "read_encoded": "read + EncodedJobs (parser_svc's handler without its layers)",
    "layers": "read_encoded + parser_svc's interceptor chain, access line to a file",
    "layers_no_access": "layers with the access log off",
    "proxy": "forwards the bytes to `bare` over one grpc.aio channel (the gateway's floor)",
    "proxy_no_retries": "proxy, its channel with grpc.enable_retries 0",
}
Handler = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Awaitable[Any]]


def _handler(variant: str, reads: PipelinedReader) -> tuple[Handler, bool]:
    """The variant's GetStatus and whether it is registered with the protobuf serializers."""
    fixed = parser_service_pb2.GetStatusResponse(job=record_to_job(RECORD))
    fixed_bytes = fixed.SerializeToString()
    answers = EncodedJobs()

    async def bare(request: Any, context: Any) -> Any:
        return fixed_bytes

    async def registered(request: Any, context: Any) -> Any:
        return fixed

    async def built(request: Any, context: Any) -> Any:
        return parser_service_pb2.GetStatusResponse(job=record_to_job(RECORD))

    async def read(request: Any, context: Any) -> Any:
        await reads.hgetall(KEY)
        return fixed_bytes

    async def read_timeout(request: Any, context: Any) -> Any:
        async with asyncio.timeout(5):
            await reads.hgetall(KEY)
        return fixed_bytes

    async def read_built(request: Any, context: Any) -> Any:
        record = decode_hash(await reads.hgetall(KEY))
        return parser_service_pb2.GetStatusResponse(job=record_to_job(record))

    async def read_encoded(request: Any, context: Any) -> Any:
        return answers.status(request.job_id, await reads.hgetall(KEY))

    handlers: dict[str, tuple[Handler, bool]] = {
        "bare": (bare, False),
        "registered": (registered, True),
        "built": (built, True),
        "read": (read, False),
        "read_timeout": (read_timeout, False),
        "read_built": (read_built, True),
    }
    return handlers.get(variant, (read_encoded, False))


def _forward(upstream: str, retries: bool) -> Handler:
    channel = grpc.aio.insecure_channel(upstream, options=[("grpc.enable_retries", int(retries))])
    call: Any = channel.unary_unary(f"/{SERVICE}/GetStatus")

    async def forward(request: Any, context: Any) -> Any:
        return await call(request, timeout=10)

    return forward


async def serve(variant: str, port: int, redis_url: str, upstream: str) -> None:
    reads = PipelinedReader(RedisTarget(redis_url), connections=2, timeout_s=5.0)
    fn, registered = _handler(variant, reads)
    if variant.startswith("proxy"):
        fn = _forward(upstream, retries=variant == "proxy")
    interceptors: list[grpc.aio.ServerInterceptor] = []
    if variant.startswith("layers"):
        access_log = variant == "layers"
        logs.setup_logging("parser_svc", "json", "INFO", access_log=access_log)
        layers = (
            observability.RpcObserver("parser_svc", tenant=current_tenant),
            ServedByInterceptor(),
            CallerInterceptor(""),
            ErrorInterceptor(),
        )
        interceptors.append(InterceptorChain(*layers))
    request = parser_service_pb2.GetStatusRequest
    if registered:
        method = grpc.unary_unary_rpc_method_handler(
            fn,
            request_deserializer=request.FromString,
            response_serializer=parser_service_pb2.GetStatusResponse.SerializeToString,
        )
    elif variant == "bare" or variant.startswith("proxy"):  # bytes in, bytes out
        method = grpc.unary_unary_rpc_method_handler(fn)
    else:
        method = grpc.unary_unary_rpc_method_handler(fn, request_deserializer=request.FromString)
    server = grpc.aio.server(interceptors=interceptors)
    handlers = {"GetStatus": method}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    generic = variant == "bare" or variant.startswith("proxy")  # as bare and the gateway
    if not generic:  # as parser_svc's generated registration does
        server.add_registered_method_handlers(SERVICE, handlers)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("READY", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # parent closes it
    await server.stop(0)
    await reads.aclose()


def start_servers(
    variants: list[str], redis_url: str, work: Path
) -> dict[str, tuple[subprocess.Popen[bytes], int]]:
    """One server process per variant, each with its port; its stderr (access lines) in
    `work`. The proxies forward to `bare`, started first."""
    servers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    if any(v.startswith("proxy") for v in variants):
        variants = ["bare", *(v for v in variants if v != "bare")]
    for variant in variants:
        upstream = f"127.0.0.1:{servers['bare'][1]}" if "bare" in servers else ""
        port = free_port()
        with (work / f"{variant}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bench.spine.parts", "--serve", variant,
                 "--port", str(port), "--redis-url", redis_url, "--upstream", upstream],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            )  # fmt: skip
        servers[variant] = proc, port
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"READY":
            raise RuntimeError(f"{variant}: the server did not start")
    return servers


async def drive(
    servers: dict[str, tuple[subprocess.Popen[bytes], int]], seconds: float, rounds: int
) -> None:
    variants = list(servers)
    clients: dict[str, LoadClient] = {}
    try:
        for variant, (_, port) in servers.items():
            clients[variant] = LoadClient(variant, f"127.0.0.1:{port}", JOB_ID, 50, 5)
            await clients[variant].start()
            await clients[variant].run(1.0, ramp_s=0.0, pids={}, cycle=0)  # warm-up
        rates: dict[str, list[float]] = {v: [] for v in variants}
        cpu_us: dict[str, list[float]] = {v: [] for v in variants}
        ratio: dict[str, list[float]] = {v: [] for v in variants}
        for n in range(rounds):
            order = variants[n % len(variants) :] + variants[: n % len(variants)]
            this_round = {}
            for variant in order:
                pids = {"server": servers[variant][0].pid}
                result = await clients[variant].run(seconds, ramp_s=0.2, pids=pids, cycle=n)
                rates[variant].append(result.calls_per_s)
                cpu_us[variant].append(result.cpu_s["server"] / max(result.calls, 1) * 1e6)
                this_round[variant] = result.calls_per_s
            if "bare" in this_round:
                for variant, rate in this_round.items():
                    ratio[variant].append(rate / this_round["bare"])
        print(f"{'variant':18s} {'calls/s':>8s} {'vs bare':>8s} {'server us/call':>15s}  what")
        for variant in variants:
            vs = f"{statistics.median(ratio[variant]):.2f}" if ratio[variant] else "-"
            print(
                f"{variant:18s} {statistics.median(rates[variant]):8.0f} {vs:>8s} "
                f"{statistics.median(cpu_us[variant]):15.0f}  {VARIANTS[variant]}"
            )
    finally:
        for client in clients.values():
            await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="*", help=f"some of: {', '.join(VARIANTS)}")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--serve", choices=list(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        loops.run(serve(args.serve, args.port, args.redis_url, args.upstream), "uvloop")
        return
    unknown = set(args.variants) - set(VARIANTS)
    if unknown:
        parser.error(f"unknown variants: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="parts-") as work:
        store = EmbeddedRedis(Path(work) / "redis")
        store.start()
        servers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
        try:
            with redis.Redis.from_url(store.url) as admin:
                admin.hset(KEY, mapping=RECORD)
            servers = start_servers(args.variants or list(VARIANTS), store.url, Path(work))
            loops.run(drive(servers, args.seconds, args.rounds), "uvloop")
        finally:
            for proc, _ in servers.values():
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(10)
            store.stop()


if __name__ == "__main__":
    main()
