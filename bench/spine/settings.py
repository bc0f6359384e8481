"""What the spine benchmark's scenarios share: its goals, the channel options of its clients,
the fencing token of its writes, and which stack the goals are judged on."""

from __future__ import annotations

from typing import Any

from docparse.local.stack import LocalStack
from gateway.settings import GatewaySettings
from parser_svc.settings import Settings

SERVICE = "docparse.v1.ParserService"
FENCE = "bench-token:0"
# Separate TCP connections per channel (grpc otherwise shares subchannels between channels).
CHANNEL_OPTIONS: list[tuple[str, Any]] = [("grpc.use_local_subchannel_pool", 1)]

TIMELINE_S = 0.5
GOALS = {
    "direct_over_bare": 0.60,
    "gateway_over_bare": 0.30,
    "watch_p99_ms": 20.0,
    "watch_missed_terminal": 0,
}


def default_config() -> str:
    """parser_svc's and the gateway's default event loops, as "P+G"."""
    return "+".join(
        str(cls.model_fields["event_loop"].default) for cls in (Settings, GatewaySettings)
    )


def default_loop(stacks: dict[str, LocalStack]) -> str:
    """The stack the goals are judged on: the settings' defaults when they were measured."""
    return default_config() if default_config() in stacks else next(iter(stacks))


# The module the benchmark's helper processes run (bench.harness.children.start_child).
CHILDREN = "bench.spine.children"
