"""The TypeScript renderers against the Python ones on random packages (seeded, so a failure
names a package that can be rebuilt): random roles, levels, markers, geometry, spans,
continuations, captions, cells and merged ranges, e-mail headers and attachments, over text
full of what Python and JavaScript treat differently (str.split's whitespace, splitlines'
breaks, astral characters, markup)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from docparse.reasons import ErrorReason
from docparse.v1 import reading_package_pb2 as rp
from tests.docparse.test_ts_render_parity import assert_same, node  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # builds the SDK, runs node
SEEDS = range(200)
PIECES = ["a", "Owl", "3.", "b)", "•", "-", " ", "  ", "\n", "\n\n", "\r\n", "\t", "\x0b", "\x1c",
          "\x85", "\u00a0", "\u2028", "\u3000", "\ufeff", "\U0001d538", "é", "<b>", "&amp;", '"',
          "'", "|", "<script>x</script>", "Table 1: T", "Figure 1: F", "`", "```",
          "> "]  # fmt: skip
ROLES = ["", "", "", "title", "heading", "list_item", "list_item", "caption", "table", "header",
         "footer", "footnote", "code", "quote"]  # fmt: skip
MARKERS = ["", "•", "-", "1.", "2)", "a.", "Z)", "iv.", "10.", " 3. ", "1234567890."]
CONTENT = ["pdf", "docx", "doc", "pptx", "html", "markdown", "text", "epub"]


def text(rng: random.Random, most: int = 6) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, most)))


def box(rng: random.Random) -> rp.BoundingBox:
    x, y = rng.choice([0, 50, 60]), rng.choice([0, 100, 110])
    return rp.BoundingBox(x0=x, y0=y, x1=x + rng.choice([10, 250]), y1=y + rng.choice([10, 100]))


def block(rng: random.Random) -> rp.TextBlock:
    out = rp.TextBlock(text=text(rng), role=rng.choice(ROLES), level=rng.randint(0, 8))
    out.marker, out.ordered = rng.choice(MARKERS), rng.random() < 0.5
    if rng.random() < 0.5 and out.marker:
        out.text = out.marker + " " + out.text
    if rng.random() < 0.3:
        out.bbox.CopyFrom(box(rng))
    return out


def table(rng: random.Random) -> rp.Table:
    width = rng.randint(0, 4)
    out = rp.Table(header_rows=rng.randint(0, 3), caption=rng.choice(["", "", "Table 1: T"]))
    out.continues_previous = rng.random() < 0.3
    for _ in range(rng.randint(0, 5)):
        row = out.rows.add(cells=[text(rng, 3) for _ in range(rng.randint(0, width))])
        for _ in range(rng.randint(0, 2)):
            row.spans.add(column=rng.randint(0, 4), row_span=rng.randint(0, 4),
                          col_span=rng.randint(0, 4))  # fmt: skip
    if rng.random() < 0.3:
        out.bbox.CopyFrom(box(rng))
    return out


def images(rng: random.Random) -> list[rp.ImageRef]:
    return [
        rp.ImageRef(asset_id=rng.choice(["", "ab.png", 'x"<y>.jpg']), width=rng.randint(0, 9),
                    height=rng.randint(0, 9), caption=rng.choice(["", "Figure 1: F", text(rng, 2)]))
        for _ in range(rng.randint(0, 2))
    ]  # fmt: skip


def sheet(rng: random.Random, number: int) -> rp.Sheet:
    out = rp.Sheet(number=number, name=text(rng, 2))
    for row in sorted(rng.sample(range(1, 9), rng.randint(0, 5))):
        cells = out.rows.add(number=row)
        for column in sorted(rng.sample(range(1, 6), rng.randint(1, 3))):
            kind = rng.choice(["string_value", "number_value", "bool_value", "error_value", ""])
            value = {"number_value": rng.choice([0.5, 1e-7, 3.0, -0.0, 1e300, 2 / 3]),
                     "bool_value": rng.random() < 0.5}.get(kind, text(rng, 2))  # fmt: skip
            cells.cells.add(column=column, **({kind: value} if kind else {}))
    letters = "ABCDEF"
    for _ in range(rng.randint(0, 3)):
        a, b = rng.choice(letters), rng.choice(letters)
        out.merged_ranges.append(f"{a}{rng.randint(1, 9)}:{b}{rng.randint(1, 9)}")
    return out


def email(rng: random.Random, out: rp.ReadingPackage, depth: int) -> None:
    """E-mail headers and attachments: parsed ones (a random package, one level down) and
    ones with a reason."""
    e = out.email
    e.sender, e.subject, e.date = text(rng, 3), rng.choice(["", text(rng, 3)]), text(rng, 2)
    e.to.extend(text(rng, 2) for _ in range(rng.randint(0, 2)))
    e.cc.extend(text(rng, 2) for _ in range(rng.randint(0, 1)))
    for number in range(1, rng.randint(0, 3) + 1):
        attachment = out.attachments.add(number=number, filename=text(rng, 2))
        if depth < 1 and rng.random() < 0.6:
            attachment.package.CopyFrom(package(rng.randint(0, 10**6), depth + 1))
        else:
            attachment.reason = rng.choice(["", ErrorReason.UNSUPPORTED_FORMAT])
            attachment.reason_message = text(rng, 3)


def package(seed: int, depth: int = 0) -> rp.ReadingPackage:
    rng = random.Random(seed)
    out = rp.ReadingPackage(content_type=rng.choice(CONTENT))
    out.metadata.title = rng.choice(["", text(rng, 3)])
    for number in range(1, rng.randint(0, 3) + 1):
        blocks = [block(rng) for _ in range(rng.randint(0, 8))]
        page = out.pages.add(number=number, blocks=blocks, images=images(rng))
        page.tables.extend(table(rng) for _ in range(rng.randint(0, 2)))
        page.text = rng.choice(["\n\n".join(b.text for b in blocks), text(rng, 10)])
    for number in range(1, rng.randint(0, 2) + 1):
        slide = out.slides.add(number=number, title=rng.choice(["", text(rng, 2)]))
        slide.blocks.extend(block(rng) for _ in range(rng.randint(0, 5)))
        if slide.blocks and rng.random() < 0.5:
            slide.blocks[0].text = slide.title
        slide.tables.extend(table(rng) for _ in range(rng.randint(0, 2)))
        slide.images.extend(images(rng))
        slide.notes, slide.text = rng.choice(["", text(rng, 3)]), text(rng, 6)
    out.sheets.extend(sheet(rng, number) for number in range(1, rng.randint(0, 2) + 1))
    if rng.random() < 0.3:
        email(rng, out, depth)
    return out


def test_random_packages_render_the_same(node: str, tmp_path: Path) -> None:  # noqa: F811
    packages = {f"seed-{seed}": package(seed) for seed in SEEDS}
    assert_same(node, packages, tmp_path)
