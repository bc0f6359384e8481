"""The dispatcher's slots and circuits on their own (parser_svc/webhooks/slots.py): tenants take
turns within the total, tenant and host caps; a freed slot goes to the next waiting; a host
that keeps timing out is left alone for a doubling while and an answer closes its circuit."""

from __future__ import annotations

from parser_svc.webhooks.slots import Circuits, Ready, Slots


def ready(delivery: str, tenant: str, host: str = "a.example") -> Ready:
    return Ready(delivery, {"tenant": tenant, "url": f"https://{host}/hook"}, {})


def names(batch: list[Ready]) -> list[str]:
    return [item.delivery for item in batch]


def test_tenants_take_turns_within_the_caps() -> None:
    slots = Slots(total=4, per_tenant=2, per_host=3)
    for i in range(5):
        slots.add(ready(f"a{i}", "A", "hole.example"))
    slots.add(ready("b0", "B", "hole.example"))
    slots.add(ready("b1", "B", "fine.example"))
    first = slots.next_batch()
    # A, B, A in turns; A is at its cap of 2 and the hole at its cap of 3: B's other host
    assert names(first) == ["a0", "b0", "a1", "b1"]
    assert slots.running == 4 and slots.waiting() == 3
    assert slots.next_batch() == []  # every slot taken
    slots.release(first[3])  # b1 ends: A is at its cap, nobody else waits
    assert slots.next_batch() == []
    slots.release(first[0])  # a0 ends: A's next starts
    assert names(slots.next_batch()) == ["a2"]
    assert "a0" not in slots.known and "a3" in slots.known
    slots.drop_waiting()
    assert slots.waiting() == 0 and "a3" not in slots.known and "a2" in slots.known


def test_a_host_that_keeps_timing_out_is_left_alone() -> None:
    circuits = Circuits(after=3, open_s=10, max_open_s=25)
    host = "hole.example:"
    for now in (0, 1, 2):
        assert circuits.open_until(host, now) == 0
        circuits.timed_out(host, now)
    assert circuits.open_until(host, 3) == 10_002  # open 10 s after the third timeout
    assert circuits.open_until(host, 10_002) == 0  # half-open: deliveries try again
    circuits.timed_out(host, 10_002)
    assert circuits.open_until(host, 10_003) == 30_002  # twice as long
    circuits.timed_out(host, 30_002)
    assert circuits.open_until(host, 30_003) == 55_002  # at most 25 s
    circuits.answered(host)
    assert circuits.open_until(host, 30_003) == 0
    circuits.timed_out(host, 40_000)  # one timeout after an answer: still closed
    assert circuits.open_until(host, 40_001) == 0
