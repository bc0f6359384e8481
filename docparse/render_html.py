"""A reading package as one self-contained, semantic HTML5 document: headings h1-h6, nested
lists, tables with their header rows and merged cells (rowspan, colspan), captions, figures,
one <section> per page, slide and sheet. Every text is escaped; no script, no style, nothing
fetched from elsewhere (an image's src is `assets/<asset id>`, a relative link: beside the
result URL it is the asset's URL; beside a file, what `docparse result --assets-dir assets`
saves). Page furniture (running headers, footers) is left out unless kept."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from docparse.render_email import attachment_note, attachment_title, header_fields, is_email
from docparse.render_layout import (
    FURNITURE,
    HEADINGS,
    Grid,
    has_headings,
    heading_level,
    item_text,
    joined_tables,
    list_level,
    marker_number,
    merged_range,
    one_line,
    page_items,
    page_text,
    sheet_rows,
    spans,
)
from docparse.v1 import reading_package_pb2 as rp


def _e(text: str) -> str:
    return escape(text, quote=True)


def _cells(
    grid: Grid,
    r: int,
    tag: str,
    found: tuple[dict[tuple[int, int], tuple[int, int]], set[tuple[int, int]]],
) -> str:
    starts, covered = found
    cells = []
    for c, text in enumerate(grid.texts[r]):
        if (r, c) in covered:
            continue
        rows, columns = starts.get((r, c), (1, 1))
        extent = (f' rowspan="{rows}"' if rows > 1 else "") + (
            f' colspan="{columns}"' if columns > 1 else ""
        )
        cells.append(f"<{tag}{extent}>{_e(one_line(text))}</{tag}>")
    return "<tr>" + "".join(cells) + "</tr>"


def html_table(grid: Grid) -> str:
    """A table: its caption, its header rows as <thead> (th), the others as <tbody>; a merged
    cell once with rowspan/colspan, the cells it covers left out."""
    head = min(grid.header_rows, len(grid.texts))
    found = spans(grid, head)
    out = ["<table>"]
    if grid.caption:
        out.append(f"<caption>{_e(grid.caption)}</caption>")
    if head:
        out += ["<thead>", *(_cells(grid, r, "th", found) for r in range(head)), "</thead>"]
    out += ["<tbody>", *(_cells(grid, r, "td", found) for r in range(head, len(grid.texts)))]
    out += ["</tbody>", "</table>"]
    return "\n".join(out)


def _figure(image: rp.ImageRef) -> str:
    """A figure; an image whose bytes were not stored (asset_id "": a large non-JPEG image
    of a job with images "referenced") is its caption alone, or a placeholder of its size."""
    img = f'<img src="assets/{_e(image.asset_id)}" alt="{_e(one_line(image.caption))}">'
    if not image.asset_id:
        img = "" if image.caption else f"<span>[image {image.width}x{image.height}]</span>"
    caption = f"<figcaption>{_e(image.caption)}</figcaption>" if image.caption else ""
    return f"<figure>{img}{caption}</figure>"


class _Lists:
    """Open lists: each item closes deeper lists, opens one a level down (a deeper jump
    counts as one level), or continues the list at its level."""

    def __init__(self) -> None:
        self.open: list[str] = []

    def item(self, block: rp.TextBlock) -> str:
        tag = "ol" if block.ordered else "ul"
        level = min(list_level(block), len(self.open) + 1)
        out = []
        while len(self.open) > level:
            out.append(f"</li></{self.open.pop()}>")
        if len(self.open) == level:
            out.append("</li>")
            if self.open[-1] != tag:
                out.append(f"</{self.open.pop()}><{tag}>")
                self.open.append(tag)
        else:
            out.append(f"<{tag}>")
            self.open.append(tag)
        number = marker_number(block.marker) if block.ordered else None
        value = f' value="{number}"' if number is not None else ""
        return "".join(out) + f"<li{value}>{_e(item_text(block).strip())}"

    def close(self) -> str:
        out = "".join(f"</li></{tag}>" for tag in reversed(self.open))
        self.open = []
        return out


def _block(block: rp.TextBlock) -> str:
    text = _e(block.text)
    if block.role in HEADINGS:
        level = heading_level(block)
        return f"<h{level}>{_e(one_line(block.text))}</h{level}>"
    if block.role in FURNITURE:
        return f"<{block.role}><p>{text}</p></{block.role}>"
    if block.role == "code":
        return f"<pre><code>{text}</code></pre>"
    if block.role == "quote":
        return f"<blockquote><p>{text}</p></blockquote>"
    role = f' data-role="{_e(block.role)}"' if block.role else ""
    return f"<p{role}>{text}</p>"


def _plain(text: str) -> list[str]:
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    return ["<p>" + "<br>\n".join(_e(line) for line in p.splitlines()) + "</p>" for p in paragraphs]


def _section(
    blocks: Sequence[rp.TextBlock],
    tables: Sequence[rp.Table],
    grids: Sequence[Grid | None],
    images: Sequence[rp.ImageRef],
    text: str,
    *,
    furniture: bool,
) -> list[str]:
    """A page's or slide's items; an image with a caption stands as a figure where its caption
    block does, other images come last."""
    items = page_items(blocks, tables, grids, furniture=furniture)
    out = _plain(text) if items is None else []
    by_caption = {one_line(image.caption): image for image in images if image.caption}
    figured: set[int] = set()
    lists = _Lists()
    run: list[str] = []  # a list's markup, one line
    for item in items or []:
        if isinstance(item, rp.TextBlock) and item.role == "list_item":
            run.append(lists.item(item))
            continue
        out.append("".join(run) + lists.close())
        run = []
        if isinstance(item, Grid):
            out.append(html_table(item))
        elif item.role == "caption" and (image := by_caption.get(one_line(item.text))):
            if id(image) not in figured:
                figured.add(id(image))
                out.append(_figure(image))
        elif item.text.strip():
            out.append(_block(item))
    out.append("".join(run) + lists.close())
    out += [_figure(image) for image in images if id(image) not in figured]
    return [part for part in out if part]


def sheet_grid(sheet: rp.Sheet) -> Grid:
    """A worksheet's rows with values as a grid; its merged ranges as spans over the rows
    present (a range's top-left row must have a value)."""
    texts = sheet_rows(sheet)
    rows = [rp.TableRow(cells=values) for values in texts]
    index = {row.number: i for i, row in enumerate(sheet.rows)}
    for merged in sheet.merged_ranges:
        found = merged_range(merged)
        if found is None or found[0] not in index:
            continue
        top, first, bottom, last = found
        present = sum(1 for number in index if top <= number <= bottom)
        rows[index[top]].spans.add(column=first - 1, row_span=present, col_span=last - first + 1)
    grid = Grid(rows, 0, sheet.name)
    return grid


def _first_heading(package: rp.ReadingPackage) -> str:
    blocks = [b for page in package.pages for b in page.blocks]
    blocks += [b for slide in package.slides for b in slide.blocks]
    return next((one_line(b.text) for b in blocks if b.role in HEADINGS), "")


def to_html(package: rp.ReadingPackage, *, furniture: bool = False) -> str:
    """The HTML5 document; the metadata title is its <title>, and an <h1> only when the
    document has no title or heading of its own. An e-mail: its subject as the <h1> and its
    header lines (a <dl>) above the body, then an <article> per attachment holding its package
    rendered (or why it was not read)."""
    title = one_line(package.metadata.title)
    out = ["<!DOCTYPE html>", "<html>", "<head>", '<meta charset="utf-8">']
    out += [f"<title>{_e(title or _first_heading(package))}</title>", "</head>", "<body>"]
    out += _content(package, furniture)
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


def _content(package: rp.ReadingPackage, furniture: bool) -> list[str]:
    """The body's elements: the title (or an e-mail's header block), pages, slides, sheets
    and attachments."""
    out: list[str] = []
    title = one_line(package.metadata.title)
    if is_email(package):
        out += _email_header(package)
    elif title and not has_headings(package):
        out.append(f"<h1>{_e(title)}</h1>")
    page_grids = joined_tables([page.tables for page in package.pages])
    for page, grids in zip(package.pages, page_grids, strict=True):
        out.append(f'<section data-page="{page.number}">')
        text = page_text(page, furniture=furniture)
        out += _section(page.blocks, page.tables, grids, page.images, text, furniture=furniture)
        out.append("</section>")
    slide_grids = joined_tables([slide.tables for slide in package.slides])
    for slide, grids in zip(package.slides, slide_grids, strict=True):
        out.append(f'<section data-slide="{slide.number}">')
        name = one_line(slide.title)
        if name and not any(b.role in HEADINGS and one_line(b.text) == name for b in slide.blocks):
            out.append(f"<h1>{_e(name)}</h1>")
        out += _section(
            slide.blocks, slide.tables, grids, slide.images, slide.text, furniture=furniture
        )
        if slide.notes:
            out.append(f'<aside data-role="notes"><p>{_e(slide.notes)}</p></aside>')
        out.append("</section>")
    for sheet in package.sheets:
        out += [f'<section data-sheet="{sheet.number}">', html_table(sheet_grid(sheet))]
        out.append("</section>")
    for attachment in package.attachments:
        out.append(f'<article data-attachment="{attachment.number}">')
        out.append(f"<h2>{_e(attachment_title(attachment))}</h2>")
        if attachment.HasField("package"):
            out += _content(attachment.package, furniture)
        else:
            out.append(f'<p data-role="reason">{_e(attachment_note(attachment))}</p>')
        out.append("</article>")
    return out


def _email_header(package: rp.ReadingPackage) -> list[str]:
    """An e-mail's subject as its <h1>, then its header lines as a description list."""
    subject = one_line(package.email.subject)
    rows = "".join(
        f"<dt>{_e(name)}</dt><dd>{_e(value)}</dd>"
        for name, value in header_fields(package, subject=False)
    )
    out = ['<div data-role="email">']
    if subject:
        out.append(f"<h1>{_e(subject)}</h1>")
    return [*out, f"<dl>{rows}</dl>", "</div>"]
