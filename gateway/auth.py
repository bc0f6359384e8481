"""The gateway's edge authentication: API key → tenant identity forwarded to parser_svc."""

from __future__ import annotations

from collections.abc import Iterable

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse_server.errors import error
from docparse_server.tenancy import RESERVED_PREFIX, ApiKeys, Caller, identity_metadata
from gateway.settings import GatewaySettings

# Never forwarded upstream: credentials stay at the edge, identity is the gateway's to set.
_DROPPED = ("authorization", "x-api-key")


class GatewayAuth:
    def __init__(self, settings: GatewaySettings) -> None:
        self.required = settings.auth == "required"
        self.keys = ApiKeys.load(settings.api_keys, settings.api_keys_file)
        self.internal_token = settings.internal_token
        # Identity metadata per caller, built once: the limits header is JSON, and the callers
        # are the configured keys' (and dev mode's one).
        self._identities: dict[Caller, tuple[tuple[str, str], ...]] = {}

    def caller(self, metadata: Iterable[tuple[str, str | bytes]]) -> Caller:
        """The caller's tenant and limits; DocparseError UNAUTHENTICATED without a valid key."""
        return self.keys.identify(metadata) if self.required else Caller()

    def refusal(self, metadata: Iterable[tuple[str, str | bytes]]) -> DocparseError:
        """Why a call the gateway turned away at its start is refused: the key check's own
        error (API_KEY_MISSING, API_KEY_INVALID). The keys are read once, so the check fails
        the same way again; were it to pass now, the call stays refused, as API_KEY_INVALID."""
        try:
            self.caller(metadata)
        except DocparseError as err:
            return err
        return error(ErrorReason.API_KEY_INVALID, "the API key was refused when the call began")

    def upstream_metadata(
        self, metadata: Iterable[tuple[str, str | bytes]]
    ) -> list[tuple[str, str | bytes]]:
        """The client's metadata minus credentials and forged identity, plus the real one."""
        incoming = list(metadata)
        caller = self.caller(incoming)
        kept = [
            (k, v) for k, v in incoming if not k.startswith(RESERVED_PREFIX) and k not in _DROPPED
        ]
        identity = self._identities.get(caller)
        if identity is None:
            identity = tuple(identity_metadata(caller, self.internal_token))
            self._identities[caller] = identity
        return [*kept, *identity]
