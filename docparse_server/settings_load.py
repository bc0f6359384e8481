"""A server's settings from its environment, or a refusal to start that names the variable.

A value the settings cannot use (`DOCPARSE_WORKER_CONCURRENCY=two`, `DOCPARSE_LOG_FORMAT=xml`)
ends the server as every refusal to start does (docparse_server.serving.exit_on_startup_error):
exit code 2, one error line, FAILED_PRECONDITION SETTING_INVALID with metadata `setting`, no
traceback. The line says what each variable takes, never the value it had: a bad value may be
a secret (a token pasted into the wrong variable)."""

from __future__ import annotations

import os
from typing import NoReturn, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from docparse.errors import DocparseError
from docparse.reasons import ErrorReason
from docparse_server import logs
from docparse_server.errors import refusal_to_start
from docparse_server.serving import exit_on_startup_error

S = TypeVar("S", bound=BaseSettings)


def load_settings(service: str, settings_type: type[S]) -> S:
    """`settings_type()` read from the environment; exit 2 with SETTING_INVALID if it fails."""
    try:
        return settings_type()
    except ValidationError as err:
        prefix = env_prefix(settings_type)
        refuse(service, setting_error(err, prefix), prefix)


def env_prefix(settings_type: type[BaseSettings]) -> str:
    return str(settings_type.model_config.get("env_prefix") or "")


def setting_error(err: ValidationError, prefix: str) -> DocparseError:
    """SETTING_INVALID naming each variable and what it takes (pydantic's words, the input
    left out)."""
    problems: dict[str, str] = {}
    for problem in err.errors(include_input=False, include_url=False):
        field = str(problem["loc"][0]) if problem["loc"] else "?"
        problems.setdefault(f"{prefix}{field.upper()}", str(problem["msg"]))
    message = "; ".join(f"{name}: {why}" for name, why in problems.items())
    return refusal_to_start(
        ErrorReason.SETTING_INVALID,
        f"invalid setting: {message}",
        {"setting": ",".join(problems)},
    )


def refuse(service: str, err: DocparseError, prefix: str) -> NoReturn:
    """The error line in the format asked for, when that variable itself is readable."""
    wanted = os.environ.get(f"{prefix}log_format".upper(), "json")
    logs.setup_logging(service, wanted if wanted in ("json", "text") else "json")
    exit_on_startup_error(service, err)
