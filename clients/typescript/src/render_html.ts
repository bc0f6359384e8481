// A reading package as one self-contained, semantic HTML5 document, byte for byte what the
// Python SDK's docparse/render_html.py prints (and the gateway serves as ?format=html):
// headings h1-h6, nested lists, tables with header rows and merged cells, captions, figures,
// one <section> per page, slide and sheet. Every text is escaped; no script, no style,
// nothing fetched from elsewhere (an image's src is `assets/<asset id>`).

import type {
  ImageRef,
  ReadingPackage,
  Sheet,
  Table,
  TextBlock,
} from "./gen/docparse/v1/reading_package_pb.js";
import { attachmentNote, attachmentTitle, headerFields, isEmail } from "./render_email.js";
import {
  append,
  FURNITURE,
  type Grid,
  HEADINGS,
  hasHeadings,
  headingLevel,
  isGrid,
  itemText,
  joinedTables,
  listLevel,
  makeGrid,
  markerNumber,
  mergedRange,
  oneLine,
  pageItems,
  pageText,
  type Row,
  type Spans,
  sheetRows,
  spans,
  splitLines,
  strip,
} from "./render_layout.js";

export interface RenderOptions {
  /** Keep page furniture (running headers, footers, page numbers); left out by default. */
  furniture?: boolean;
}

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#x27;",
};

/** Python's html.escape(text, quote=True). */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

function cells(grid: Grid, r: number, tag: string, found: Spans): string {
  const out: string[] = [];
  grid.texts[r]!.forEach((text, c) => {
    if (found.covered.has(`${r},${c}`)) return;
    const [rows, columns] = found.starts.get(`${r},${c}`) ?? [1, 1];
    const extent =
      (rows > 1 ? ` rowspan="${rows}"` : "") + (columns > 1 ? ` colspan="${columns}"` : "");
    out.push(`<${tag}${extent}>${escapeHtml(oneLine(text))}</${tag}>`);
  });
  return `<tr>${out.join("")}</tr>`;
}

/** A table: its caption, its header rows as <thead> (th), the others as <tbody>; a merged
 * cell once with rowspan/colspan, the cells it covers left out. */
export function htmlTable(grid: Grid): string {
  const head = Math.min(grid.headerRows, grid.texts.length);
  const found = spans(grid, head);
  const out = ["<table>"];
  if (grid.caption) out.push(`<caption>${escapeHtml(grid.caption)}</caption>`);
  if (head) {
    out.push("<thead>");
    for (let r = 0; r < head; r++) out.push(cells(grid, r, "th", found));
    out.push("</thead>");
  }
  out.push("<tbody>");
  for (let r = head; r < grid.texts.length; r++) out.push(cells(grid, r, "td", found));
  out.push("</tbody>", "</table>");
  return out.join("\n");
}

/** A figure; an image whose bytes were not stored (assetId "": images referenced, not JPEG)
 * is its caption alone, or a placeholder of its pixel size. */
function figure(image: ImageRef): string {
  const alt = escapeHtml(oneLine(image.caption));
  let img = `<img src="assets/${escapeHtml(image.assetId)}" alt="${alt}">`;
  if (!image.assetId)
    img = image.caption ? "" : `<span>[image ${image.width}x${image.height}]</span>`;
  const caption = image.caption ? `<figcaption>${escapeHtml(image.caption)}</figcaption>` : "";
  return `<figure>${img}${caption}</figure>`;
}

/** Open lists: each item closes deeper lists, opens one a level down (a deeper jump counts as
 * one level), or continues the list at its level. */
class Lists {
  private open: string[] = [];

  item(block: TextBlock): string {
    const tag = block.ordered ? "ol" : "ul";
    const level = Math.min(listLevel(block), this.open.length + 1);
    const out: string[] = [];
    while (this.open.length > level) out.push(`</li></${this.open.pop()}>`);
    if (this.open.length === level) {
      out.push("</li>");
      if (this.open[this.open.length - 1] !== tag) {
        out.push(`</${this.open.pop()}><${tag}>`);
        this.open.push(tag);
      }
    } else {
      out.push(`<${tag}>`);
      this.open.push(tag);
    }
    const number = block.ordered ? markerNumber(block.marker) : undefined;
    const value = number !== undefined ? ` value="${number}"` : "";
    return `${out.join("")}<li${value}>${escapeHtml(strip(itemText(block)))}`;
  }

  close(): string {
    const out = [...this.open].reverse().map((tag) => `</li></${tag}>`);
    this.open = [];
    return out.join("");
  }
}

function block(item: TextBlock): string {
  const text = escapeHtml(item.text);
  if (HEADINGS.has(item.role)) {
    const level = headingLevel(item);
    return `<h${level}>${escapeHtml(oneLine(item.text))}</h${level}>`;
  }
  if (FURNITURE.has(item.role)) return `<${item.role}><p>${text}</p></${item.role}>`;
  if (item.role === "code") return `<pre><code>${text}</code></pre>`;
  if (item.role === "quote") return `<blockquote><p>${text}</p></blockquote>`;
  const role = item.role ? ` data-role="${escapeHtml(item.role)}"` : "";
  return `<p${role}>${text}</p>`;
}

function plain(text: string): string[] {
  const paragraphs = text.split("\n\n").filter((p) => strip(p));
  return paragraphs.map((p) => `<p>${splitLines(p).map(escapeHtml).join("<br>\n")}</p>`);
}

interface Part {
  blocks: TextBlock[];
  tables: Table[];
  images: ImageRef[];
  text: string;
}

/** A page's or slide's items; an image with a caption stands as a figure where its caption
 * block does, other images come last. */
function section(part: Part, grids: (Grid | undefined)[], furniture: boolean): string[] {
  const items = pageItems(part.blocks, part.tables, grids, furniture);
  const out = items === undefined ? plain(part.text) : [];
  const byCaption = new Map<string, ImageRef>();
  for (const image of part.images) if (image.caption) byCaption.set(oneLine(image.caption), image);
  const figured = new Set<ImageRef>();
  const lists = new Lists();
  let run: string[] = []; // a list's markup, one line
  for (const item of items ?? []) {
    if (!isGrid(item) && item.role === "list_item") {
      run.push(lists.item(item));
      continue;
    }
    out.push(run.join("") + lists.close());
    run = [];
    if (isGrid(item)) {
      out.push(htmlTable(item));
      continue;
    }
    const image = item.role === "caption" ? byCaption.get(oneLine(item.text)) : undefined;
    if (image !== undefined) {
      if (!figured.has(image)) {
        figured.add(image);
        out.push(figure(image));
      }
    } else if (strip(item.text)) {
      out.push(block(item));
    }
  }
  out.push(run.join("") + lists.close());
  append(out, part.images.filter((image) => !figured.has(image)).map(figure));
  return out.filter(Boolean);
}

/** A worksheet's rows with values as a grid; its merged ranges as spans over the rows present
 * (a range's top-left row must have a value). */
export function sheetGrid(sheet: Sheet): Grid {
  const texts = sheetRows(sheet);
  const rows: Row[] = texts.map((values) => ({ cells: values, spans: [] }));
  const index = new Map<number, number>();
  sheet.rows.forEach((row, i) => {
    index.set(row.number, i);
  });
  for (const merged of sheet.mergedRanges) {
    const found = mergedRange(merged);
    if (found === undefined || !index.has(found[0])) continue;
    const [top, first, bottom, last] = found;
    let present = 0;
    for (const number of index.keys()) if (top <= number && number <= bottom) present++;
    rows[index.get(top)!]!.spans.push({
      column: first - 1,
      rowSpan: present,
      colSpan: last - first + 1,
    });
  }
  return makeGrid(rows, 0, sheet.name);
}

function firstHeading(pkg: ReadingPackage): string {
  const blocks = [...pkg.pages.flatMap((p) => p.blocks), ...pkg.slides.flatMap((s) => s.blocks)];
  const found = blocks.find((b) => HEADINGS.has(b.role));
  return found === undefined ? "" : oneLine(found.text);
}

/** The HTML5 document, as docparse.render_html.to_html prints it: the metadata title is its
 * <title>, and an <h1> only when the document has no title or heading of its own. An e-mail:
 * its subject and header lines above the body, then an <article> per attachment. */
export function toHtml(pkg: ReadingPackage, options: RenderOptions = {}): string {
  const furniture = options.furniture ?? false;
  const title = oneLine(pkg.metadata?.title ?? "");
  const out = ["<!DOCTYPE html>", "<html>", "<head>", '<meta charset="utf-8">'];
  out.push(`<title>${escapeHtml(title || firstHeading(pkg))}</title>`, "</head>", "<body>");
  append(out, content(pkg, furniture));
  out.push("</body>", "</html>");
  return `${out.join("\n")}\n`;
}

/** The body's elements: the title (or an e-mail's header block), pages, slides, sheets and
 * attachments. */
function content(pkg: ReadingPackage, furniture: boolean): string[] {
  const out: string[] = [];
  const title = oneLine(pkg.metadata?.title ?? "");
  if (isEmail(pkg)) append(out, emailHeader(pkg));
  else if (title && !hasHeadings(pkg)) out.push(`<h1>${escapeHtml(title)}</h1>`);
  const pageGrids = joinedTables(pkg.pages.map((page) => page.tables));
  pkg.pages.forEach((page, i) => {
    out.push(`<section data-page="${page.number}">`);
    const text = pageText(page, furniture);
    append(out, section({ ...page, text }, pageGrids[i]!, furniture));
    out.push("</section>");
  });
  const slideGrids = joinedTables(pkg.slides.map((slide) => slide.tables));
  pkg.slides.forEach((slide, i) => {
    out.push(`<section data-slide="${slide.number}">`);
    const name = oneLine(slide.title);
    if (name && !slide.blocks.some((b) => HEADINGS.has(b.role) && oneLine(b.text) === name)) {
      out.push(`<h1>${escapeHtml(name)}</h1>`);
    }
    append(out, section(slide, slideGrids[i]!, furniture));
    if (slide.notes) out.push(`<aside data-role="notes"><p>${escapeHtml(slide.notes)}</p></aside>`);
    out.push("</section>");
  });
  for (const sheet of pkg.sheets) {
    out.push(`<section data-sheet="${sheet.number}">`, htmlTable(sheetGrid(sheet)), "</section>");
  }
  for (const attachment of pkg.attachments) {
    out.push(`<article data-attachment="${attachment.number}">`);
    out.push(`<h2>${escapeHtml(attachmentTitle(attachment))}</h2>`);
    if (attachment.package === undefined) {
      out.push(`<p data-role="reason">${escapeHtml(attachmentNote(attachment))}</p>`);
    } else {
      append(out, content(attachment.package, furniture));
    }
    out.push("</article>");
  }
  return out;
}

/** An e-mail's subject as its <h1>, then its header lines as a description list. */
function emailHeader(pkg: ReadingPackage): string[] {
  const subject = oneLine(pkg.email?.subject ?? "");
  const rows = headerFields(pkg, false)
    .map(([name, value]) => `<dt>${escapeHtml(name)}</dt><dd>${escapeHtml(value)}</dd>`)
    .join("");
  const out = ['<div data-role="email">'];
  if (subject) out.push(`<h1>${escapeHtml(subject)}</h1>`);
  out.push(`<dl>${rows}</dl>`, "</div>");
  return out;
}
