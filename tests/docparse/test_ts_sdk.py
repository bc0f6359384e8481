"""The TypeScript SDK (clients/typescript) against a real stack, and its generated code's drift.

One stack as a production gateway is set up: API keys required, TLS only, and parser_svc
ending every connection after 1.5 s (max_connection_age), so a watch longer than that is cut
under the gateway. Each test runs one file of the SDK's own node:test suite (compiled by
`make ts-sdk`, or here when run alone) with the gateway's address, a key, the CA and a folder
of documents in its environment. Skipped where node or npm is missing.
"""

from __future__ import annotations

import base64
import filecmp
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from docparse.local.stack import LocalStack
from docparse_server.tenancy import key_digest
from tests.conftest import auth_env, make_stack
from tests.fixtures import images
from tests.helpers import make_pdf

REPO = Path(__file__).resolve().parents[2]
SDK = REPO / "clients" / "typescript"
GENERATED = SDK / "src" / "gen"
KEY = "key-of-the-typescript-tests"
ADMIN_KEY = "admin-key-of-the-typescript-tests"  # an operator's: GetTenantShares
KEYS: dict[str, object] = {
    "keys": [
        {"sha256": key_digest(KEY), "tenant": "typescript"},
        {"sha256": key_digest(ADMIN_KEY), "tenant": "typescript-ops", "admin": True},
    ]
}
TOKEN = "internal-secret-for-the-typescript-tests"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


@pytest.fixture(scope="session")
def node() -> str:
    """node, with the SDK's pinned modules installed (`npm ci`, as `make ts-sdk` does, when
    missing) and its TypeScript compiled to dist/."""
    node_bin, npm_bin = shutil.which("node"), shutil.which("npm")
    if node_bin is None or npm_bin is None:
        pytest.skip("node and npm are needed for the TypeScript SDK tests (not on PATH)")
    tools = ("tsc", "buf", "protoc-gen-es", "biome")
    if not all((SDK / "node_modules" / ".bin" / tool).exists() for tool in tools):
        npm(npm_bin, "ci", "--no-audit", "--no-fund")
    npm(npm_bin, "run", "build")
    return node_bin


def npm(npm_bin: str, *args: str) -> None:
    done = subprocess.run(
        [npm_bin, "--prefix", str(SDK), *args],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"npm {' '.join(args)} in {SDK} failed:\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ts-documents")
    (folder / "two-pages.pdf").write_bytes(make_pdf(2, "short"))
    (folder / "twelve-pages.pdf").write_bytes(make_pdf(12, "typescript"))
    (folder / "forty-pages.pdf").write_bytes(make_pdf(40, "long"))
    (folder / "thirty-pages.pdf").write_bytes(make_pdf(30, "streamed"))
    (folder / "photo.pdf").write_bytes(images.image_pdf())  # a JPEG on page 1, pixels on page 2
    return folder


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost: (cert, key)."""
    folder = tmp_path_factory.mktemp("ts-tls")
    cert, key = folder / "gateway.pem", folder / "gateway.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, certificate: tuple[Path, Path]
) -> Iterator[LocalStack]:
    cert, key = certificate
    root = tmp_path_factory.mktemp("ts-sdk")
    secrets = root / "webhook-secrets.json"
    secrets.write_text(json.dumps({"typescript": {"local": WEBHOOK_SECRET}}))
    with make_stack(
        root / "stack",
        replicas=2,
        gateways=1,
        extra_env={
            **auth_env(KEYS, TOKEN),
            "DOCPARSE_WEBHOOK_SECRETS_FILE": str(secrets),  # callbacks to 127.0.0.1 (the test's)
            "DOCPARSE_WEBHOOK_ALLOW_CIDRS": "127.0.0.1/32",
            "DOCPARSE_WEBHOOK_POLL_S": "0.1",
            "DOCPARSE_GATEWAY_TLS_CERT_FILE": str(cert),
            "DOCPARSE_GATEWAY_TLS_KEY_FILE": str(key),
            "DOCPARSE_MAX_CONNECTION_AGE_MS": "1500",
            "DOCPARSE_MAX_CONNECTION_AGE_GRACE_MS": "300",
            "DOCPARSE_PARSE_PAGE_DELAY_MS": "100",
        },
    ) as running:
        yield running


def run_suite(
    node: str, name: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """One compiled test file of the SDK's suite; fails the pytest test with node's report."""
    done = subprocess.run(
        [node, "--test", "--test-reporter=tap", str(SDK / "dist" / "test" / name)],
        capture_output=True, text=True, timeout=300, check=False, cwd=SDK,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    report = done.stdout + done.stderr
    assert done.returncode == 0, f"node --test {name} failed:\n{report}"
    passed = re.search(r"^# pass (\d+)$", done.stdout, re.MULTILINE)
    assert passed and int(passed.group(1)) > 0, f"node ran no test of {name}:\n{report}"
    assert re.search(r"^# fail 0$", done.stdout, re.MULTILINE), report
    return done


def live(node: str, name: str, stack: LocalStack, documents: Path, cert: Path) -> str:
    env = {
        "DOCPARSE_TARGET": stack.gateway_addresses[0],
        "DOCPARSE_API_KEY": KEY,
        "DOCPARSE_TEST_ADMIN_API_KEY": ADMIN_KEY,
        "DOCPARSE_TLS_CA": str(cert),
        "DOCPARSE_TEST_FILES": str(documents),
        "DOCPARSE_TEST_WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    return run_suite(node, f"live/{name}", env).stdout


@pytest.fixture()
def run_live(
    node: str, stack: LocalStack, documents: Path, certificate: tuple[Path, Path]
) -> Callable[[str], str]:
    """Runs one live test file against the stack; returns node's report."""
    return lambda name: live(node, name, stack, documents, certificate[0])


@pytest.mark.slow  # builds the SDK, runs node
def test_offline_decisions(node: str) -> None:
    """Retry table, resume-by-version, result checksum and error decoding, with no server."""
    run_suite(node, "offline.test.js")


def test_submit_sync_and_async_answers(run_live: Callable[[str], str]) -> None:
    """A sync answer is final, an async one is waited for; a repeated request_id is one job."""
    run_live("submit.test.js")


def test_watch_resumes_across_a_server_cut_stream(run_live: Callable[[str], str]) -> None:
    """Versions strictly increase across the cuts; each resume is after a version yielded."""
    report = run_live("watch.test.js")
    print(*re.findall(r"^# (records=.*)$", report, re.MULTILINE))  # shown with -s / -rP


def test_stream_pages_resumes_from_its_cursor(run_live: Callable[[str], str]) -> None:
    """streamPages: drafts while the job runs, a stream the server cuts resumed after the
    last cursor, the finals equal to the result's pages."""
    report = run_live("pages.test.js")
    print(*(line for line in report.splitlines() if "resumes=" in line), sep="\n")


def test_leaving_a_watch_or_a_page_stream_early_lets_node_exit(
    run_live: Callable[[str], str],
) -> None:
    """A `break` out of watch() or streamPages() ends the call (connect gives a server stream
    no `return`): the process exits at once instead of at the call's deadline."""
    run_live("leaving.test.js")


def test_result_is_downloaded_and_verified(run_live: Callable[[str], str]) -> None:
    run_live("result.test.js")


def test_failed_reason_and_refused_upload(run_live: Callable[[str], str]) -> None:
    """JobFailed CORRUPT_DOCUMENT; INVALID_ARGUMENT UNSUPPORTED_FORMAT at once, no retry."""
    run_live("failed.test.js")


def test_unknown_job_is_not_found(run_live: Callable[[str], str]) -> None:
    run_live("not-found.test.js")


def test_api_key_and_tls_are_required(run_live: Callable[[str], str]) -> None:
    """UNAUTHENTICATED API_KEY_MISSING / API_KEY_INVALID without retries; a client that does
    not trust the gateway's CA, or speaks plaintext, never reaches the service."""
    run_live("auth.test.js")


def test_listing_pages_and_limits(run_live: Callable[[str], str]) -> None:
    """listJobs / iterJobPages / iterJobs: every job once, newest first, pages no larger than
    asked, a limit that leaves the token right after it; a bad token is final."""
    run_live("listing.test.js")


def test_tenant_shares_for_admin_keys_only(run_live: Callable[[str], str]) -> None:
    """tenantShares with the admin key: fair admission on, the replicas' bulk slots, a running
    job of the test's tenant counted; with the tenant's key PERMISSION_DENIED ADMIN_ONLY, at
    once."""
    run_live("shares.test.js")


def test_batches_created_read_and_watched(run_live: Callable[[str], str]) -> None:
    """createBatch (same request_id, same batch), watchBatch across cut streams to the final
    state, getBatch; an unknown batch is NOT_FOUND BATCH_NOT_FOUND."""
    run_live("batches.test.js")


def test_assets_listed_and_fetched(run_live: Callable[[str], str]) -> None:
    """listAssets with each image's page; getAsset's bytes match their sha256."""
    run_live("assets.test.js")


def test_callbacks_are_delivered_signed(run_live: Callable[[str], str]) -> None:
    """A submit's and a batch's callback reach a receiver of the test's, signed; an unknown
    secret is refused at submit."""
    run_live("callbacks.test.js")


def test_readme_example_runs(
    node: str, stack: LocalStack, certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    """clients/typescript/README.md's example, as a user would paste it: type-checked by tsc
    (strict) as TypeScript, then run as JavaScript (it is both), importing the package by its
    name, from the repository's root."""
    readme = (SDK / "README.md").read_text()
    example = re.search(r"^```ts\n(.*?)^```$", readme, re.MULTILINE | re.DOTALL)
    assert example, "the README has no ```ts block"
    # Inside the package, its own name resolves to it (package self-reference).
    checked = SDK / f".readme-check-{tmp_path.name}"
    checked.mkdir()
    try:
        (checked / "example.ts").write_text(example.group(1))
        (checked / "tsconfig.json").write_text(
            json.dumps({"extends": "../tsconfig.json", "compilerOptions": {"noEmit": True,
                        "rootDir": "."}, "include": ["example.ts"]})
        )  # fmt: skip
        tsc = subprocess.run(
            [str(SDK / "node_modules" / ".bin" / "tsc"), "-p", str(checked / "tsconfig.json")],
            capture_output=True, text=True, timeout=120, check=False, cwd=SDK,
        )  # fmt: skip
    finally:
        shutil.rmtree(checked)
    assert tsc.returncode == 0, f"the README's example does not type-check:\n{tsc.stdout}"
    script = SDK / "dist" / f"readme-example-{tmp_path.name}.mjs"
    script.write_text(example.group(1))
    try:
        done = subprocess.run(
            [node, str(script)],
            capture_output=True, text=True, timeout=120, check=False, cwd=REPO,
            env={**os.environ, "DOCPARSE_TARGET": stack.gateway_addresses[0],
                 "DOCPARSE_API_KEY": KEY, "DOCPARSE_TLS_CA": str(certificate[0])},
        )  # fmt: skip
    finally:
        script.unlink()
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    records = [line for line in lines if line.startswith("version=")]
    assert records[-1].endswith("state=SUCCEEDED done=12"), done.stdout
    assert "pages=12" in lines
    assert lines[-1] == "error: NOT_FOUND JOB_NOT_FOUND", done.stdout


@pytest.mark.slow  # builds the SDK, runs node
def test_lint_and_format(node: str) -> None:
    """Biome's linter (recommended rules) and formatter are clean on the SDK's own code (tsc
    --strict already passed in the build), as ruff is on the Python."""
    done = subprocess.run(
        [str(SDK / "node_modules" / ".bin" / "biome"), "ci", "--colors=off"],
        capture_output=True, text=True, timeout=120, check=False, cwd=SDK,
    )  # fmt: skip
    assert done.returncode == 0, f"biome ci (fix with npm run format):\n{done.stdout}{done.stderr}"


@pytest.mark.slow  # builds the SDK, runs buf
def test_generated_code_matches_protos(node: str, tmp_path: Path) -> None:
    """The committed src/gen is what `make ts-proto` generates from protos/ (like proto-check),
    with the buf that `make tools` installs for lint and tests/docparse/test_buf_curl.py."""
    pinned = json.loads((SDK / "package.json").read_text())["devDependencies"]["@bufbuild/buf"]
    makefile = re.search(r"^BUF_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert makefile and makefile.group(1) == pinned, "pin one buf version in both places"
    buf = SDK / "node_modules" / ".bin" / "buf"
    for source in ("../../protos", "proto"):
        done = subprocess.run(
            [str(buf), "generate", source, "--template", "buf.gen.yaml", "-o", str(tmp_path)],
            capture_output=True, text=True, timeout=120, check=False, cwd=SDK,
        )  # fmt: skip
        assert done.returncode == 0, f"buf generate {source} failed:\n{done.stderr}"
    fresh = tmp_path / "src" / "gen"
    stale = _differences(filecmp.dircmp(fresh, GENERATED))
    assert not stale, (
        f"clients/typescript/src/gen is stale ({json.dumps(stale)}): run `make ts-proto` and commit"
    )


def _differences(compared: filecmp.dircmp[str]) -> list[str]:
    found = [
        *(f"changed {name}" for name in compared.diff_files),
        *(f"missing {name}" for name in compared.left_only),
        *(f"extra {name}" for name in compared.right_only),
        *(f"unreadable {name}" for name in compared.funny_files),
    ]
    for sub in compared.subdirs.values():
        found.extend(_differences(sub))
    return found
