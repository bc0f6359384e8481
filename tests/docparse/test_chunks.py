"""Chunks for retrieval as a user of `docparse.chunks` checks them: sections follow the heading
tree, every chunk holds to its budget, page furniture stays out, tables keep their header
rows in each piece, pages and boxes point back at the page, and nothing of the body is lost.
The packages are built here with their structure known by construction."""

from __future__ import annotations

import json
import random
import re

import pytest

from docparse.chunk_budget import estimated_tokens
from docparse.chunks import Chunk, to_chunks, to_chunks_jsonl
from docparse.v1 import reading_package_pb2 as rp
from parser_svc.child.parse_child import parse
from parser_svc.parsers import ParseOptions
from tests import fixtures

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
]


def block(
    text: str, role: str = "", level: int = 0, y: float = 0.0, **more: object
) -> rp.TextBlock:
    out = rp.TextBlock(text=text, role=role, level=level, source="text", **more)  # type: ignore[arg-type]
    out.bbox.CopyFrom(rp.BoundingBox(x0=50, y0=y, x1=500, y1=y + 12))
    return out


def pdf(
    *pages: list[rp.TextBlock], tables: dict[int, list[rp.Table]] | None = None
) -> rp.ReadingPackage:
    package = rp.ReadingPackage(content_type="pdf")
    for number, blocks in enumerate(pages, start=1):
        page = package.pages.add(number=number, width=600, height=800)
        page.blocks.extend(blocks)
        page.tables.extend((tables or {}).get(number, []))
    return package


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def generated(seed: int) -> tuple[rp.ReadingPackage, dict[str, int]]:
    """A long document: nested headings (levels 1-3), paragraphs from a few words to a few
    thousand characters (one with a 300-character word), a running header and a footer on
    each of its pages. Returns it and each heading's level by text."""
    rng = random.Random(seed)
    levels: dict[str, int] = {}
    body: list[tuple[str, str, int]] = []
    level = 0
    for section in range(30):
        level = rng.randint(1, min(level + 1, 3))
        title = f"Section {section} at level {level}"
        levels[title] = level
        body.append((title, "heading", level))
        for _ in range(rng.randint(0, 3)):
            text = " ".join(sentence(rng, rng.randint(3, 20)) for _ in range(rng.randint(1, 40)))
            body.append((text, "", 0))
    body.insert(5, ("x" * 300 + " tail words.", "", 0))
    pages: list[list[rp.TextBlock]] = []
    for start in range(0, len(body), 8):
        page = [block("Quarterly review — internal", "header", y=10)]
        page += [
            block(t, r, lv, y=40 + 20 * i) for i, (t, r, lv) in enumerate(body[start : start + 8])
        ]
        page.append(block(f"Page {len(pages) + 1}", "footer", y=780))
        pages.append(page)
    return pdf(*pages), levels


def squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def body_texts(package: rp.ReadingPackage) -> list[str]:
    return [b.text for p in package.pages for b in p.blocks if b.role not in ("header", "footer")]


def test_a_chunk_carries_the_heading_path_it_starts_in() -> None:
    package = pdf(
        [block("Guide", "title", 1), block("Intro text."), block("Install", "heading", 2)],
        [block("Get the wheel from the index.", y=40), block("Linux", "heading", 3, y=60)],
        [block("Use apt.", y=40), block("Use", "heading", 2, y=60), block("Run it.", y=80)],
        [block("Appendix", "heading", 1), block("Notes on the guide.", y=40)],
    )
    chunks = to_chunks(package)
    assert [c.heading_path for c in chunks] == [("Guide",), ("Appendix",)]
    assert chunks[0].text.split("\n\n")[:3] == ["Guide", "Intro text.", "Install"]
    assert chunks[0].pages == (1, 2, 3) and chunks[1].pages == (4,)
    # A budget too small for a section: each chunk names the path of the section it starts in.
    paths = {
        "Intro text.": ("Guide",),
        "Install": ("Guide", "Install"),
        "Get the wheel from the index.": ("Guide", "Install"),
        "Linux": ("Guide", "Install", "Linux"),
        "Use apt.": ("Guide", "Install", "Linux"),
        "Use": ("Guide", "Use"),
        "Run it.": ("Guide", "Use"),
        "Notes on the guide.": ("Appendix",),
    }
    small = to_chunks(package, max_chars=30)
    assert len(small) > 4
    for chunk in small:
        first = chunk.text.split("\n\n")[0]
        if first in paths:
            assert chunk.heading_path == paths[first], chunk
    assert small[-1].text == "Appendix\n\nNotes on the guide."


@pytest.mark.parametrize("max_chars", [120, 400, 1500])
def test_no_chunk_crosses_a_heading_of_its_level_and_each_holds_the_budget(max_chars: int) -> None:
    package, levels = generated(seed=max_chars)
    chunks = to_chunks(package, max_chars=max_chars)
    for chunk in chunks:
        assert chunk.chars <= max_chars, chunk
        level = len(chunk.heading_path) if chunk.heading_path else 6
        inner = chunk.text.split("\n\n")[1:]
        assert all(levels[part] > level for part in inner if part in levels), chunk
        if chunk.heading_path:
            assert levels[chunk.heading_path[-1]] == len(chunk.heading_path)
    # The headings nest as built: a section's path ends with its own heading.
    starting = [c for c in chunks if c.text.split("\n\n")[0] in levels]
    assert starting and all(c.heading_path[-1] == c.text.split("\n\n")[0] for c in starting)


@pytest.mark.parametrize("max_chars", [50, 333, 2000])
def test_nothing_of_the_body_is_lost_and_the_furniture_never_enters(max_chars: int) -> None:
    package, _ = generated(seed=3)
    chunks = to_chunks(package, max_chars=max_chars)
    joined = squeezed("".join(c.text for c in chunks))
    position = 0
    for text in body_texts(package):
        found = joined.find(squeezed(text), position)
        assert found == position, text[:60]  # in order, and nothing between but separators
        position = found + len(squeezed(text))
    assert position == len(joined)
    assert not any("Quarterly review" in c.text or re.search(r"\bPage \d", c.text) for c in chunks)


def test_a_token_budget_holds_with_the_estimate_and_with_a_given_tokenizer() -> None:
    package, _ = generated(seed=5)
    estimated = to_chunks(package, max_tokens=60)
    assert len(estimated) > 10
    assert all(estimated_tokens(c.text) <= 60 for c in estimated)
    assert max(estimated_tokens(c.text) for c in estimated) > 45  # packed, not one line each

    def utf8_bytes(text: str) -> int:
        return len(text.encode())

    package = pdf([block("Ünïcödé héading", "heading", 1), block("Größe " * 200)])
    counted = to_chunks(package, max_tokens=100, tokenizer=utf8_bytes)
    assert len(counted) > 5 and all(utf8_bytes(c.text) <= 100 for c in counted)
    with pytest.raises(ValueError, match="max_tokens"):
        to_chunks(package, tokenizer=utf8_bytes)
    with pytest.raises(ValueError, match="max_chars"):
        to_chunks(package, max_chars=0)


def test_a_long_paragraph_is_cut_at_sentence_ends_and_starts_a_chunk_of_its_own() -> None:
    sentences = [f"Sentence number {i} says something about {WORDS[i % 12]}." for i in range(60)]
    package = pdf([block("Lead paragraph."), block(" ".join(sentences)), block("After.")])
    chunks = to_chunks(package, max_chars=300)
    assert chunks[0].text == "Lead paragraph."
    # The last piece has room left for the next paragraph.
    assert chunks[-1].text.endswith("\n\nAfter.")
    pieces = [c.text.removesuffix("\n\nAfter.") for c in chunks[1:]]
    assert all(piece.endswith(".") and len(piece) <= 300 for piece in pieces)
    assert " ".join(pieces) == " ".join(sentences)  # cut between sentences only


def test_a_list_that_fits_a_chunk_is_not_cut() -> None:
    items = [
        block(
            f"Step {i}: {'do the thing ' * 3}",
            "list_item",
            level=2 if i % 2 == 0 else 1,
            marker=f"{i}.",
        )
        for i in range(1, 7)
    ]
    lead = block("Procedure. " + "Read first. " * 20)
    chunks = to_chunks(pdf([lead, *items, block("Done.")]), max_chars=400)
    holding = [c for c in chunks if "Step 1:" in c.text]
    assert len(holding) == 1 and all(f"Step {i}:" in holding[0].text for i in range(1, 7))
    lines = holding[0].text.split("\n")
    assert lines[0] == "1. Step 1: do the thing do the thing do the thing"
    assert lines[1].startswith("  2. Step 2:")  # nested one level: indented, with its marker


def ruled_table(rows: int, y: float, header_rows: int = 2, **more: object) -> rp.Table:
    table = rp.Table(header_rows=header_rows, **more)  # type: ignore[arg-type]
    table.bbox.CopyFrom(rp.BoundingBox(x0=50, y0=y, x1=550, y1=y + 20 * rows))
    if header_rows >= 2:
        merged = rp.CellSpan(column=1, col_span=2)
        table.rows.add(cells=["Region", "Sales", "Sales"], spans=[merged])
    if header_rows >= 1:
        table.rows.add(cells=["Region", "2023", "2024"])
    for i in range(rows):
        table.rows.add(cells=[f"R{i:03d}", str(i * 10), str(i * 11)])
    return table


def test_a_table_goes_whole_into_its_own_chunk_with_the_heading_before_it() -> None:
    table = ruled_table(3, y=100)
    blocks = [block("Results", "heading", 1, y=20), block("Figures follow.", y=40)]
    blocks += [block("Sales by region", "heading", 2, y=60), block("R000", y=101)]
    blocks += [block("Commentary after the table.", y=300)]
    chunks = to_chunks(pdf(blocks, tables={1: [table]}))
    assert [c.text.split("\n")[0] for c in chunks] == [
        "Results",
        "Sales by region",
        "Commentary after the table.",
    ]
    assert chunks[1].text.split("\n\n")[1].split("\n") == [
        "| Region | Sales | Sales |",
        "| Region | 2023 | 2024 |",
        "| --- | --- | --- |",
        "| R000 | 0 | 0 |",
        "| R001 | 10 | 11 |",
        "| R002 | 20 | 22 |",
    ]
    assert chunks[1].heading_path == ("Results", "Sales by region")
    assert chunks[2].heading_path == ("Results", "Sales by region")
    assert rp.BoundingBox(x0=50, y0=101, x1=500, y1=113) not in [b for c in chunks for b in c.boxes]
    assert chunks[1].boxes[-1].as_dict() == {"page": 1, "x0": 50, "y0": 100, "x1": 550, "y1": 160}


def test_a_long_table_is_split_by_rows_with_its_header_rows_in_each_piece() -> None:
    table = ruled_table(70, y=50, caption="Table 1: Sales by region")
    package = pdf([block("Table 1: Sales by region", "caption", y=30)], tables={1: [table]})
    chunks = to_chunks(package, max_chars=500)
    assert len(chunks) > 3
    body = []
    for chunk in chunks:
        lines = chunk.text.split("\n")
        assert lines[:4] == [
            "Table 1: Sales by region",
            "| Region | Sales | Sales |",
            "| Region | 2023 | 2024 |",
            "| --- | --- | --- |",
        ]
        assert chunk.chars <= 500
        body += lines[4:]
    assert body == [f"| R{i:03d} | {i * 10} | {i * 11} |" for i in range(70)]


def test_a_table_continued_on_the_next_page_is_one_table() -> None:
    first = ruled_table(3, y=600, header_rows=1)
    rest = rp.Table(continues_previous=True)
    rest.bbox.CopyFrom(rp.BoundingBox(x0=50, y0=40, x1=550, y1=80))
    rest.rows.add(cells=["R003", "30", "33"])
    rest.rows.add(cells=["R004", "40", "44"])
    package = pdf(
        # The cells' text blocks stand inside the tables' boxes, as a PDF page has them.
        [block("Before.", y=500), block("Region", y=601), block("Page 1", "footer", y=780)],
        [block("Report — draft", "header", y=10), block("R003", y=41), block("After.", y=200)],
        tables={1: [first], 2: [rest]},
    )
    chunks = to_chunks(package)
    assert [c.text for c in chunks][0::2] == ["Before.", "After."]
    lines = chunks[1].text.split("\n")
    assert lines[0] == "| Region | 2023 | 2024 |" and lines[1] == "| --- | --- | --- |"
    assert lines[2:] == [_row(i) for i in range(5)]
    assert chunks[1].pages == (1, 2)
    assert [(b.page, b.y0) for b in chunks[1].boxes] == [(1, 600), (2, 40)]


def _row(i: int) -> str:
    return f"| R{i:03d} | {i * 10} | {i * 11} |"


def test_pages_and_boxes_name_where_the_text_was() -> None:
    package = pdf(
        [block("Opening paragraph on page one.", y=700)],
        [block("Closing paragraph on page two.", y=40)],
        [block("Far later.", y=40)],
    )
    chunks = to_chunks(package, max_chars=70)
    assert chunks[0].pages == (1, 2)
    assert [b.as_dict() for b in chunks[0].boxes] == [
        {"page": 1, "x0": 50, "y0": 700, "x1": 500, "y1": 712},
        {"page": 2, "x0": 50, "y0": 40, "x1": 500, "y1": 52},
    ]
    assert chunks[1].pages == (3,)
    word = rp.ReadingPackage(content_type="docx")
    word.pages.add(number=1).blocks.add(text="A Word paragraph has no geometry.")
    assert to_chunks(word)[0].boxes == () and to_chunks(word)[0].pages == (1,)


def test_the_jsonl_is_one_object_a_line_and_the_same_every_time() -> None:
    package, _ = generated(seed=11)
    first = to_chunks_jsonl(package, max_chars=600)
    assert first == to_chunks_jsonl(package, max_chars=600)
    assert to_chunks(package, max_chars=600) == to_chunks(package, max_chars=600)
    lines = first.splitlines()
    objects = [json.loads(line) for line in lines]
    assert [o["index"] for o in objects] == list(range(len(lines)))
    assert set(objects[0]) == {"text", "heading_path", "pages", "boxes", "chars", "index"}
    assert all(o["chars"] == len(o["text"]) <= 600 for o in objects)
    assert all(set(box) == {"page", "x0", "y0", "x1", "y1"} for o in objects for box in o["boxes"])
    assert to_chunks_jsonl(rp.ReadingPackage()) == ""


def test_slides_and_sheets_chunk_by_slide_title_and_sheet_name() -> None:
    package = rp.ReadingPackage(content_type="pptx")
    for number in (1, 2):
        slide = package.slides.add(
            number=number, title=f"Slide title {number}", notes=f"Say {number}."
        )
        slide.blocks.add(text=f"Slide title {number}", role="title")
        slide.blocks.add(text=f"Point on slide {number}.")
    sheet = package.sheets.add(number=1, name="Budget")
    sheet.rows.add(
        number=1,
        cells=[rp.Cell(column=1, string_value="Item"), rp.Cell(column=2, string_value="Cost")],
    )
    for row in range(2, 40):
        sheet.rows.add(
            number=row,
            cells=[
                rp.Cell(column=1, string_value=f"Item {row}"),
                rp.Cell(column=2, number_value=row),
            ],
        )
    chunks = to_chunks(package, max_chars=200)
    assert chunks[0] == Chunk(
        0, "Slide title 1\n\nPoint on slide 1.\n\nNotes: Say 1.", ("Slide title 1",), (1,), ()
    )
    assert chunks[1].heading_path == ("Slide title 2",) and chunks[1].pages == (2,)
    sheet_chunks = chunks[2:]
    assert all(c.heading_path == ("Budget",) for c in sheet_chunks) and len(sheet_chunks) > 2
    assert all(c.text.split("\n")[-2:][0].startswith("| Item") for c in sheet_chunks[1:])
    assert all("| Item | Cost |\n| --- | --- |" in c.text for c in sheet_chunks)


def test_a_merged_range_of_a_sheet_repeats_its_value_in_the_cells_it_covers() -> None:
    package = rp.ReadingPackage(content_type="xlsx")
    sheet = package.sheets.add(number=1, name="Sales", merged_ranges=["B1:C1", "A2:A3"])
    text = [["Region", "Sales", ""], ["North", "2023", "2024"], ["", "10", "11"]]
    for number, values in enumerate(text, start=1):
        cells = [rp.Cell(column=i, string_value=v) for i, v in enumerate(values, start=1) if v]
        sheet.rows.add(number=number, cells=cells)
    (chunk,) = to_chunks(package)
    assert chunk.text.split("\n")[2:] == [
        "| Region | Sales | Sales |",
        "| --- | --- | --- |",
        "| North | 2023 | 2024 |",
        "| North | 10 | 11 |",
    ]


def test_a_parsed_word_document_chunks_without_its_furniture() -> None:
    options = ParseOptions.defaults(job_id="chunks", deployment="test")
    package = parse("docx", fixtures.docx_full(), lambda *_: None, options)
    chunks = to_chunks(package, max_chars=300)
    text = "\n".join(c.text for c in chunks)
    assert "ACME Corp confidential header" not in text and "Page footer text" not in text
    assert "The board approved the budget for the northern plant." in text
    assert any(c.heading_path[:1] == ("Annual report",) for c in chunks)
    table = [c for c in chunks if "| Ada | 97 |" in c.text]
    assert len(table) == 1 and "northern plant" not in table[0].text  # a chunk of its own
