"""GetTenantShares: the current share of parse slots between tenants, for operators.

Read from fair admission's state in Redis (parser_svc/state/admission.py, `Admission.shares`):
every tenant with jobs queued or running, with the weight its jobs carry, and the lanes' caps.
Only for a caller the gateway marked admin (the key's `admin` flag in its keys file, forwarded
with the identity under the internal token: docparse_server/tenancy.py); every other caller,
a dev-mode one included, gets PERMISSION_DENIED ADMIN_ONLY before anything is read.
"""

from __future__ import annotations

from docparse.reasons import ErrorReason
from docparse.v1 import parser_service_pb2
from docparse_server.errors import error
from parser_svc.settings import Settings
from parser_svc.state.caller_scope import current_caller
from parser_svc.work.queue import JobQueue


def check_admin() -> None:
    """ADMIN_ONLY unless the call's caller is an admin."""
    caller = current_caller.get()
    if caller is None or not caller.admin:
        tenant = caller.tenant if caller else "the caller"
        raise error(
            ErrorReason.ADMIN_ONLY,
            f"GetTenantShares is for operators; the API key of {tenant} is not marked "
            '"admin": true in the gateway\'s keys file',
            {"method": "GetTenantShares"},
        )


async def tenant_shares(
    settings: Settings, queue: JobQueue
) -> parser_service_pb2.GetTenantSharesResponse:
    check_admin()
    answer = parser_service_pb2.GetTenantSharesResponse(
        fair_admission=settings.fair_admission, interactive_reserve=settings.admit_reserve
    )
    if not settings.fair_admission:
        return answer
    shares = await queue.admission.shares()
    answer.bulk_slots = shares.bulk_slots
    answer.interactive_window = shares.window
    answer.bulk_every = shares.bulk_every
    answer.waiting = shares.waiting
    answer.active = shares.active
    for share in sorted(shares.tenants, key=lambda share: share.tenant):
        answer.tenants.add(
            tenant=share.tenant,
            weight=share.weight,
            queued=share.queued,
            pending_interactive=share.pending_interactive,
            pending_bulk=share.pending_bulk,
            running=share.running,
        )
    return answer
