"""`docparse up` without API keys (dev mode), as a web page in the developer's browser sees it:
everything on loopback only, other sites' posts refused before anything is stored, and a
startup message that says what is really enforced."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from docparse.ports import free_port
from docparse_server.tenancy import key_digest
from tests.helpers import Up, make_pdf

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    data = tmp_path_factory.mktemp("dev-mode")
    up = Up("--replicas", "1", "--port", str(free_port()), "--http-port", str(free_port()),
            "--data-dir", str(data / "run"), cwd=ROOT, env={"DOCPARSE_ROLE": "api"})  # fmt: skip
    yield up
    assert up.stop() == 0


def post(url: str, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(url, data=make_pdf(1), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def listening_addresses(pids: set[int]) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp* shows them) of the sockets these processes
    listen on."""
    inodes: set[str] = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                found.add(fields[1].rsplit(":", 1)[0])
    return found


def descendants(pid: int) -> set[int]:
    children = {pid}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            children |= descendants(int(child))
    return children


# 127.0.0.1, ::1 and ::ffff:127.0.0.1, as /proc/net/tcp* write them
LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


def test_dev_mode_listens_on_loopback_only(dev: Up) -> None:
    addresses = listening_addresses(descendants(dev.proc.pid))
    assert addresses and addresses <= LOOPBACK, addresses
    said = "".join(dev.output)
    assert "off: dev mode, every call is the tenant 'default'" in said
    assert "127.0.0.1 only" in said


def test_other_sites_posts_are_refused_before_anything_is_stored(dev: Up) -> None:
    """A form post or no-cors fetch from another site's page (Sec-Fetch-Site cross-site or
    same-site, i.e. another port on localhost; or, from an older browser, a foreign Origin)
    is 403 CROSS_SITE_REQUEST and leaves no upload behind; the gateway's own page
    (same-origin), a typed URL (none) and non-browser clients (neither header) are served."""
    http = dev.ready["http"].split(",")[0]
    uploads = Path(dev.ready["data"]) / "blobs"
    url = f"{http}/v1/jobs?file_name=a.pdf"
    host = http.removeprefix("http://")

    def stored() -> list[Path]:
        return [p for p in uploads.rglob("*") if p.is_file()] if uploads.exists() else []

    before = stored()
    for headers in (
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://localhost:3000"},
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
    ):
        status, body = post(url, headers)
        assert (status, body["reason"]) == (403, "CROSS_SITE_REQUEST"), (headers, body)
        status, body = post(f"{http}/v1/batches", headers)
        assert (status, body["reason"]) == (403, "CROSS_SITE_REQUEST"), (headers, body)
    assert stored() == before
    for headers in (
        {"Sec-Fetch-Site": "same-origin", "Origin": http},
        {"Sec-Fetch-Site": "none"},
        {"Origin": f"http://{host}"},
        {},
    ):
        status, body = post(url, headers)
        assert status == 202 and body["job_id"], (headers, body)


@pytest.mark.stack  # `docparse up` in its body
def test_the_startup_message_says_what_is_enforced(tmp_path: Path) -> None:
    """API keys in the environment without DOCPARSE_GATEWAY_AUTH=required are not checked,
    and `docparse up` says so; --api-keys-file enforces them and it says that, never "dev
    mode". Both are asked of the running gateway (a call without a key)."""
    keys = {"keys": [{"sha256": key_digest("k"), "tenant": "me"}]}
    (tmp_path / "keys.json").write_text(json.dumps(keys))
    common = ("--replicas", "1", "--http-port", str(free_port()), "--data-dir")
    env = {"DOCPARSE_ROLE": "api", "DOCPARSE_GATEWAY_API_KEYS": json.dumps(keys)}
    loose = Up(*common, str(tmp_path / "a"), "--port", str(free_port()), cwd=ROOT, env=env)
    try:
        said = "".join(loose.output)
        assert "off (DOCPARSE_GATEWAY_API_KEYS set but not checked): dev mode" in said
    finally:
        assert loose.stop() == 0
    enforced = Up(*common[:2], "--http-port", str(free_port()), "--data-dir", str(tmp_path / "b"),
                  "--port", str(free_port()), "--api-keys-file", str(tmp_path / "keys.json"),
                  cwd=ROOT, env={"DOCPARSE_ROLE": "api"})  # fmt: skip
    try:
        said = "".join(enforced.output)
        assert "on: API keys required" in said and "dev mode" not in said
        status, body = post(f"{enforced.ready['http'].split(',')[0]}/v1/jobs?file_name=a", {})
        assert (status, body["reason"]) == (401, "API_KEY_MISSING")
    finally:
        assert enforced.stop() == 0
