"""CPU a stack spends on a scenario: each process's own time, the parse children its parser_svc
replicas reaped (forked by their fork servers, waited for by the worker), the fork servers,
the gateways and the stack's Redis. With it, the best pages/s the stack could reach on this
machine's cores if it kept every core busy: the ceiling its CPU per page sets, whatever the
scheduling."""

from __future__ import annotations

import os

from bench.harness.procfs import children, cpu_seconds, reaped_children_cpu_seconds
from docparse.local.stack import LocalStack


def stack_cpu_seconds(stack: LocalStack) -> float:
    total = 0.0
    for child in stack.parsers:
        total += cpu_seconds(child.pid) + reaped_children_cpu_seconds(child.pid)
        for pid, cmd in children(child.pid).items():
            if b"parser_svc.child.zygote" in cmd:
                total += cpu_seconds(pid)
    for child in stack.gateways:
        total += cpu_seconds(child.pid)
    if stack.redis is not None and stack.redis.proc is not None:
        total += cpu_seconds(stack.redis.proc.pid)
    return total


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))
