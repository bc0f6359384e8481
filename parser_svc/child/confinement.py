"""What a parse process does to itself: the limits it sets on itself before it reads the
document, dying with its parent, and watching its own address space. Used by the parse child
(parse_child.py), the fork server it is forked from (zygote.py) and the siblings that read a
long PDF's page ranges (page_siblings.py).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable

from parser_svc.child.no_network import deny_network

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """The parse must not outlive its worker (a killed worker's job is retried elsewhere).
    `parent` is the worker's pid when known: a parent that died before the signal was armed
    shows as another parent (init or a subreaper)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1 or (parent is not None and os.getppid() != parent):
        os._exit(1)


# Past this share of its address-space limit a process says so, so that a crash in C that
# follows (a failed allocation) is reported as the memory it was, not as a parser bug.
MEMORY_HIGH_FRACTION = 0.75


def vm_size_kb() -> int:
    """This process's address space (VmSize), in KB; 0 where /proc does not say."""
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmSize:"):
                return int(line.split()[1])
    return 0


def apply_limits(cpu_s: int, memory_mb: int) -> None:
    """Called by the child on itself before it reads the document (no preexec_fn: forking a
    threaded gRPC process with Python code between fork and exec is unsafe)."""
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    deny_network()


# A thread of a parse process (its memory watch, its drafts' sender) reserves this much stack:
# RLIMIT_AS counts reservations, and these threads call little.
SMALL_STACK = 256 * 1024


def start_small_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """A daemon thread running `target` with a SMALL_STACK stack, started."""
    threading.stack_size(SMALL_STACK)
    try:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
    finally:
        threading.stack_size(0)
    return thread
