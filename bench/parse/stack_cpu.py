"""CPU a stack spends on a scenario: each process's own time, the parse children its parser_svc
replicas reaped (forked by their fork servers, waited for by the worker) and those still
running, the fork servers, the gateways and the stack's Redis. With it, the best pages/s the
stack could reach on this machine's cores if it kept every core busy: the ceiling its CPU per
page sets, whatever the scheduling."""

from __future__ import annotations

import os

from bench.harness.procfs import cpu_seconds, descendants, reaped_children_cpu_seconds
from docparse.local.stack import LocalStack


def stack_cpu_seconds(stack: LocalStack) -> float:
    return sum(stack_cpu_by_kind(stack).values())


def stack_cpu_by_kind(stack: LocalStack) -> dict[str, float]:
    """The stack's CPU seconds so far: the replicas' own ("replica"), their parse processes
    ("parse": the children they reaped, with the siblings those reaped, and the ones running), the
    fork servers, gateways and Redis. A parse child running at one reading and reaped at the
    next is counted whole at the next (its replica's reaped time), so differences hold."""
    out = dict.fromkeys(("replica", "parse", "fork_server", "gateway", "redis"), 0.0)
    for child in stack.parsers:
        out["replica"] += cpu_seconds(child.pid)
        out["parse"] += reaped_children_cpu_seconds(child.pid)
        for pid, cmd in descendants(child.pid).items():
            if "parser_svc.child.zygote" in cmd:
                out["fork_server"] += cpu_seconds(pid)
            elif "parser_svc.child.parse_child" in cmd:  # running, or a sibling of one
                spent = cpu_seconds(pid) + reaped_children_cpu_seconds(pid)
                out["parse"] += spent if spent == spent else 0.0  # gone meanwhile: nan
    for child in stack.gateways:
        out["gateway"] += cpu_seconds(child.pid)
    if stack.redis is not None and stack.redis.proc is not None:
        out["redis"] += cpu_seconds(stack.redis.proc.pid)
    return out


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))
