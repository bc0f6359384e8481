"""Webhook signatures, the Standard Webhooks way: the tenants' secrets (read from
DOCPARSE_WEBHOOK_SECRETS_FILE), the `webhook-signature` HMAC, the stable `webhook-id` and the
signed body. The rest of the webhook path: parser_svc/webhooks/callbacks.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
from pathlib import Path

from google.protobuf import json_format

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse.v1 import job_pb2
from docparse_server.errors import error

log = logging.getLogger(__name__)


def config_error(message: str) -> DocparseError:
    """WEBHOOK_CONFIG_INVALID: a webhook setting (the secrets file, the allow-list) is unusable."""
    return error(ErrorReason.WEBHOOK_CONFIG_INVALID, message)


def decode_secret(secret: str) -> bytes:
    """The key of a `whsec_<base64>` secret (what the standardwebhooks libraries take)."""
    if not secret.startswith("whsec_"):
        raise ValueError("a webhook secret is whsec_ followed by base64")
    key = base64.b64decode(secret[len("whsec_") :] + "==", validate=False)
    if len(key) < 16:
        raise ValueError("a webhook secret needs at least 16 bytes of key")
    return key


class WebhookSecrets:
    """tenant -> {secret name -> key}, from DOCPARSE_WEBHOOK_SECRETS_FILE; re-read when the
    file changes (a file that became unreadable keeps the last good secrets, and says so)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._secrets: dict[str, dict[str, bytes]] = {}
        if path is not None:
            self._reload(strict=True)

    @property
    def configured(self) -> bool:
        return self.path is not None

    def _reload(self, *, strict: bool) -> None:
        assert self.path is not None
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp == self._stamp:
                return
            data = json.loads(self.path.read_text())
            if not isinstance(data, dict):
                raise ValueError("the file must hold an object of tenants")
            loaded: dict[str, dict[str, bytes]] = {}
            for tenant, named in data.items():
                if not isinstance(named, dict):
                    raise ValueError(f"tenant {tenant!r}: an object of named secrets expected")
                loaded[str(tenant)] = {str(k): decode_secret(str(v)) for k, v in named.items()}
        except (OSError, ValueError) as err:
            if strict:
                raise config_error(f"DOCPARSE_WEBHOOK_SECRETS_FILE {self.path}: {err}") from err
            log.error("webhook secrets not reloaded, the last good ones stay: %s", err)
            return
        self._secrets, self._stamp = loaded, stamp

    def get(self, tenant: str, name: str) -> bytes | None:
        if self.path is None:
            return None
        self._reload(strict=False)
        return self._secrets.get(tenant, {}).get(name)


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """The Standard Webhooks `webhook-signature` value: v1,<base64 HMAC-SHA256 of
    "<id>.<timestamp>.<body>">."""
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def message_id(job_id: str, state: str) -> str:
    """Stable per job and terminal state: every attempt and every re-run sends the same."""
    return f"msg_{job_id}_{state.lower()}"


def payload(job: job_pb2.Job, state: str) -> bytes:
    data = json_format.MessageToDict(
        job, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    envelope = {
        "type": f"job.{state.lower()}",
        "timestamp": job.update_time.ToJsonString(),
        "data": data,
    }
    return json.dumps(envelope, separators=(",", ":")).encode()
