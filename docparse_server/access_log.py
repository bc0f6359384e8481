"""Which calls get an access line: DOCPARSE_ACCESS_LOG (parser_svc) and
DOCPARSE_GATEWAY_ACCESS_LOG (gateway), one of

- `quiet_reads` (the default): every call except a successful unary read of the docparse API
  (GetStatus, GetBatch, ListJobs: the polls, most of a busy server's calls; a failed one still
  gets its line, without the peer);
- `all`: every call (`true`, `1`, `yes` read as this, as they did when the setting was on/off);
- `off`: none (`false`, `0`, `no`); job events are logged all the same.

Here, apart from the interceptor that writes the lines, so the settings import nothing of
grpc (a parse child reads its options from them).
"""

from __future__ import annotations

from typing import Any, Literal

AccessLog = Literal["all", "quiet_reads", "off"]
_WORDS = {"true": "all", "1": "all", "yes": "all", "false": "off", "0": "off", "no": "off"}


def access_log_setting(value: Any) -> Any:
    """A settings validator (mode "before"): the old on/off values read as they did."""
    if isinstance(value, bool):
        return "all" if value else "off"
    if isinstance(value, str):
        word = value.strip().lower()
        return _WORDS.get(word, word)
    return value
