"""A reading package as Markdown, printing only what the package says: headings at their
level, lists nested with their markers, tables (pipe tables; HTML tables where merged cells or
several header rows need them), page and slide breaks as comments a chunker can split on
(never as headings), page furniture (running headers, footers) left out unless kept."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from docparse.render_email import attachment_note, attachment_title, header_fields, is_email
from docparse.render_html import html_table, sheet_grid
from docparse.render_layout import (
    COUNTED_MARKER,
    HEADINGS,
    Grid,
    has_headings,
    heading_level,
    item_text,
    joined_tables,
    list_level,
    one_line,
    page_items,
    page_text,
    sheet_rows,
    spans,
)
from docparse.v1 import reading_package_pb2 as rp


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def markdown_table(rows: list[list[str]]) -> str:
    """Rows as a pipe table, the first row its header (Markdown requires one)."""
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    padded = [r + [""] * (width - len(r)) for r in rows]
    lines = [_row(padded[0]), "|" + " --- |" * width]
    lines += [_row(r) for r in padded[1:]]
    return "\n".join(lines)


def _table(grid: Grid) -> str:
    """A pipe table where Markdown can say it: one header row (the first row when the
    document marks none), no merged cells. Otherwise an HTML table (an HTML block, which
    Markdown renderers pass through) that keeps the header rows and the merged cells' extents;
    a pipe table would repeat or drop their text. The caption as a line above it."""
    starts, _ = spans(grid)
    if starts or grid.header_rows > 1:
        table = html_table(dataclasses.replace(grid, caption=""))
    else:
        table = markdown_table(grid.texts)
    return f"{one_line(grid.caption)}\n\n{table}" if grid.caption and table else table


def _sheet_table(sheet: rp.Sheet) -> str:
    """A worksheet as a table: HTML when it has merged ranges (see `_table`). Without them
    the rows stay plain lists (a workbook can hold millions of cells)."""
    if not sheet.merged_ranges:
        return markdown_table(sheet_rows(sheet))
    grid = sheet_grid(sheet)
    if spans(grid)[0]:
        return html_table(dataclasses.replace(grid, caption=""))
    return markdown_table(grid.texts)


def fenced(text: str) -> str:
    """Code as a fenced block, its fence longer than any run of backticks inside."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def quoted(text: str) -> str:
    """A block quote: every line behind '> ' ('>' alone on an empty line)."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.split("\n"))


def _list_line(block: rp.TextBlock) -> str:
    indent = "  " * (list_level(block) - 1)
    marker = block.marker.strip()
    mark = (marker if COUNTED_MARKER.match(marker) else "1.") if block.ordered else "-"
    text = item_text(block).strip().replace("\n", "\n" + indent + " " * (len(mark) + 1))
    return f"{indent}{mark} {text}"


def _section(
    blocks: Sequence[rp.TextBlock],
    tables: Sequence[rp.Table],
    grids: Sequence[Grid | None],
    text: str,
    *,
    furniture: bool,
    already: str = "",
) -> list[str]:
    """A page's or slide's items as Markdown parts: consecutive list items make one list.
    `already`: a title printed above (the first block repeating it is left out)."""
    items = page_items(blocks, tables, grids, furniture=furniture)
    if items is None:
        return [text]  # plain text (OCR lines stay lines of one paragraph)
    out: list[str] = []
    items_run: list[str] = []
    for item in items:
        if isinstance(item, rp.TextBlock) and item.role == "list_item":
            items_run.append(_list_line(item))
            continue
        if items_run:
            out.append("\n".join(items_run))
            items_run = []
        if isinstance(item, Grid):
            out.append(_table(item))
            continue
        line = one_line(item.text)
        if already and line == one_line(already):
            already = ""
        elif item.role in HEADINGS and line:
            out.append("#" * heading_level(item) + " " + line)
        elif item.role == "code":
            out.append(fenced(item.text))
        elif item.role == "quote":
            out.append(quoted(item.text))
        else:
            out.append(item.text)
    if items_run:
        out.append("\n".join(items_run))
    return out


# Formats without pages of their own: the package holds them as one page.
FLOWING = ("docx", "doc", "odt", "rtf", "html", "markdown", "text", "eml", "msg")


def to_markdown(package: rp.ReadingPackage, *, furniture: bool = False) -> str:
    """Markdown of each page (or the Word document's body), slide and sheet. The metadata
    title is a `#` heading only when the document has no title or heading of its own. An
    e-mail: its subject as the `#` heading and its header lines above the body, then each
    attachment under "## Attachment N: name", its package rendered (or why it was not read)."""
    out: list[str] = []
    title = package.metadata.title
    if is_email(package):
        out += _email_head(package)
    elif title and not has_headings(package):
        out.append(f"# {one_line(title)}")
    # A flowing document (Word, HTML, text, ...) is one page whose number means nothing: no
    # page comment.
    unpaged = package.content_type in FLOWING and len(package.pages) == 1
    page_grids = joined_tables([page.tables for page in package.pages])
    for page, grids in zip(package.pages, page_grids, strict=True):
        if not unpaged:
            out.append(f"<!-- page {page.number} -->")
        text = page_text(page, furniture=furniture)
        out += _section(page.blocks, page.tables, grids, text, furniture=furniture)
    slide_grids = joined_tables([slide.tables for slide in package.slides])
    for slide, grids in zip(package.slides, slide_grids, strict=True):
        out.append(f"<!-- slide {slide.number} -->")
        title = one_line(slide.title)
        headed = any(b.role in HEADINGS and one_line(b.text) == title for b in slide.blocks)
        if title and not headed:
            out.append(f"# {title}")
        out += _section(
            slide.blocks,
            slide.tables,
            grids,
            slide.text,
            furniture=furniture,
            already="" if headed else title,
        )
        if slide.notes:
            out.append(f"> Notes: {slide.notes}")
    for sheet in package.sheets:
        out.append(f"## Sheet {sheet.name}")
        out.append(_sheet_table(sheet))
    out += _attachments(package, furniture)
    return "\n\n".join(part for part in out if part) + "\n"


def _email_head(package: rp.ReadingPackage) -> list[str]:
    """An e-mail's subject as its heading, then its header lines (hard line breaks)."""
    subject = one_line(package.email.subject)
    lines = [f"**{name}:** {value}" for name, value in header_fields(package, subject=False)]
    return [f"# {subject}" if subject else "", "  \n".join(lines)]


def _attachments(package: rp.ReadingPackage, furniture: bool) -> list[str]:
    """Each attachment under its own heading: its package rendered, or why it was not read."""
    out: list[str] = []
    for attachment in package.attachments:
        out.append(f"## {attachment_title(attachment)}")
        if attachment.HasField("package"):
            out.append(to_markdown(attachment.package, furniture=furniture).rstrip("\n"))
        else:
            out.append(attachment_note(attachment))
    return out
