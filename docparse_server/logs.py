"""Structured logs of both servers: `setup_logging(service, fmt)` puts one stderr handler on
the root logger, writing one JSON object per line (`ts`, `level`, `logger`, `msg`, `service`,
`replica`, `pid`, plus every `extra=` field such as `job_id`, `tenant`, `method`, `code`,
`duration_ms`) or the old text lines with `fmt="text"`. `JsonFormatter.format_now` and
`direct_handler` are the access line's short way past a LogRecord (docparse_server.observability).
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

# The per-RPC lines (docparse_server.observability.RpcObserver).
ACCESS_LOG = logging.getLogger("docparse.access")


# Attributes every LogRecord has; anything else on a record came from `extra=` and is emitted.
_RECORD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


# json.dumps(out, default=str, ensure_ascii=False), without building an encoder per line
_encode = json.JSONEncoder(default=str, ensure_ascii=False).encode


# The string encoder that one uses (ensure_ascii=False: only quotes, backslashes and control
# characters are escaped), and the keys every line starts with.
_json_str: Callable[[str], str] = json.encoder.encode_basestring


_HEAD_KEYS = frozenset({"ts", "level", "logger", "msg", "service", "replica", "pid"})


def _json_value(value: Any) -> str:
    """`value` as `_encode` writes it inside an object (the common types without the encoder's
    machinery; anything else, NaN and infinities included, through it)."""
    kind = type(value)
    if kind is str:
        return _json_str(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return _encode(value)


TEXT_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"


# This process's id, kept up to date in a forked child: os.getpid() is a system call per
# line (glibc caches it no more), about 2 % of a replica's CPU per GetStatus under load.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


class JsonFormatter(logging.Formatter):
    """One JSON object per line. `replica` is the host (the pod name on Kubernetes) and `pid`
    the process: together they are what `x-served-by` says (`<replica>/<pid>`)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service
        self.replica = socket.gethostname()
        self._second = -1
        self._second_text = ""
        self._fixed_pid = -1
        self._fixed_text = ""

    def format(self, record: logging.LogRecord) -> str:
        out = self._head(
            int(record.created), int(record.msecs), record.levelname, record.name,
            record.getMessage(), record.process,
        )  # fmt: skip
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and not key.startswith("_") and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return _encode(out)

    def format_now(self, level: int, name: str, message: str, extra: dict[str, Any]) -> str:
        """What `format` gives for a record made now of these (no exception, no stack), made
        without one and without a dict to encode: the access line's way (`direct_handler`).
        About a third of the record's way (bench/README.md, GetStatus pass 6)."""
        now = time.time_ns()
        msecs = now % 1_000_000_000 // 1_000_000
        parts = [
            '{"ts": "', self._second_of(now // 1_000_000_000), f'.{msecs:03d}Z", "level": ',
            _json_str(logging.getLevelName(level)), ', "logger": ', _json_str(name),
            ', "msg": ', _json_str(message), self._fixed(),
        ]  # fmt: skip
        for key, value in extra.items():
            if not key.startswith("_") and key not in _HEAD_KEYS:
                parts += (", ", _json_str(key), ": ", _json_value(value))
        parts.append("}")
        return "".join(parts)

    def _fixed(self) -> str:
        """', "service": ..., "replica": ..., "pid": N' for this process (a fork has its own)."""
        pid = _pid
        if self._fixed_pid != pid:
            self._fixed_pid = pid
            self._fixed_text = (
                ', "service": ' + _json_str(self.service)
                + ', "replica": ' + _json_str(self.replica)
                + ', "pid": ' + str(pid)
            )  # fmt: skip
        return self._fixed_text

    def _second_of(self, second: int) -> str:
        if second != self._second:  # one strftime per second, not per line
            self._second = second
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return self._second_text

    def _head(
        self, second: int, msecs: int, level: str, name: str, message: str, pid: int | None
    ) -> dict[str, Any]:
        return {
            "ts": f"{self._second_of(second)}.{msecs:03d}Z",
            "level": level,
            "logger": name,
            "msg": message,
            "service": self.service,
            "replica": self.replica,
            "pid": pid,
        }


def direct_handler(logger: logging.Logger, level: int) -> logging.StreamHandler[Any] | None:
    """The handler a line of `logger` at `level` (a level the logger is enabled for) would
    reach, when that is all that would happen to it: the one JSON stream handler of
    `setup_logging` on the root, no filter or other handler on the way. Then a line may be
    formatted and written without a LogRecord (`JsonFormatter.format_now`); otherwise (a
    test's capture, a handler added by an operator) it goes through `Logger.handle`."""
    node: Any = logger
    while node is not None:
        if node.filters or (node.handlers and node is not logging.root):
            return None
        if node is logging.root or not node.propagate:
            break
        node = node.parent
    if node is not logging.root:
        return None
    handlers = logging.root.handlers
    if len(handlers) != 1:
        return None
    handler = handlers[0]
    if (
        type(handler) is not logging.StreamHandler
        or handler.filters
        or level < handler.level
        or type(handler.formatter) is not JsonFormatter
    ):
        return None
    return handler


def setup_logging(
    service: str, fmt: str = "json", level: str = "INFO", *, access_log: bool = True
) -> None:
    """Replaces the root handlers with one stderr handler in the chosen format. Without
    `access_log` (`DOCPARSE_ACCESS_LOG=off`), the per-RPC lines (logger docparse.access) are
    dropped; job events stay. Which calls get one otherwise: `RpcObserver`'s `quiet_reads`."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    ACCESS_LOG.setLevel(logging.NOTSET if access_log else logging.WARNING)
