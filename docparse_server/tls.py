"""TLS of the servers' gRPC ports and of the gateway's channel to parser_svc, from PEM files.

Both halves or neither: a certificate without its key (or the reverse) stops the start with
TLS_INCOMPLETE instead of serving plaintext; a file that cannot be read stops it with
FILE_UNREADABLE. Either way the server exits 2 with one error line
(docparse_server.serving.exit_on_startup_error)."""

from __future__ import annotations

from pathlib import Path

import grpc

from docparse.reasons import ErrorReason
from docparse_server.errors import refusal_to_start


def read_pem(path: Path, variable: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise refusal_to_start(
            ErrorReason.FILE_UNREADABLE,
            f"{variable}={path}: {err.strerror or err}",
            {"file": str(path)},
        ) from err


def server_credentials(
    cert_file: Path | None, key_file: Path | None, variables: tuple[str, str]
) -> grpc.ServerCredentials | None:
    """TLS server credentials when both files are set, None (plaintext) when neither is.
    `variables`: the settings' environment names, for the message."""
    if cert_file is None and key_file is None:
        return None
    if cert_file is None or key_file is None:
        cert_var, key_var = variables
        raise refusal_to_start(
            ErrorReason.TLS_INCOMPLETE,
            f"{cert_var} and {key_var} go together: only "
            f"{cert_var if cert_file else key_var} is set, refusing to serve plaintext",
        )
    key = read_pem(key_file, variables[1])
    return grpc.ssl_server_credentials([(key, read_pem(cert_file, variables[0]))])


def channel_credentials(ca_file: Path | None, variable: str) -> grpc.ChannelCredentials | None:
    """Channel credentials trusting the CA certificates in `ca_file`; None: plaintext."""
    if ca_file is None:
        return None
    return grpc.ssl_channel_credentials(root_certificates=read_pem(ca_file, variable))
