"""The caller of the call being answered, for the store to scope every job read to its tenant.

parser_svc.api.callers' interceptor sets `current_caller` for the duration of each docparse.v1
call; work outside a call (queue workers) has no caller, and `current_tenant()` is then None
(no scoping).
"""

from __future__ import annotations

import contextvars

from docparse_server.tenancy import Caller

current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "docparse_caller", default=None
)


def current_tenant() -> str | None:
    caller = current_caller.get()
    return caller.tenant if caller else None
