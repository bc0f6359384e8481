"""GetStatus load: `concurrency` callers per target taking turns in short slices, against a
bare grpc.aio server (the floor), parser_svc directly and the gateway in front of it."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
import redis.asyncio as aioredis

from bench.harness.children import start_child, stop_child, stop_on_stdin_eof
from bench.harness.output import log
from bench.harness.procfs import cpu_snapshot, machine_busy_seconds
from bench.harness.stacks import ENV_NAME, KEY_METADATA, TOKEN_METADATA
from bench.spine.settings import CHANNEL_OPTIONS, CHILDREN, SERVICE, default_loop
from bench.spine.summary import summarize_get_status
from docparse.local.embedded_redis import free_port
from docparse.local.stack import LocalStack
from docparse.v1 import job_pb2, parser_service_pb2, parser_service_pb2_grpc
from parser_svc.state.keys import Keys
from parser_svc.state.records import record_to_job


@dataclass
class LoadResult:
    """One measured slice of one target."""

    target: str
    cycle: int
    calls: int
    errors: int
    seconds: float
    calls_per_s: float
    # CPU seconds each process spent during the slice.
    cpu_s: dict[str, float] = field(default_factory=dict)
    # Cores busy with anything but the benchmark's processes during the slice (other tenants,
    # kernel softirq work): the noise this machine adds.
    other_cores: float = 0.0


class LoadClient:
    """`concurrency` callers on their own channels to one target. They call GetStatus back to
    back while the client is active and wait while it is not, so targets can take turns. Each
    call sends `metadata` (the stack runs with API keys: the key to a gateway, the internal
    token and tenant to parser_svc and, the same bytes, to bare and floor)."""

    def __init__(
        self,
        name: str,
        address: str,
        job_id: str,
        concurrency: int,
        channels: int,
        metadata: tuple[tuple[str, str], ...] = (),
    ):
        self.name = name
        self._metadata = metadata
        self._address = address
        self._request = parser_service_pb2.GetStatusRequest(job_id=job_id)
        self._concurrency = concurrency
        self._channel_count = channels
        self._channels: list[grpc.aio.Channel] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._active = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._inflight = 0
        self._closed = False
        self._recording = False
        self._latencies: list[int] = []
        self._errors = 0
        self.all_latencies_ms: list[float] = []

    async def start(self) -> None:
        self._channels = [
            grpc.aio.insecure_channel(self._address, options=CHANNEL_OPTIONS)
            for _ in range(self._channel_count)
        ]
        async with asyncio.timeout(10):
            await asyncio.gather(*(c.channel_ready() for c in self._channels))
        stubs = [parser_service_pb2_grpc.ParserServiceStub(c) for c in self._channels]
        check = await stubs[0].GetStatus(self._request, timeout=5, metadata=self._metadata)
        if check.job.state != job_pb2.STATE_SUCCEEDED:
            raise RuntimeError(f"{self.name}: GetStatus answered {check.job!r}")
        self._tasks = [
            asyncio.create_task(self._caller(stubs[i % len(stubs)]))
            for i in range(self._concurrency)
        ]

    async def _caller(self, stub: parser_service_pb2_grpc.ParserServiceAsyncStub) -> None:
        while True:
            await self._active.wait()
            if self._closed:
                return
            self._inflight += 1
            self._idle.clear()
            t0 = time.perf_counter_ns()
            try:
                await stub.GetStatus(self._request, timeout=10, metadata=self._metadata)
                ok = True
            except grpc.aio.AioRpcError:
                ok = False
            elapsed = time.perf_counter_ns() - t0
            if self._recording:
                if ok:
                    self._latencies.append(elapsed)
                else:
                    self._errors += 1
            self._inflight -= 1
            if self._inflight == 0 and not self._active.is_set():
                self._idle.set()

    async def run(
        self, seconds: float, *, ramp_s: float, pids: dict[str, int], cycle: int
    ) -> LoadResult:
        """Calls for `ramp_s` unrecorded (steady state), then records `seconds`; then stops and
        waits for the calls in flight, so the next target starts on a quiet machine."""
        self._latencies, self._errors = [], 0
        self._active.set()
        await asyncio.sleep(ramp_s)
        cpu0, busy0 = cpu_snapshot(pids), machine_busy_seconds()
        start = time.perf_counter()
        self._recording = True
        await asyncio.sleep(seconds)
        self._recording = False
        elapsed = time.perf_counter() - start
        busy1, cpu1 = machine_busy_seconds(), cpu_snapshot(pids)
        self._active.clear()
        if self._inflight:
            await self._idle.wait()
        cpu_s = {name: cpu1[name] - cpu0[name] for name in pids}
        calls = len(self._latencies)
        self.all_latencies_ms += [ns / 1e6 for ns in self._latencies]
        return LoadResult(
            target=self.name,
            cycle=cycle,
            calls=calls,
            errors=self._errors,
            seconds=round(elapsed, 3),
            calls_per_s=round(calls / elapsed, 1),
            cpu_s={name: round(v, 4) for name, v in cpu_s.items()},
            other_cores=round((busy1 - busy0 - sum(cpu_s.values())) / elapsed, 2),
        )

    async def close(self) -> None:
        self._closed = True
        self._active.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self._channels))


async def serve_bare(port: int, response: bytes) -> None:
    """A grpc.aio server that answers GetStatus with fixed bytes and does nothing else."""

    async def get_status(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return response

    handler = grpc.method_handlers_generic_handler(
        SERVICE, {"GetStatus": grpc.unary_unary_rpc_method_handler(get_status)}
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("READY", flush=True)
    stop = asyncio.Event()
    with stop_on_stdin_eof(stop):  # parent closes stdin (or exits): stop
        await stop.wait()
    await server.stop(1)


async def serve_floor(port: int, redis_url: str, key: str) -> None:
    """The least a GetStatus that reads Redis can do: grpc.aio's registered protobuf method
    (request decoded, response encoded), one HGETALL of the job's record with redis-py and the
    record made a Job (parser_svc.state.records), on parser_svc's default loop; no interceptor, no
    access line, no metrics, no error mapping. What parser_svc costs above it is its own."""
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)

    class Floor(parser_service_pb2_grpc.ParserServiceServicer):
        async def GetStatus(
            self,
            request: parser_service_pb2.GetStatusRequest,
            context: grpc.aio.ServicerContext[Any, Any],
        ) -> parser_service_pb2.GetStatusResponse:
            record: dict[str, str] = await client.hgetall(key)  # type: ignore[assignment]
            job = record_to_job(record)
            return parser_service_pb2.GetStatusResponse(job=job)

    server = grpc.aio.server()
    servicer = Floor()  # type: ignore[abstract]  # GetStatus only: the others answer UNIMPLEMENTED
    parser_service_pb2_grpc.add_ParserServiceServicer_to_server(servicer, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("READY", flush=True)
    stop = asyncio.Event()
    with stop_on_stdin_eof(stop):
        await stop.wait()
    await server.stop(1)
    await client.aclose()


def bare_name(loop: str, default: str) -> str:
    """`bare` on the default stack's parser_svc loop (the product's), `bare_<loop>` else."""
    return "bare" if loop == default.split("+")[0] else f"bare_{loop}"


async def bench_get_status(
    stacks: dict[str, LocalStack], jobs: dict[str, job_pb2.Job], args: argparse.Namespace
) -> tuple[list[LoadResult], dict[str, Any]]:
    """Targets: `bare` (grpc.aio on the loop of the default stack's parser_svc, as the
    product runs: the floor the goals are counted from), `bare_L` for each other loop L
    measured, `floor` (serve_floor on the default stack's Redis and job, on its parser_svc
    loop), and per stack "P+G" (parser_svc's event loop P, the gateway's G): `direct_P`
    (parser_svc; once per P) and `gateway_G_on_P`."""
    first = next(iter(jobs.values()))
    response = parser_service_pb2.GetStatusResponse(job=first).SerializeToString()
    pids: dict[str, int] = {"client": os.getpid()}
    involved: dict[str, list[str]] = {}
    addresses: dict[str, str] = {}
    job_of: dict[str, job_pb2.Job] = {}
    bares = []
    default = default_loop(stacks)
    product_loop = default.split("+")[0]
    measured = {loop for config in stacks for loop in config.split("+")}
    for loop in (product_loop, *sorted(measured - {product_loop})):
        port = free_port()
        name = bare_name(loop, default)
        bare = await start_child(
            CHILDREN, "_bare", "--port", str(port), "--response", response.hex(), "--loop", loop
        )
        bares.append(bare)
        pids[f"{name}_server"] = bare.pid
        involved[name] = ["client", f"{name}_server"]
        addresses[name] = f"127.0.0.1:{port}"
        job_of[name] = first
    floor_stack = stacks[default]
    assert floor_stack.redis is not None and floor_stack.redis.proc is not None
    port = free_port()
    floor = await start_child(
        CHILDREN,
        "_floor",
        "--port", str(port),
        "--redis-url", floor_stack.redis_url,
        "--key", Keys(ENV_NAME).job(jobs[default].job_id),
        "--loop", default.split("+")[0],
    )  # fmt: skip
    bares.append(floor)
    pids["floor_server"] = floor.pid
    involved["floor"] = ["client", "floor_server", f"redis[{default}]"]
    addresses["floor"] = f"127.0.0.1:{port}"
    job_of["floor"] = jobs[default]
    for config, stack in stacks.items():
        assert stack.redis is not None and stack.redis.proc is not None
        parser_loop, gateway_loop = config.split("+")
        gateway, parser, redis = f"gateway[{config}]", f"parser_svc[{config}]", f"redis[{config}]"
        pids |= {
            gateway: stack.gateways[0].pid,
            parser: stack.parsers[0].pid,
            redis: stack.redis.proc.pid,
        }
        # The processes each target's calls go through (the others idle meanwhile).
        if f"direct_{parser_loop}" not in addresses:
            involved[f"direct_{parser_loop}"] = ["client", parser, redis]
            addresses[f"direct_{parser_loop}"] = stack.parser_addresses[0]
            job_of[f"direct_{parser_loop}"] = jobs[config]
        target = f"gateway_{gateway_loop}_on_{parser_loop}"
        involved[target] = ["client", gateway, parser, redis]
        addresses[target] = stack.gateway_addresses[0]
        job_of[target] = jobs[config]
    clients = [
        LoadClient(
            name,
            address,
            job_of[name].job_id,
            args.concurrency,
            args.channels,
            KEY_METADATA if name.startswith("gateway") else TOKEN_METADATA,
        )
        for name, address in addresses.items()
    ]
    slices: list[LoadResult] = []
    try:
        for client in clients:
            await client.start()
            await client.run(args.warmup, ramp_s=0.0, pids={}, cycle=0)  # warm-up
            client.all_latencies_ms.clear()
        for cycle in range(1, args.cycles + 1):
            shift = (cycle - 1) % len(clients)  # rotate the order to spread drift
            for client in clients[shift:] + clients[:shift]:
                result = await client.run(args.slice, ramp_s=0.2, pids=pids, cycle=cycle)
                slices.append(result)
            row = {r.target: r for r in slices if r.cycle == cycle}
            log(
                f"GetStatus cycle {cycle:2d}: "
                + "  ".join(
                    f"{t} {r.calls_per_s:6.0f}/s (other {r.other_cores:.2f})"
                    for t, r in row.items()
                )
            )
        summary = summarize_get_status(slices, clients, involved, default)
    finally:
        for client in clients:
            await client.close()
        for bare in bares:
            await stop_child(bare)
    return slices, summary
