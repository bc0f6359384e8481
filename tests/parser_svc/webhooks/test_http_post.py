"""aiohttp is the webhook POST's (parser_svc/webhooks/http_post.py): a replica that delivers no
webhooks does not pay its import (~0.25 s of every replica's start); one that does loads it when
its dispatcher starts (tests/parser_svc/webhooks/test_webhooks.py delivers through it)."""

from __future__ import annotations

import subprocess
import sys


def loaded(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint('aiohttp' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_a_replica_without_webhooks_does_not_import_aiohttp() -> None:
    assert loaded("import parser_svc.server") == "False"


def test_the_webhook_post_imports_it() -> None:
    assert loaded("import parser_svc.webhooks.http_post") == "True"
