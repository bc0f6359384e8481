"""Markdown, text and HTML print only what a reading package says: headings at their level,
page and slide breaks as comments (never headings), nested lists with their markers, tables
with header rows, merged cells and continuations across pages joined, captions, page furniture
out unless kept, and in HTML every text escaped. The packages are built here, so the structure
each rendering must show is known by construction; the HTML is read back with html.parser."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

from docparse.render import render, to_html, to_markdown, to_text
from docparse.v1 import reading_package_pb2 as rp

VOID = {"meta", "img", "br", "link"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str | None]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find(self, tag: str) -> list[Node]:
        found = []
        for child in self.children:
            if isinstance(child, Node):
                found += [child] if child.tag == tag else []
                found += child.find(tag)
        return found

    def kids(self, tag: str) -> list[Node]:
        return [c for c in self.children if isinstance(c, Node) and c.tag == tag]


class TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.root = Node("#root", {})
        self.stack = [self.root]
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs))
        self.tags.append(tag)
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, (tag, [n.tag for n in self.stack])
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def tree(html: str) -> tuple[Node, list[str]]:
    builder = TreeBuilder()
    builder.feed(html)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    return builder.root, builder.tags


def block(text: str, role: str = "", level: int = 0, marker: str = "", ordered: bool = False,
          ) -> rp.TextBlock:  # fmt: skip
    return rp.TextBlock(text=text, role=role, level=level, marker=marker, ordered=ordered)


def table(
    rows: list[list[str]], header_rows: int = 1, *, caption: str = "", continues: bool = False
) -> rp.Table:
    return rp.Table(
        rows=[rp.TableRow(cells=r) for r in rows],
        header_rows=header_rows,
        caption=caption,
        continues_previous=continues,
    )


def package(*pages: list[rp.TextBlock], title: str = "") -> rp.ReadingPackage:
    out = rp.ReadingPackage(content_type="pdf", metadata=rp.DocumentMetadata(title=title))
    for number, blocks in enumerate(pages, 1):
        text = "\n\n".join(b.text for b in blocks)
        out.pages.add(number=number, blocks=blocks, text=text)
    return out


def test_headings_at_their_level_and_pages_as_comments() -> None:
    doc = package(
        [block("Field guide", "title"), block("Intro text."), block("Birds", "heading", 2)],
        [block("Owls", "heading", 3), block("Owls hunt at night."), block("Note", "heading")],
        title="metadata title",
    )
    markdown = to_markdown(doc)
    assert markdown.splitlines() == [
        "<!-- page 1 -->", "", "# Field guide", "", "Intro text.", "", "## Birds", "",
        "<!-- page 2 -->", "", "### Owls", "", "Owls hunt at night.", "", "## Note",
    ]  # fmt: skip
    assert "metadata title" not in markdown  # the document has headings of its own
    root, _ = tree(to_html(doc))
    headings = [(n.tag, n.text()) for level in range(1, 7) for n in root.find(f"h{level}")]
    assert sorted(headings) == [
        ("h1", "Field guide"), ("h2", "Birds"), ("h2", "Note"), ("h3", "Owls"),
    ]  # fmt: skip
    sections = root.find("section")
    assert [s.attrs["data-page"] for s in sections] == ["1", "2"]
    assert [n.text() for n in sections[1].find("h3")] == ["Owls"]
    # Without any heading of its own, the metadata title is the document's one heading.
    plain = package([block("Just text.", "footnote")], title="Report 7")
    assert to_markdown(plain).startswith("# Report 7\n\n<!-- page 1 -->\n\nJust text.")
    assert [n.text() for n in tree(to_html(plain))[0].find("h1")] == ["Report 7"]


def test_nested_lists_keep_their_markers_and_levels() -> None:
    items = [
        block("Apples", "list_item", 1, "•"),
        block("Green", "list_item", 2, "-"),
        block("3. Wash them", "list_item", 2, "3.", ordered=True),
        block("Peel", "list_item", 2, "4.", ordered=True),
        block("Pears", "list_item", 1, "•"),
        block("first", "list_item", 1, "(i)", ordered=True),
    ]
    doc = package([block("Shopping", "heading", 1), *items, block("After the list.")])
    markdown = to_markdown(doc)
    assert "# Shopping\n\n- Apples\n  - Green\n  3. Wash them\n  4. Peel\n- Pears\n1. first\n\n" \
        "After the list." in markdown, markdown  # fmt: skip
    root, _ = tree(to_html(doc))
    section = root.find("section")[0]
    top = section.kids("ul")[0]
    apples, pears = top.kids("li")
    assert apples.children[0] == "Apples" and pears.text() == "Pears"
    inner_ul, inner_ol = apples.kids("ul")[0], apples.kids("ol")[0]
    assert [li.text() for li in inner_ul.kids("li")] == ["Green"]
    assert [(li.text(), li.attrs.get("value")) for li in inner_ol.kids("li")] == [
        ("Wash them", "3"), ("Peel", "4"),
    ]  # fmt: skip
    assert [li.text() for li in section.kids("ol")[0].kids("li")] == ["first"]
    assert [p.text() for p in section.kids("p")] == ["After the list."]


def spanned_table() -> rp.Table:
    """Region (2 rows) | Sales (2 columns) over Q1 | Q2; North covers two body rows."""
    grid = table([["Region", "Sales", "Sales"], ["Region", "Q1", "Q2"], ["North", "1", "2"],
                  ["North", "3", "4"], ["South", "5", "6"]], header_rows=2,
                 caption="Table 1: Sales <by> region")  # fmt: skip
    grid.rows[0].spans.add(column=0, row_span=2, col_span=1)
    grid.rows[0].spans.add(column=1, row_span=1, col_span=2)
    grid.rows[2].spans.add(column=0, row_span=2, col_span=1)
    return grid


def cells(found: Node, part: str, tag: str) -> list[list[tuple[str, dict[str, str | None]]]]:
    rows = found.find(part)[0].kids("tr")
    return [[(c.text(), c.attrs) for c in tr.kids(tag)] for tr in rows]


def test_merged_cells_header_rows_and_caption() -> None:
    doc = package([block("Table 1: Sales <by> region", "caption"), block("Below.")])
    doc.pages[0].tables.append(spanned_table())
    head = [[("Region", {"rowspan": "2"}), ("Sales", {"colspan": "2"})], [("Q1", {}), ("Q2", {})]]
    body = [[("North", {"rowspan": "2"}), ("1", {}), ("2", {})], [("3", {}), ("4", {})],
            [("South", {}), ("5", {}), ("6", {})]]  # fmt: skip
    root, _ = tree(to_html(doc))
    found = root.find("table")[0]
    assert found.kids("caption")[0].text() == "Table 1: Sales <by> region"
    assert cells(found, "thead", "th") == head and cells(found, "tbody", "td") == body
    assert "Table 1" not in "".join(p.text() for p in root.find("p"))  # printed once
    # A pipe table cannot merge cells nor hold two header rows: Markdown carries the table as
    # an HTML block (one block, no blank line inside), its caption a line above it.
    markdown = to_markdown(doc)
    assert markdown.count("Table 1: Sales <by> region") == 1, markdown
    # (No geometry here, nor a "table" block: the table comes after the page's blocks.)
    below, caption, table = markdown.split("<!-- page 1 -->\n\n")[1].strip().split("\n\n")
    assert (below, caption) == ("Below.", "Table 1: Sales <by> region")
    assert table.startswith("<table>") and table.endswith("</table>")
    found = tree(table)[0].find("table")[0]
    assert not found.kids("caption")
    assert cells(found, "thead", "th") == head and cells(found, "tbody", "td") == body


def test_a_table_continued_on_the_next_page_is_one_table() -> None:
    doc = package([block("Before.")], [block("After.")])
    doc.pages[0].tables.append(table([["Item", "Qty"], ["bolt", "1"], ["nut", "2"]]))
    doc.pages[1].tables.append(table([["washer", "3"]], 0, continues=True))
    markdown = to_markdown(doc)
    assert "| Item | Qty |\n| --- | --- |\n| bolt | 1 |\n| nut | 2 |\n| washer | 3 |\n\n" \
        "<!-- page 2 -->\n\nAfter." in markdown, markdown  # fmt: skip
    assert markdown.count("| Item |") == 1
    root, _ = tree(to_html(doc))
    tables = root.find("table")
    assert len(tables) == 1 and len(root.find("section")[1].find("table")) == 0
    assert [tr.text() for tr in tables[0].find("tr")] == ["ItemQty", "bolt1", "nut2", "washer3"]
    # A continuation with nothing before it is a table of its own.
    alone = package([block("x")])
    alone.pages[0].tables.append(table([["a", "b"]], 0, continues=True))
    assert "| a | b |" in to_markdown(alone)


def test_page_furniture_is_left_out_unless_kept() -> None:
    pages = [[block("Quarterly review", "header"), block(f"Body of page {n}."),
              block(f"Page {n} of 2", "footer")] for n in (1, 2)]  # fmt: skip
    doc = package(*pages)
    for rendered in (to_markdown(doc), to_text(doc), to_html(doc)):
        assert "Body of page 2." in rendered
        assert "Quarterly review" not in rendered and "of 2" not in rendered, rendered
    for rendered in (to_markdown(doc, furniture=True), to_text(doc, furniture=True)):
        assert rendered.count("Quarterly review") == 2 and "Page 2 of 2" in rendered
    root, _ = tree(to_html(doc, furniture=True))
    assert [h.text() for h in root.find("header")] == ["Quarterly review"] * 2
    assert [f.text() for f in root.find("footer")] == ["Page 1 of 2", "Page 2 of 2"]
    data = doc.SerializeToString()
    assert b"Quarterly review" not in render(data, "markdown")
    assert render(data, "text", furniture=True).count(b"Quarterly review") == 2


def test_html_escapes_every_text_and_fetches_nothing() -> None:
    hostile = "<script>alert('x')</script> & \"quotes\""
    doc = package([block(hostile, "heading", 1), block(hostile), block(hostile, "list_item", 1)],
                  title=hostile)  # fmt: skip
    doc.pages[0].tables.append(table([[hostile, "b"], ["<img src=x onerror=y>", "d"]]))
    doc.pages[0].images.add(asset_id="ab12.png", caption=hostile)
    html = to_html(doc)
    root, tags = tree(html)
    assert html.startswith("<!DOCTYPE html>")
    assert "script" not in tags and "link" not in tags and "style" not in tags
    assert [img.attrs["src"] for img in root.find("img")] == ["assets/ab12.png"]  # relative
    assert root.find("title")[0].text() == hostile
    assert [h.text() for h in root.find("h1")] == [hostile]
    assert root.find("p")[0].text() == hostile and root.find("li")[0].text() == hostile
    assert root.find("th")[0].text() == hostile
    assert root.find("td")[0].text() == "<img src=x onerror=y>"
    assert root.find("figcaption")[0].text() == hostile


def test_a_figure_stands_where_its_caption_does() -> None:
    doc = package([block("Intro."), block("Figure 2: A map", "caption"), block("After.")])
    doc.pages[0].images.add(asset_id="f00d.png", caption="Figure 2: A map")
    doc.pages[0].images.add(asset_id="cafe.jpg")
    root, _ = tree(to_html(doc))
    section = root.find("section")[0]
    order = [c.tag for c in section.children if isinstance(c, Node)]
    assert order == ["p", "figure", "p", "figure"]
    first = section.kids("figure")[0]
    assert first.kids("img")[0].attrs["src"] == "assets/f00d.png"
    assert first.kids("figcaption")[0].text() == "Figure 2: A map"


def test_a_sheets_merged_range_is_one_cell_in_html() -> None:
    doc = rp.ReadingPackage(content_type="xlsx")
    sheet = doc.sheets.add(number=1, name="Budget", merged_ranges=["A1:C1", "A2:A3"])
    sheet.rows.add(number=1).cells.add(column=1, string_value="Plan 2026")
    second = sheet.rows.add(number=2)
    second.cells.add(column=1, string_value="Q1")
    second.cells.add(column=2, number_value=10)
    second.cells.add(column=3, number_value=2.5)
    sheet.rows.add(number=3).cells.add(column=2, number_value=11)
    root, _ = tree(to_html(doc))
    rows = [[(td.text(), td.attrs) for td in tr.kids("td")] for tr in root.find("tr")]
    assert rows == [[("Plan 2026", {"colspan": "3"})],
                    [("Q1", {"rowspan": "2"}), ("10", {}), ("2.5", {})],
                    [("11", {}), ("", {})]]  # fmt: skip
    assert root.find("caption")[0].text() == "Budget"
    # In Markdown the merged ranges keep the sheet an HTML table; without them, a pipe table.
    markdown = to_markdown(doc)
    assert '<td colspan="3">Plan 2026</td>' in markdown and "| Plan 2026" not in markdown
    del sheet.merged_ranges[:]
    assert "| Plan 2026 |  |  |\n| --- | --- | --- |\n| Q1 | 10 | 2.5 |" in to_markdown(doc)


def test_a_merged_range_written_backwards_is_the_same_range() -> None:
    """A workbook's <mergeCell ref="C2:A1"> (the parsers keep refs as written) covers A1:C2, as
    in Excel; it used to fail the whole rendering (a negative column span)."""
    doc = rp.ReadingPackage(content_type="xlsx")
    sheet = doc.sheets.add(number=1, name="Backwards", merged_ranges=["C2:A1"])
    sheet.rows.add(number=1).cells.add(column=1, string_value="Title")
    sheet.rows.add(number=2).cells.add(column=3, string_value="c2")
    forwards = rp.ReadingPackage()
    forwards.CopyFrom(doc)
    forwards.sheets[0].merged_ranges[:] = ["A1:C2"]
    assert to_html(doc) == to_html(forwards) and to_markdown(doc) == to_markdown(forwards)
    root, _ = tree(to_html(doc))
    assert [(td.text(), td.attrs) for td in root.find("td")] == [
        ("Title", {"rowspan": "2", "colspan": "3"})
    ]


def test_code_keeps_its_lines_and_quotes_stay_quotes() -> None:
    """Code (HTML <pre>, a Markdown fence) is fenced, its fence longer than any backtick run
    inside, so '# not a heading' stays code; a quote keeps '>' on every line."""
    code = "# not a heading\nprint(```)\n\n    indented"
    doc = package([block("Intro"), block(code, "code"), block("Said once.\n\nTwice.", "quote")])
    markdown = to_markdown(doc)
    assert "````\n# not a heading\nprint(```)\n\n    indented\n````" in markdown
    assert "> Said once.\n>\n> Twice." in markdown
    root, _ = tree(to_html(doc))
    assert [n.text() for n in root.find("pre")] == [code]
    assert [n.text() for n in root.find("blockquote")] == ["Said once.\n\nTwice."]
