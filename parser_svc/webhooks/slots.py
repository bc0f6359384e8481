"""Who gets the dispatcher's delivery slots, and which hosts are left alone for a while.

One tenant's callbacks to a receiver that never answers used to hold every slot of a round
for the whole timeout, and the round waited for all of them: another tenant's webhook came
minutes late. Here a delivery starts as soon as a slot is free (the dispatcher does not wait
for a round), within three caps: all deliveries (`webhook_concurrency`), one tenant's
(`webhook_per_tenant`) and one host's (`webhook_per_host`); tenants with deliveries ready take
turns (the one that started one least recently goes first). A host whose deliveries time out
`webhook_circuit_after` times in a row is left alone (its circuit is open) for
`webhook_circuit_open_s`, doubling while it keeps timing out; its deliveries wait in the
outbox meanwhile, holding no slot, and are not counted as attempts. Then deliveries try it
again (at most `webhook_per_host` at once): an answer (any answer) closes the circuit, another
timeout opens it again for twice as long.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from parser_svc.observability import WEBHOOK_HELD_BACK, WEBHOOK_SLOTS


def host_of(url: str) -> str:
    try:
        parts = urlsplit(url)
        return f"{parts.hostname or ''}:{parts.port or ''}"
    except ValueError:
        return ""


@dataclass
class Ready:
    delivery: str
    spec: dict[str, str]
    record: dict[str, str]
    tenant: str = field(init=False)
    host: str = field(init=False)

    def __post_init__(self) -> None:
        self.tenant = self.spec.get("tenant", "")
        self.host = host_of(self.spec.get("url", ""))


class Circuits:
    """Consecutive timeouts per host, and until when an open circuit keeps deliveries away."""

    def __init__(self, after: int, open_s: float, max_open_s: float) -> None:
        self.after = max(1, after)
        self.open_ms = int(open_s * 1000)
        self.max_open_ms = int(max(open_s, max_open_s) * 1000)
        self._timeouts: dict[str, int] = {}
        self._open_until: dict[str, int] = {}

    def open_until(self, host: str, now: int) -> int:
        """When the circuit of `host` half-opens (ms), or 0 when deliveries to it may start."""
        until = self._open_until.get(host, 0)
        return until if until > now else 0

    def answered(self, host: str) -> None:
        self._timeouts.pop(host, None)
        self._open_until.pop(host, None)

    def timed_out(self, host: str, now: int) -> None:
        count = self._timeouts.get(host, 0) + 1
        self._timeouts[host] = count
        if count >= self.after:
            doublings = min(count - self.after, 20)
            self._open_until[host] = now + min(self.open_ms * 2**doublings, self.max_open_ms)


class Slots:
    """Deliveries on the wire, in all, per tenant and per host, and the ready ones waiting for a
    slot, per tenant (taken in turns)."""

    def __init__(self, total: int, per_tenant: int, per_host: int) -> None:
        self.total = max(1, total)
        self.per_tenant = per_tenant or self.total
        self.per_host = per_host or self.total
        self.running = 0
        self._tenants: dict[str, int] = {}
        self._hosts: dict[str, int] = {}
        self._ready: dict[str, deque[Ready]] = {}
        self._started: dict[str, int] = {}  # when each tenant last started one
        self._clock = 0
        self.known: set[str] = set()  # deliveries waiting here or on the wire
        self.on_the_wire: set[str] = set()

    def add(self, ready: Ready) -> None:
        self._ready.setdefault(ready.tenant, deque()).append(ready)
        self.known.add(ready.delivery)

    def waiting(self) -> int:
        return sum(len(line) for line in self._ready.values())

    def drop_waiting(self) -> None:
        """Forgets the ready deliveries not started (the lease is gone: another replica's
        dispatcher takes them once their claims run out)."""
        for line in self._ready.values():
            for ready in line:
                self.known.discard(ready.delivery)
        self._ready.clear()

    def _startable(self, line: deque[Ready]) -> Ready | None:
        for ready in line:
            if self._hosts.get(ready.host, 0) < self.per_host:
                return ready
        return None

    def next_batch(self) -> list[Ready]:
        """Ready deliveries to start now, tenants in turns, within the caps (each one's slot is
        taken: `release` it when it ends)."""
        chosen: list[Ready] = []
        while self.running < self.total:
            candidates = {
                tenant: ready
                for tenant, line in self._ready.items()
                if self._tenants.get(tenant, 0) < self.per_tenant
                and (ready := self._startable(line)) is not None
            }
            if not candidates:
                break
            tenant = min(candidates, key=lambda t: self._started.get(t, 0))
            ready = candidates[tenant]
            line = self._ready[tenant]
            line.remove(ready)
            if not line:
                del self._ready[tenant]
            self._take(ready)
            chosen.append(ready)
        for tenant, line in self._ready.items():
            cap = "tenant" if self._tenants.get(tenant, 0) >= self.per_tenant else "host"
            WEBHOOK_HELD_BACK.labels(tenant, cap).inc(len(line))
        return chosen

    def take_out(self, delivery: str) -> None:
        """A waiting delivery leaves (its host's circuit opened): back to the outbox."""
        for tenant, line in list(self._ready.items()):
            for ready in line:
                if ready.delivery == delivery:
                    line.remove(ready)
                    if not line:
                        del self._ready[tenant]
                    self.known.discard(delivery)
                    return

    def hosts_waiting(self) -> set[str]:
        return {ready.host for line in self._ready.values() for ready in line}

    def waiting_for(self, host: str) -> list[Ready]:
        return [ready for line in self._ready.values() for ready in line if ready.host == host]

    def _take(self, ready: Ready) -> None:
        self.running += 1
        self.on_the_wire.add(ready.delivery)
        self._tenants[ready.tenant] = self._tenants.get(ready.tenant, 0) + 1
        self._hosts[ready.host] = self._hosts.get(ready.host, 0) + 1
        self._clock += 1
        self._started[ready.tenant] = self._clock
        WEBHOOK_SLOTS.labels(ready.tenant).inc()

    def release(self, ready: Ready) -> None:
        self.running -= 1
        self.known.discard(ready.delivery)
        self.on_the_wire.discard(ready.delivery)
        for counts, key in ((self._tenants, ready.tenant), (self._hosts, ready.host)):
            left = counts.get(key, 1) - 1
            if left > 0:
                counts[key] = left
            else:
                counts.pop(key, None)
        if ready.tenant not in self._tenants and ready.tenant not in self._ready:
            self._started.pop(ready.tenant, None)
        WEBHOOK_SLOTS.labels(ready.tenant).dec()
