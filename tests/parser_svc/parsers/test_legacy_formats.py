"""Old is not corrupt: Word 6.0/95, Excel 5.0/95 and PowerPoint 97-2003 files either parse or
are refused as UNSUPPORTED_FORMAT naming the format and version; CORRUPT_DOCUMENT is only for
damaged ones. Each pair below pins that difference for one format."""

from __future__ import annotations

import pytest

from docparse.v1 import reading_package_pb2 as rp
from parser_svc.api.submit import unsupported
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.detect import sniff
from parser_svc.parsers.doc import antiword_path
from tests import fixtures

TEXT = "Minutes of the meeting: the committee approved the budget for Straße 5."


def run(data: bytes, antiword: str = "") -> rp.ReadingPackage:
    kind = sniff(data).kind
    assert kind is not None
    options = ParseOptions.defaults(job_id="legacy", deployment="test", antiword=antiword)
    return parse(kind, data, lambda *_: None, options)


def failure(data: bytes, antiword: str = "") -> ParseFailure:
    with pytest.raises(ParseFailure) as caught:
        run(data, antiword)
    return caught.value


# antiword that cannot read the file (it crashes on some old files): the parser's own reading of
# Word 6/95 is what is left.
FAILING_ANTIWORD = "/bin/false"


@pytest.mark.skipif(antiword_path() is None, reason="antiword is not installed (make setup)")
@pytest.mark.parametrize("nfib", [101, 104], ids=["word6", "word95"])
def test_word6_and_word95_parse(nfib: int) -> None:
    package = run(fixtures.word6_doc(TEXT, nfib=nfib))
    assert package.pages[0].text == TEXT


@pytest.mark.parametrize(("nfib", "version"), [(101, "Word 6.0"), (104, "Word 95")])
def test_word6_that_antiword_cannot_read_is_read_from_its_main_stream(
    nfib: int, version: str
) -> None:
    package = run(fixtures.word6_doc(TEXT, nfib=nfib), FAILING_ANTIWORD)
    assert package.pages[0].text == TEXT
    assert any(f"this {version} document" in w for w in package.warnings)


def test_fast_saved_word6_is_unsupported_naming_the_version_not_corrupt() -> None:
    failed = failure(fixtures.word6_doc(TEXT, fast_saved=True), FAILING_ANTIWORD)
    assert failed.reason == "UNSUPPORTED_FORMAT"
    assert "Word 6.0 document saved with fast save" in failed.message


def test_damaged_word6_is_corrupt() -> None:
    failed = failure(fixtures.damaged_word6_doc(TEXT), FAILING_ANTIWORD)
    assert failed.reason == "CORRUPT_DOCUMENT"
    assert "Word 6.0 document is damaged" in failed.message


def test_excel95_parses() -> None:
    package = run(fixtures.excel95_xls([["Item", "Q1"], ["Servers", 1200], ["Größe", 3.5]]))
    sheet = package.sheets[0]
    assert sheet.name == "Budget"
    cells = [(c.string_value or c.number_value) for row in sheet.rows for c in row.cells]
    assert cells == ["Item", "Q1", "Servers", 1200, "Größe", 3.5]


def test_damaged_excel95_is_corrupt() -> None:
    data = fixtures.excel95_xls([["Item", "Q1"], ["Servers", 1200]])
    damaged = data[:1024] + b"\xff" * 512 + data[1536:]  # the Book stream's records overwritten
    assert failure(damaged).reason == "CORRUPT_DOCUMENT"


def test_ppt97_is_unsupported_naming_the_format_and_version() -> None:
    detection = sniff(fixtures.ppt97())
    assert detection.kind is None  # refused at submit, before anything is stored
    refused = unsupported(detection.label)
    assert refused.reason == "UNSUPPORTED_FORMAT"
    assert "PowerPoint 97-2003 presentation (PPT)" in refused.message


def test_damaged_ppt97_is_corrupt() -> None:
    damaged = fixtures.ppt97()[:3000]  # the container's directory is cut off
    assert failure(damaged).reason == "CORRUPT_DOCUMENT"
