"""Document parsers. Each runs inside the parse subprocess, never in a server process."""

from __future__ import annotations

from collections.abc import Callable

ProgressFn = Callable[[int, int, str], None]


class ParseFailure(Exception):
    """A document the parser cannot turn into a package, with its stable reason code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
