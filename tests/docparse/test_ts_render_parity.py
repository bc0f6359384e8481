"""The TypeScript SDK's toMarkdown and toHtml (clients/typescript/src/render_*.ts) print the same
bytes as the Python SDK's to_markdown and to_html (what the gateway serves as ?format=markdown
and ?format=html), with page furniture left out and kept, for packages built here with every
piece of structure the reading package carries, and for the packages the parsers make of the
shared corpus. Node renders the serialized packages with the compiled SDK (dist/)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from docparse.reasons import ErrorReason
from docparse.render_html import to_html
from docparse.render_markdown import to_markdown
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseFailure, ParseOptions
from parser_svc.parsers.detect import detect_type

REPO = Path(__file__).resolve().parents[2]
SDK = REPO / "clients" / "typescript"
CORPUS = REPO.parent / "shared" / "corpus"
# The corpus's folders whose files parse in a second without OCR or a password.
CORPUS_FOLDERS = ("text_pdf", "docx", "doc", "pptx", "xls", "encrypted_pdf")
pytestmark = pytest.mark.slow  # builds the SDK, runs node


@pytest.fixture(scope="module")
def node() -> str:
    """node, with the SDK's pinned modules installed and its TypeScript compiled to dist/."""
    node_bin, npm_bin = shutil.which("node"), shutil.which("npm")
    if node_bin is None or npm_bin is None:
        pytest.skip("node and npm are needed for the TypeScript SDK tests (not on PATH)")
    if not (SDK / "node_modules" / ".bin" / "tsc").exists():
        _run([npm_bin, "--prefix", str(SDK), "ci", "--no-audit", "--no-fund"])
    _run([npm_bin, "--prefix", str(SDK), "run", "build"])
    return node_bin


def _run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def rendered_by_typescript(
    node: str, packages: dict[str, rp.ReadingPackage], folder: Path
) -> dict[str, dict[str, str]]:
    for name, package in packages.items():
        (folder / f"{name}.pb").write_bytes(package.SerializeToString())
    script = SDK / "dist" / "test" / "render_packages.js"
    out: dict[str, dict[str, str]] = json.loads(_run([node, str(script), str(folder)]))
    return {name.removesuffix(".pb"): value for name, value in out.items()}


def rendered_by_python(package: rp.ReadingPackage) -> dict[str, str]:
    return {
        "markdown": to_markdown(package),
        "html": to_html(package),
        "markdown_furniture": to_markdown(package, furniture=True),
        "html_furniture": to_html(package, furniture=True),
    }


def assert_same(node: str, packages: dict[str, rp.ReadingPackage], folder: Path) -> None:
    typescript = rendered_by_typescript(node, packages, folder)
    assert sorted(typescript) == sorted(packages)
    for name, package in packages.items():
        python = rendered_by_python(package)
        for kind, text in python.items():
            ours = typescript[name][kind]
            if ours != text:  # the first differing line, then the whole of both
                pairs = zip(text.splitlines(), ours.splitlines(), strict=False)
                diff = next(((i, a, b) for i, (a, b) in enumerate(pairs) if a != b), "length")
                pytest.fail(f"{name} {kind}: {diff}\npython:\n{text}\ntypescript:\n{ours}")


def block(
    text: str,
    role: str = "",
    level: int = 0,
    marker: str = "",
    ordered: bool = False,
) -> rp.TextBlock:
    return rp.TextBlock(text=text, role=role, level=level, marker=marker, ordered=ordered)


def table(
    rows: list[list[str]],
    header_rows: int = 1,
    caption: str = "",
    continues: bool = False,
) -> rp.Table:
    return rp.Table(
        rows=[rp.TableRow(cells=r) for r in rows],
        header_rows=header_rows,
        caption=caption,
        continues_previous=continues,
    )


def page(number: int, blocks: list[rp.TextBlock], *tables: rp.Table) -> rp.Page:
    text = "\n\n".join(b.text for b in blocks)
    return rp.Page(number=number, blocks=blocks, tables=tables, text=text)


def spanned() -> rp.Table:
    """Region (2 rows) | Sales (2 columns) over Q1 | Q2; North covers two body rows."""
    grid = table(
        [
            ["Region", "Sales", "Sales"],
            ["Region", "Q1", "Q2"],
            ["North", "1", "2"],
            ["North", "3", "4"],
            ["South", "5", "6"],
        ],
        2,
        "Table 1: Sales <by> region",
    )
    grid.rows[0].spans.add(column=0, row_span=2, col_span=1)
    grid.rows[0].spans.add(column=1, row_span=1, col_span=2)
    grid.rows[2].spans.add(column=0, row_span=2, col_span=1)
    return grid


def structured_report() -> rp.ReadingPackage:
    """Headings of several levels, nested lists of both kinds, a spanned table with two header
    rows and its caption, a table continued over two pages, furniture, a figure."""
    furniture = [block("ACME quarterly — confidential", "header"), block("Page 1 of 3", "footer")]
    first = page(
        1,
        [
            furniture[0],
            block("Annual report", "title"),
            block("Intro text.\nTwo lines."),
            block("Scope", "heading", 2),
            block("Apples", "list_item", 1, "•"),
            block("Green", "list_item", 2, "-"),
            block("3. Wash them", "list_item", 2, "3.", ordered=True),
            block("Peel\nand slice", "list_item", 2, "4.", ordered=True),
            block("Deeper", "list_item", 4, "c)", ordered=True),
            block("Pears", "list_item", 1, "•"),
            block("ii. first", "list_item", 1, "ii.", True),
            block("Table 1: Sales <by> region", "caption"),
            furniture[1],
        ],
        spanned(),
    )
    first.images.add(asset_id="f00d.png", caption="Figure 2: A map")
    first.images.add(asset_id="cafe.jpg")
    first.images.add(width=64, height=48)  # bytes not stored: a placeholder
    first.images.add(caption="Figure 9: not stored")
    second = page(
        2,
        [
            block("Results", "heading", 3),
            block("Figure 2: A map", "caption"),
            block("Deep", "heading", 9),
            block("", "heading", 4),
            block("Body.", "footnote"),
        ],
        table([["Item", "Qty | pipes"], ["bolt", "1\nline"], ["nut", "2"]], caption="Parts"),
    )
    third = page(
        3,
        [block("Page 3 of 3", "footer"), block("After.")],
        table([["washer", "3"]], 0, continues=True),
        table([["x"]], 0, continues=True),
    )
    out = rp.ReadingPackage(content_type="pdf", metadata=rp.DocumentMetadata(title="Meta <title>"))
    out.pages.extend([first, second, third])
    return out


def geometry_pdf() -> rp.ReadingPackage:
    """PDF blocks inside a table's box become the table where the first of them stands; a cell
    holding a paragraph (over 400 characters, astral ones counted once) keeps its text as text."""
    box = rp.BoundingBox(x0=50, y0=100, x1=300, y1=200)
    inside = [
        rp.TextBlock(text=t, bbox=rp.BoundingBox(x0=60, y0=y, x1=290, y1=y + 10))
        for t, y in (("a b", 110), ("c d", 150))
    ]
    blocks = [block("Before", "heading", 1), *inside, block("After the table.")]
    p1 = page(
        1,
        blocks,
        rp.Table(
            bbox=box,
            rows=[rp.TableRow(cells=["a", "b"]), rp.TableRow(cells=["c", "d"])],
            header_rows=1,
        ),
    )
    long_cell = "\U0001d538" * 399 + "\u00e9"  # 400 code points, 799 UTF-16 units: still a table
    p2 = page(
        2,
        [
            block("cell", "heading"),
            rp.TextBlock(text="in", bbox=rp.BoundingBox(x0=60, y0=110, x1=70, y1=120)),
        ],
        rp.Table(bbox=box, rows=[rp.TableRow(cells=[long_cell])]),
    )
    prose = "word " * 90
    p3 = page(
        3,
        [rp.TextBlock(text="inside", bbox=rp.BoundingBox(x0=60, y0=110, x1=70, y1=120))],
        rp.Table(bbox=box, rows=[rp.TableRow(cells=[prose])]),
    )
    p4 = rp.Page(
        number=4, text="plain\r\nlines\x85next\u2028sep\n\n\n  \n\nlast\x0bpara \x1c end\n"
    )
    p5 = page(
        5,
        [block("", "table"), block("", "table"), block("orphan table text", "table")],
        table([], 0),
        table([["t"]], 0),
    )
    return rp.ReadingPackage(content_type="pdf", pages=[p1, p2, p3, p4, p5])


def word_document() -> rp.ReadingPackage:
    """One unnumbered page; "table" blocks place the tables; header and footer blocks."""
    blocks = [
        block("Running header", "header"),
        block("Policy", "title"),
        block("1. Purpose", "heading", 2),
        block("a table", "table"),
        block("Caption text", "caption"),
        block("x) odd", "list_item", 1, "x)", True),
        block("\u00a0 spaced \u3000 out\u2003", "list_item", 1, "\u2022 ", False),
        block("Footer 1", "footer"),
    ]
    grid = table([["<img src=x onerror=alert(1)>", "b"], ["c"], ["d", "e", "f"]], 1, "Caption text")
    return rp.ReadingPackage(content_type="docx", pages=[page(1, blocks, grid)])


def hostile() -> rp.ReadingPackage:
    text = "<script>alert('x')</script> & \"quotes\" <img src=x onerror=y>"
    p = page(
        1,
        [
            block(text, "heading", 1),
            block(text),
            block(text, "list_item", 1, "-"),
            block(text, "caption"),
            block(text, 'weird"role'),
        ],
        table([[text, "b"], ["<b>bold</b>", "d"]]),
    )
    p.images.add(asset_id='a"b<c>.png', caption=text)
    return rp.ReadingPackage(
        content_type="pdf", metadata=rp.DocumentMetadata(title=text), pages=[p]
    )


def presentation() -> rp.ReadingPackage:
    out = rp.ReadingPackage(content_type="pptx")
    s1 = out.slides.add(
        number=1,
        title="Quarter  in\nreview",
        notes="Speak <slowly>",
        text="Quarter in review\n\nPoints",
    )
    s1.blocks.extend(
        [
            block("Quarter in review"),
            block("Point one", "list_item", 1, "•"),
            block("Sub point", "list_item", 2, "\u2013"),
            block("Quarter in review"),
        ]
    )
    s1.tables.append(table([["k", "v"], ["1", "2"]]))
    s2 = out.slides.add(number=2, title="Has heading", text="Has heading")
    s2.blocks.append(block("Has heading", "title"))
    s2.images.add(asset_id="1234.png")
    s3 = out.slides.add(number=3, text="no roles here\nat all")
    s3.blocks.append(block("no roles here\nat all"))
    s3.tables.append(table([["only", "table"]], 0, continues=True))
    return out


def workbook() -> rp.ReadingPackage:
    """Merged ranges (valid, absolute, one cell, beyond the rows, not ranges), typed values."""
    out = rp.ReadingPackage(content_type="xlsx")
    sheet = out.sheets.add(
        number=1,
        name="Budget <2026>",
        merged_ranges=["A1:C1", "$a$2:$A$3", "B9", "Z1:AA40", "nope", "E5:F9", "F3:E2"],
    )
    sheet.rows.add(number=1).cells.add(column=1, string_value="Plan 2026")
    second = sheet.rows.add(number=2)
    values: list[dict[str, object]] = [
        {"number_value": 10},
        {"number_value": 2.5},
        {"number_value": 1e-5},
        {"number_value": 1.5e-7},
        {"number_value": 0.0001},
        {"number_value": 1e20},
        {"number_value": -0.0},
        {"number_value": float("inf")},
        {"number_value": float("nan")},
        {"number_value": 0.1 + 0.2},
        {"number_value": -123456.789},
        {"bool_value": True},
        {"bool_value": False},
        {"datetime_value": "2024-03-01T12:30:00"},
        {"error_value": "#DIV/0!"},
        {"string_value": "a|b\nc"},
        {},
    ]
    for column, value in enumerate(values, 1):
        second.cells.add(column=column, **value)
    sheet.rows.add(number=3).cells.add(column=2, number_value=11)
    sheet.rows.add(number=5).cells.add(column=5, string_value="e5")
    plain = out.sheets.add(number=2, name="Plain")
    plain.rows.add(number=1).cells.add(column=2, string_value="only B")
    out.sheets.add(number=3, name="Empty")
    unmerged = out.sheets.add(number=4, name="Unmerged", merged_ranges=["A7:B7"])
    unmerged.rows.add(number=1).cells.add(column=1, string_value="x")
    return out


def odd_lists_and_titles() -> rp.ReadingPackage:
    """List kinds switching at one level, a deep first item, markers the text lacks; a page
    with no roles and no tables; no headings at all but a metadata title."""
    items = [
        block("one", "list_item", 3, "1.", True),
        block("two", "list_item", 1, "-"),
        block("three", "list_item", 1, "b.", True),
        block("four", "list_item", 2, "Z)", True),
        block("five", "list_item", 0, "", True),
        block("10. ten", "list_item", 1, "10.", True),
        block("iv. roman", "list_item", 1, "iv.", True),
    ]
    pages = [page(1, [*items, block("Notes", "footnote")]), page(2, [block("only text")])]
    return rp.ReadingPackage(
        content_type="doc", metadata=rp.DocumentMetadata(title="  Spaced\ttitle "), pages=pages
    )


def email_message() -> rp.ReadingPackage:
    """An e-mail: its header block (hostile and multi-line values), a body, an attachment
    parsed (a PDF page), one not read, and a message inside it with its own attachment."""
    inner = rp.ReadingPackage(
        content_type="eml",
        email=rp.EmailHeaders(sender="bob@example.com", subject="Re:  <b>inner</b>"),
        pages=[page(1, [block("Inner body.")])],
    )
    inner.attachments.add(number=1, filename="", reason=ErrorReason.CORRUPT_DOCUMENT)
    out = rp.ReadingPackage(
        content_type="eml",
        metadata=rp.DocumentMetadata(title="Invoice  <42>", author="Ann"),
        email=rp.EmailHeaders(
            sender='"Lee, Ann" <ann@example.com>',
            to=["Bob <bob@example.com>", "carol@example.com"],
            cc=["dave@example.com"],
            bcc=["  "],
            subject="Invoice  <42>\nfolded",
            date="2026-03-03T10:15:00+01:00",
        ),
        pages=[page(1, [block("Hello,"), block("Point", "list_item", 1, "-")])],
    )
    report = rp.ReadingPackage(content_type="pdf", pages=[page(1, [block("Total", "heading")])])
    out.attachments.add(number=1, filename="report\n.pdf", package=report)
    out.attachments.add(
        number=2, filename="x.bin", reason=ErrorReason.UNSUPPORTED_FORMAT, reason_message="a <zip>"
    )
    out.attachments.add(number=3, filename="fwd.eml", package=inner)
    return out


PACKAGES: dict[str, Callable[[], rp.ReadingPackage]] = {
    "email_message": email_message,
    "email_bare": lambda: rp.ReadingPackage(content_type="msg", email=rp.EmailHeaders()),
    "structured_report": structured_report,
    "geometry_pdf": geometry_pdf,
    "word_document": word_document,
    "hostile": hostile,
    "presentation": presentation,
    "workbook": workbook,
    "odd_lists_and_titles": odd_lists_and_titles,
    "empty": rp.ReadingPackage,
}


def test_typescript_renders_the_same_bytes_as_python(node: str, tmp_path: Path) -> None:
    packages = {name: build() for name, build in PACKAGES.items()}
    report = to_markdown(packages["structured_report"])
    # The packages do carry the structure (a check of the fixtures, not of the parity).
    assert "# Annual report" in report and '<th rowspan="2">Region</th>' in report
    assert "| washer | 3 |" in report and "      c) Deeper" in report
    assert "ACME" in to_markdown(packages["structured_report"], furniture=True)
    assert '<td colspan="3">Plan 2026</td>' in to_html(packages["workbook"])
    assert_same(node, packages, tmp_path)


@pytest.mark.skipif(
    not (CORPUS / "NOTES.tsv").is_file(),
    reason=f"the shared corpus is not at {CORPUS} (it is present in CI)",
)
def test_typescript_renders_the_corpus_as_python_does(node: str, tmp_path: Path) -> None:
    """What the parsers make of real documents (furniture, tables, lists as they come)."""
    packages: dict[str, rp.ReadingPackage] = {}
    for path in sorted(p for folder in CORPUS_FOLDERS for p in (CORPUS / folder).iterdir()):
        data = path.read_bytes()
        kind = detect_type(data)
        try:
            package = parse(kind or "", data, lambda *_: None, ParseOptions.defaults())
        except ParseFailure:  # a password it needs: the corpus's failure tests cover those
            continue
        packages[f"{path.parent.name}-{path.stem}"] = package
    assert len(packages) >= 15, sorted(packages)
    roles = {b.role for p in packages.values() for page in p.pages for b in page.blocks}
    assert {"heading", "list_item", "header"} <= roles, roles  # structure to agree on
    assert_same(node, packages, tmp_path)


def test_typescript_render_unit_tests(node: str) -> None:
    """The SDK's own node:test file for the renderers (what `npm test` runs with the others)."""
    script = SDK / "dist" / "test" / "render.test.js"
    report = _run([node, "--test", "--test-reporter=tap", str(script)])
    assert "# fail 0" in report and "# pass 0" not in report, report
