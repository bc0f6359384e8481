"""grpc.aio reports the server's status, not INTERNAL, when a client-streaming call's write
fails because the server has just ended the call (grpc/grpc#36066; the fix proposed upstream
is grpc/grpc#43486).

A server that rejects an upload on its first message (a language not installed, a size over
the limit, a missing API key) ends the call while the client is still streaming; the client's
next write then fails, and grpcio 1.85's `_StreamRequestMixin._write` marks the call
`INTERNAL: Internal error from Core`, which wins over the server's status whenever the event
loop runs the failed write first (about 1 call in 40 on this machine). The gateway relays
uploads with grpc.aio and so answered INTERNAL where parser_svc had said INVALID_ARGUMENT
LANGUAGE_NOT_INSTALLED; the async SDK would do the same.

`keep_server_status_on_failed_writes()` replaces that one method with grpcio's own, changed
only where the write fails: it waits (up to STATUS_WAIT_S) for the status the server sent and
raises that; only when none comes (Core rejected the write itself) is the call INTERNAL, as
before. Applied once per process, for the grpcio version it was written against only
(pyproject pins it); with another version it does nothing and says so.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc

log = logging.getLogger(__name__)

PATCHED_FOR = "1.85."
STATUS_WAIT_S = 5.0
_installed = False
_refused = False


def keep_server_status_on_failed_writes() -> bool:
    """Installs the change (idempotent); False when this grpcio is not the one it fits."""
    global _installed, _refused
    if _installed or _refused:
        return _installed
    if not grpc.__version__.startswith(PATCHED_FOR):
        _refused = True
        log.warning(
            "grpcio %s: the failed-write status fix (docparse.aio_status) is for %sx; not applied",
            grpc.__version__,
            PATCHED_FOR,
        )
        return False
    from grpc import _common
    from grpc._cython import cygrpc
    from grpc.aio import _call

    async def _write(self: Any, request: Any) -> None:
        # grpcio 1.85.3's _StreamRequestMixin._write, but for the `except cygrpc.InternalError`.
        if self.done():
            raise asyncio.InvalidStateError(_call._RPC_ALREADY_FINISHED_DETAILS)
        if self._done_writing_flag:
            raise asyncio.InvalidStateError(_call._RPC_HALF_CLOSED_DETAILS)
        if not self._metadata_sent.is_set():
            await self._metadata_sent.wait()
            if self.done():
                await self._raise_for_status()

        serialized_request = _common.serialize(request, self._request_serializer)
        try:
            await self._cython_call.send_serialized_message(serialized_request)
        except cygrpc.InternalError as err:
            try:  # the server ended the call: its status is on its way
                await asyncio.wait_for(self._cython_call.status(), STATUS_WAIT_S)
            except TimeoutError:
                self._cython_call.set_internal_error(str(err))
            await self._raise_for_status()
        except asyncio.CancelledError:
            if not self.cancelled():
                self.cancel()
            raise

    _call._StreamRequestMixin._write = _write  # type: ignore[method-assign]
    _installed = True
    return True
