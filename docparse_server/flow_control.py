"""The HTTP/2 receive window both servers and the gateway's upstream channel announce: grpc
options only, no grpc import (the settings objects read the default, and the parsers read
parser_svc's settings without importing gRPC)."""

from __future__ import annotations

# The HTTP/2 receive window a server or channel announces per stream, in bytes (the stream's
# initial window; the connection's follows the open streams). grpc's default probes the
# bandwidth-delay product and grows the window with it, and a receiver stalled for a moment
# (descheduled on a busy node) measures a huge one: its peer then keeps up to tens of MiB of an
# upload in flight, which lands in the receiver's memory when it wakes (+70-90 MiB per
# replica in tests/parser_svc/api/test_big_batch.py, stalled, against +20 MiB here). A fixed window
# bounds
# what one stream holds to this plus the message being read; it is also the most a stream
# moves per round trip (4 MiB at 10 ms: 400 MiB/s; at 100 ms, 40 MiB/s).
DEFAULT_RECEIVE_WINDOW_BYTES = 4 * 1024 * 1024


def receive_window_options(window_bytes: int) -> list[tuple[str, int]]:
    """Options that fix the per-stream HTTP/2 receive window at `window_bytes` (no BDP probing:
    see DEFAULT_RECEIVE_WINDOW_BYTES)."""
    return [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", window_bytes)]
