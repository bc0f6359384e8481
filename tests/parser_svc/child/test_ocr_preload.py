"""The OCR models a fork server loads at its start (`DOCPARSE_OCR_PRELOAD`): which scripts a
value names, that an unknown one stops the start, and that a fork server that preloaded none
is smaller and its children read a scanned page to the same text as one that preloaded all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.fork_server import ForkServer
from parser_svc.parsers import ocr
from parser_svc.settings import Settings
from tests.fixtures.scans import scan, wer
from tests.helpers import status_kb

SCRIPTS = ("Latin", "Cyrillic", "Arabic", "Han", "Japanese", "Katakana", "Hiragana", "Hangul")


@pytest.mark.parametrize(
    ("value", "scripts"),
    [
        ("all", SCRIPTS),
        (" ALL ", SCRIPTS),
        ("none", ()),
        ("", ()),
        ("latin", ("Latin",)),
        ("Han, latin,han", ("Han", "Latin")),
    ],
)
def test_a_preload_value_names_scripts(value: str, scripts: tuple[str, ...]) -> None:
    assert ocr.preload_scripts(value) == scripts


def test_an_unknown_script_stops_the_start_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCPARSE_OCR_PRELOAD", "latin,klingon")
    with pytest.raises(ValidationError, match=r"no script 'klingon'.*latin, cyrillic"):
        Settings()


def test_with_ocr_off_the_fork_server_preloads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCPARSE_OCR_PRELOAD", "latin")
    assert Settings().fork_server_ocr_preload == "latin"
    monkeypatch.setenv("DOCPARSE_OCR_ENABLED", "false")
    assert Settings().fork_server_ocr_preload == "none"


async def _read_scan(server: ForkServer, folder: Path, pdf: bytes) -> str:
    source, output = folder / "scan.pdf", folder / "scan.pb"
    source.write_bytes(pdf)
    child = await server.launch(["pdf", str(source), str(output), "120", "4096"], None, b"{}")
    assert child is not None
    events = [json.loads(line) async for line in child.stdout]
    assert await child.wait() == 0 and events[-1]["event"] == "done", events
    return rp.ReadingPackage.FromString(output.read_bytes()).pages[0].text


@pytest.mark.skipif(not ocr.installed_models(), reason="no tesseract models (make tesseract)")
async def test_a_fork_server_without_models_is_smaller_and_its_children_read_the_same(
    tmp_path: Path,
) -> None:
    page = scan("de", dpi=200, seed=11)
    texts, rss = {}, {}
    for preload in ("all", "none"):
        server = ForkServer(huge_pages=False, ocr_preload=preload)
        server.start()
        try:
            folder = tmp_path / preload
            folder.mkdir()
            texts[preload] = await _read_scan(server, folder, page.pdf)
            assert server.pid is not None
            # after its warm-up: the first launch waited for it
            rss[preload] = status_kb(server.pid, "VmRSS")
        finally:
            server.close()
    # The preloaded models are ~215 MB (bench/README.md); what a child loads is its own.
    assert rss["all"] - rss["none"] > 100 * 1024, rss
    assert texts["none"] == texts["all"]
    assert wer(page.truth, texts["none"], "de") < 0.1, texts["none"]
