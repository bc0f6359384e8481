"""What the HTTP handlers find on the aiohttp application."""

from __future__ import annotations

import asyncio

from aiohttp import web

from docparse_server.tenancy import StreamSlots
from gateway.http.render_queue import Lanes
from gateway.http.rendering import Renderer
from gateway.http.upstream import Upstream
from gateway.settings import GatewaySettings

SETTINGS = web.AppKey("settings", GatewaySettings)
UPSTREAM = web.AppKey("upstream", Upstream)
# Set when the gateway shuts down: open event streams end so browsers reconnect elsewhere.
CLOSING = web.AppKey("closing", asyncio.Event)
# Set once the gRPC side is SERVING: /healthz answers 503 before it.
SERVING = web.AppKey("serving", asyncio.Event)
# Open event streams (SSE) per tenant on this gateway.
STREAMS = web.AppKey("streams", StreamSlots)
# Renders results (JSON, text, Markdown) in worker processes.
RENDERER = web.AppKey("renderer", Renderer)
# Turns at the render workers, per tenant (round-robin) and bounded; small results apart.
RENDER_LANES = web.AppKey("render_lanes", Lanes)
